"""The on-call rule for a migration whose attempts keep failing (projections/queries.py
``oncall`` with the stall rows of infra/engines/stalls.py): stuck once its streak of failures
is older than the threshold, even though each failed attempt appended an event (a reconcile
that reads the destination as unavailable records it), and never on a row that an event
followed (the migration moved on). Times are given (``now``), not read from the clock."""
from __future__ import annotations

import pytest
from sqlalchemy import select

from schedfence.projections import queries as q
from schedfence.projections import tables as t
from tests.projections.histories import Histories, build


@pytest.fixture
def hist(file_store_url: str):
    h = build(file_store_url)
    yield h
    h.close()


def _claimed(hist: Histories) -> tuple[object, str, int]:
    views = hist.service.views
    views.catch_up()
    engine = views.projector.view.engine
    with engine.connect() as conn:
        mid, updated = conn.execute(select(t.migrations.c.migration_id, t.migrations.c.updated_us)
                                    .where(t.migrations.c.schedule_id == "claimed")).one()
    return engine, mid, updated


def _stall(mid: str, since_us: int, at_us: int) -> dict:
    return {"migration_id": mid, "direction": "rollback", "since_us": since_us, "at_us": at_us,
            "failures": 7, "step": "describe",
            "error": "DestinationUnavailable: CANCELLED: Timeout expired"}


def _stuck(engine: object, after: float, now_us: int, stalls: dict) -> dict:
    return {i.migration.schedule_id: i for i in q.oncall(engine, after, now=now_us / 1e6,
                                                         stalls=stalls)
            if i.category == "stuck"}


def test_failing_attempts_that_write_events_still_count_as_no_progress(hist) -> None:
    engine, mid, updated = _claimed(hist)
    now = updated + 10_000_000  # its last event 10 s ago: under a 100 s threshold
    assert "claimed" not in _stuck(engine, 100, now, {})
    # its failures began 500 s before that event, the latest after it: stuck 510 s
    stalls = {mid: _stall(mid, updated - 500_000_000, updated + 1)}
    item = _stuck(engine, 100, now, stalls)["claimed"]
    assert item.stall is not None and item.stall["stalled_seconds"] == 510.0
    assert item.actions[0].startswith("no progress: 7 failed attempt(s) at describe")
    assert "last error: DestinationUnavailable: CANCELLED: Timeout expired" in item.actions[0]
    assert any("reconcile only, never restart" in a for a in item.actions[1:])
    assert item.to_dict()["stall"]["error"].endswith("Timeout expired")
    # a streak younger than the threshold is not stuck yet
    assert "claimed" not in _stuck(engine, 600, now, stalls)


def test_a_stall_row_an_event_followed_is_ignored(hist) -> None:
    engine, mid, updated = _claimed(hist)
    now = updated + 10_000_000
    stale = {mid: _stall(mid, updated - 500_000_000, updated - 1)}  # the event came after
    assert "claimed" not in _stuck(engine, 100, now, stale)
    # once idle past the threshold it is stuck as before, without the stale error
    item = _stuck(engine, 5, now, stale)["claimed"]
    assert item.stall is None and "last error" not in " ".join(item.actions)
