"""The source's operator events name who asked (``actor``, new versions); a record of an older
release, which did not, reads with ``actor=""`` (upcast on read, never rewritten)."""
from __future__ import annotations

import pytest

from schedfence.domain.model import Fact, upcast
from schedfence.domain.source.runs import BackfillRequested, ProgramUpdated, Triggered
from schedfence.domain.source.schedule import OPERATOR_EVENTS, Schedule, signed

OLDER = {Schedule.Created: 4, Schedule.Paused: 2, Schedule.NotesUpdated: 1,
         Schedule.Deleted: 1, Triggered: 1, BackfillRequested: 1, ProgramUpdated: 1}


@pytest.mark.parametrize("event", OPERATOR_EVENTS, ids=lambda e: e.__name__)
def test_an_older_record_reads_as_not_recorded(event: type) -> None:
    older = OLDER[event]
    assert event.class_version == older + 1  # type: ignore[attr-defined]
    stored: dict = {"paused": True}
    upcast(event, stored, older)
    assert stored == {"paused": True, "actor": ""}
    assert "actor" in event.model_fields  # type: ignore[attr-defined]


def test_signed_names_the_actor_on_operator_events_only() -> None:
    from schedfence.domain.source.runs import TimesProcessed
    facts = signed([Fact(TimesProcessed, {"cursor": "c"}), Fact(Schedule.Paused,
                                                                {"paused": True})], "alice")
    assert facts == [Fact(TimesProcessed, {"cursor": "c"}),
                     Fact(Schedule.Paused, {"paused": True, "actor": "alice"})]
