"""``schedfence scheduler``'s pause between passes (infra/engines/scheduler.py, ``pause``): a
timer to the earliest due time the pass saw in the index, at least ``MIN_PAUSE``, at most the
poll interval."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from schedfence.infra.engines.scheduler import MIN_PAUSE, SchedulerReport, pause

NOW = datetime(2026, 12, 6, 8, 0, 0, tzinfo=timezone.utc).timestamp()


def due_in(seconds: float) -> SchedulerReport:
    return SchedulerReport(next_due=datetime.fromtimestamp(NOW + seconds, timezone.utc))


@pytest.mark.parametrize("report, poll, expected", [
    (SchedulerReport(), 1.0, 1.0),  # nothing due: the poll interval
    (due_in(0.3), 1.0, 0.3),  # a schedule due sooner: its time
    (due_in(5.0), 1.0, 1.0),  # later than a poll: the poll (a command's change is seen)
    (due_in(0.001), 1.0, MIN_PAUSE),  # close times share a pass
    (due_in(-2.0), 1.0, MIN_PAUSE),  # due while the pass ran: the next pass soon after
    (due_in(0.3), 0.0, 0.0),  # a loop asked not to pause (tests) does not
])
def test_the_pause_is_the_time_to_the_next_due_bounded(report, poll, expected) -> None:
    assert pause(report, poll, NOW) == pytest.approx(expected)
