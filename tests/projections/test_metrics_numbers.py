"""The metrics' numbers kept in the projection (projections/metrics.py): counted from the
events, so projecting incrementally, in one go after the fact, or rebuilding after a crash all
give the same numbers, and those equal what the log holds."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from schedfence.projections.metrics import COUNTED
from tests.helpers import Crash
from tests.projections.histories import build


@pytest.fixture
def store(file_store_url: str) -> str:
    return file_store_url


def _numbers(service) -> object:
    """The snapshot without what depends on when it was taken."""
    return replace(service.views.metrics(), lag_events=0, lag_seconds=0.0)


def _from_the_log(service) -> dict[tuple[str, str], int]:
    topics = Counter(n.topic for n in service.app.notifications())
    return {(direction, kind): topics[cls.TOPIC] for direction, kind, cls in COUNTED}


def test_the_counters_equal_the_events_in_the_log(store: str) -> None:
    h = build(store)
    try:
        snap = h.service.views.metrics()
        assert snap.totals == _from_the_log(h.service)
        assert snap.totals[("rollback", "started")] == 9  # legacy v1 records included
        assert snap.totals[("rollback", "parked")] >= 2 and snap.stopped is None
        assert snap.lag_events == snap.log_position > 0  # nothing was projected before
        assert h.service.views.metrics().lag_events == 0
        by_state = Counter()
        for (_namespace, state), n in snap.by_state.items():
            by_state[state] += n
        assert {k: v for k, v in h.service.stats()["by_state"].items() if v} == by_state
    finally:
        h.close()


def test_incremental_rebuilt_and_resumed_after_a_crash_agree(store: str) -> None:
    step_by_step = build(store, between=lambda h: h.service.catch_up())
    try:
        incremental = _numbers(step_by_step.service)
        step_by_step.service.views.rebuild()
        assert _numbers(step_by_step.service) == incremental
        views = step_by_step.service.views
        hook_calls = []

        def crash(point: str) -> None:
            hook_calls.append(point)
            if point == "projection.rows_written" and len(hook_calls) == 1:
                raise Crash(point)

        views.projector.view.drop_tables()
        views.projector.view.create_tables()
        views.projector.view.crash_hook = crash
        with pytest.raises(Crash):
            views.catch_up()  # the first batch rolls back: nothing half counted
        assert _numbers(step_by_step.service) == incremental
    finally:
        step_by_step.close()
