"""The key table (projections/key_table.py): who runs each schedule by its history, every case
of ``owner_of``; and the projection (v6) knows the incarnation a forward migration created, so
``list`` agrees with ``status`` after a forward."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from schedfence.domain.source.spec import make_spec
from schedfence.domain.source.state import ScheduleState
from schedfence.infra.application.views import schedule_list
from schedfence.projections.key_table import KeyRow, Owner, owner_of
from tests.helpers import NS
from tests.infra.web import worlds

NOW = datetime(2026, 12, 5, 10, 30, tzinfo=timezone.utc)
HOURLY = make_spec(intervals=[(3600, 0)]).model_dump(mode="json")


def row(closed: bool = False, reason: str = "", **fields: object) -> KeyRow:
    state = ScheduleState(NS, "k", 1, paused=True, notes="", closed=closed, close_reason=reason)
    return replace(KeyRow(NS, "k", 1, state, None), **fields)


def owner(r: KeyRow) -> Owner:
    return owner_of([r], NOW)[(NS, "k")]


def test_who_runs_a_schedule_by_its_history() -> None:
    assert owner(row()) == Owner("source")  # paused on the source: still the source's
    assert owner(row(state="parked", direction="rollback")).owner == "source"
    assert owner(row(True, "deleted")) == Owner("none")
    assert owner(row(True, "takeover_abandoned")).owner == "temporal"  # forward aborted
    assert owner(row(forward_open="f-1")).owner == "temporal"  # being taken in
    assert owner(row(True, "migrated", handed_paused=True)) == Owner("temporal", "paused")
    assert owner(replace(row(), schedule=None, forwards=1)).owner == "temporal"
    assert owner(replace(row(), schedule=None)).owner == "none"


def test_a_handed_over_schedules_next_run_is_its_specs_next_time() -> None:
    handed = row(True, "migrated", handed_paused=False)
    assert handed.schedule is not None
    found = owner(replace(handed, schedule=replace(handed.schedule, spec=HOURLY)))
    assert found == Owner("temporal", "2026-12-05T11:00:00+00:00")
    assert owner(handed) == Owner("temporal")  # no spec: no next run


def test_list_agrees_with_status_after_a_forward(tmp_path: Path) -> None:
    w = worlds.mixed(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        status = w.service.schedule(NS, worlds.BACK)
        [listed] = [r for r in schedule_list(w.service, NS)["schedules"]
                    if r["schedule_id"] == worlds.BACK]
        [key] = w.service.views.key_rows((NS, worlds.BACK))
    finally:
        w.service.close()
    assert status.incarnation == listed["incarnation"] == key.incarnation == 2
    assert listed["closed"] is status.closed is False
    assert (key.direction, key.state) == ("forward", "completed")
