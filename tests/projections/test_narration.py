"""One narration per event type (projections/narration.py), used by history, replay, the demo
and on-call advice."""
from __future__ import annotations

import inspect

from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.rollback.phases import PARK_MEANING
from schedfence.domain.source.schedule import Schedule
from schedfence.infra.application.service import open_service
from schedfence.projections import narration
from schedfence.projections.narration import narrate, park_text


def _event_classes(owner: type) -> list[type]:
    return [c for _, c in inspect.getmembers(owner, inspect.isclass)
            if getattr(c, "TOPIC", None) and c.__name__ not in ("Created", "Snapshot")
            and c.__qualname__.startswith(owner.__name__ + ".")]


def test_every_migration_and_source_event_type_has_a_narration():
    names = {c.__name__ for c in _event_classes(Migration) + _event_classes(Schedule)}
    assert names and names <= set(narration._NARRATE), names - set(narration._NARRATE)


def test_a_whole_rollback_is_narrated_event_by_event():
    with open_service("sqlite:///:memory:", "sim") as svc:
        svc.create_schedule("ns", "s1")
        svc.rollback("ns", "s1", "R1")
        svc.run_until_idle()
        lines = {e.type.rsplit(".", 1)[-1]: narrate(e.type.rsplit(".", 1)[-1], e.data)
                 for e in svc.history("ns", "s1") if e.aggregate != "key"}
    assert lines["RequestIdAssigned"].actor == "admin" and "R1" in lines["RequestIdAssigned"].text
    assert lines["DestinationAnswered"].text.startswith("destination answered created")
    assert lines["ClosedByMigration"].actor == "source"
    assert lines["SourceClosed"].text.startswith("source closed")


def test_every_park_reason_reads_the_same_in_narration_and_errors():
    for reason in Migration.MigrationParked.model_fields["reason"].annotation.__args__:
        assert reason in PARK_MEANING, reason
        assert PARK_MEANING[reason] in park_text(reason)


def test_an_event_type_of_a_later_release_is_not_narrated():
    assert narrate("OperatorNoted", {"note": "x"}) is None
    assert narrate("MigrationParked", {}) is None  # fields that do not fit: not a crash
