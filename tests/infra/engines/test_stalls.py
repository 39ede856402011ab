"""The stall table (infra/engines/stalls.py) and the engines' failure notes
(infra/engines/failures.py): a streak keeps its start while the migration has no event after
its last failure, and starts again once it has; an attempt that progressed notes nothing."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import create_engine

from schedfence.infra.engines.failures import Failure, FailureNotes, after_attempt
from schedfence.infra.engines.stalls import Stalls


def test_a_streak_keeps_its_start_until_the_migration_moves(tmp_path: Path) -> None:
    table = Stalls(create_engine(f"sqlite:///{tmp_path / 's.db'}"))
    mid = uuid.uuid4()
    long_ago = datetime.now(timezone.utc) - timedelta(hours=1)
    table.note(mid, "rollback", Failure("settle", "busy", long_ago))
    first = table.read()[str(mid)]
    table.note(mid, "rollback", Failure("settle", "busy again", long_ago))
    second = table.read()[str(mid)]
    assert (second.since_us, second.failures, second.error) == (first.since_us, 2, "busy again")
    assert second.at_us >= first.at_us and second.current(first.at_us)
    # an event after the last failure: the next failure starts a new streak
    moved = datetime.fromtimestamp(second.at_us / 1e6 + 1, timezone.utc)
    table.note(mid, "rollback", Failure("describe", None, moved))
    third = table.read()[str(mid)]
    assert third.failures == 1 and third.since_us > second.since_us and third.error is None
    assert not third.current(third.at_us + 1)
    assert table.prune([]) == 1 and table.read() == {}


def test_notes_keep_the_last_failed_call_of_an_attempt_that_did_not_progress(
        tmp_path: Path) -> None:
    table = Stalls(create_engine(f"sqlite:///{tmp_path / 's.db'}"))
    notes, mid, other = FailureNotes(), uuid.uuid4(), uuid.uuid4()

    def boom() -> None:
        raise TimeoutError("no answer within 5.0s")
    with notes.attempt(mid, None):
        try:
            notes.calling("settle", boom)
        except TimeoutError:
            pass
        assert notes.calling("describe", lambda: 7) == 7  # a call that answered
    after_attempt(table, notes, mid, "backoff", "rollback")
    assert table.read()[str(mid)].error == "TimeoutError: no answer within 5.0s"
    with notes.attempt(other, None):
        try:
            notes.calling("start", boom)
        except TimeoutError:
            pass
    after_attempt(table, notes, other, "progress", "rollback")  # it moved: no stall
    assert str(other) not in table.read()
    notes.calling("start", lambda: None)  # outside an attempt: nothing kept
    after_attempt(table, notes, other, "wait", "forward")
    assert table.read()[str(other)].step == "wait"
