"""The checker over the source scheduler's actions: a clean history passes; an action while
fenced (I1), a nominal time started twice (I17) and a tick that loses a due time (I18) are
each flagged at the events involved."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.invariants.checker import check_history
from schedfence.domain.source.program import Program
from schedfence.domain.source.runs import ActionStartIssued, TimesProcessed
from schedfence.domain.source.scheduling import tick
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.spec import make_spec


def schedule(overlap: str = "allow_all") -> Schedule:
    return Schedule.create("ns", "s", 1, False, "", None, 0, Program(
        make_spec(intervals=[(2, 0)]),
        make_action(workflow_type="W", task_queue="q", workflow_id="act"),
        make_policies(overlap=overlap)))


def cursor(s: Schedule) -> datetime:
    return datetime.fromisoformat(s.state.cursor.replace("Z", "+00:00"))


def history(s: Schedule) -> list[tuple[int, object]]:
    return list(enumerate(s.collect_events(), start=1))


def invariants(s: Schedule) -> list[str]:
    return [v.invariant for v in check_history(history(s))]


def test_ticks_decided_by_the_domain_satisfy_every_rule():
    s = schedule()
    t0 = cursor(s)
    for seconds in (3, 9, 10, 31):
        s.record(tick(s.state, t0 + timedelta(seconds=seconds)))
    s.set_paused(True)
    s.record(tick(s.state, t0 + timedelta(seconds=60)))
    assert s.state.action_count > 10 and invariants(s) == []


def test_an_action_event_while_fenced_is_flagged_i1():
    s = schedule()
    s.fence_for_migration("R1", uuid.uuid4())
    s.record([(TimesProcessed, {"cursor": "2099-01-01T00:00:00Z", "due": [], "skipped": [],
                                "buffer": []})])
    assert "I1" in invariants(s)


def test_a_nominal_time_started_twice_is_flagged_i17():
    s = schedule()
    s.record(tick(s.state, cursor(s) + timedelta(seconds=3)))
    s.record([(ActionStartIssued, dict(s.state.issued[0]))])  # the same time, issued again
    assert invariants(s).count("I17") == 1


def test_a_tick_that_loses_a_due_time_is_flagged_i18():
    s = schedule()
    later = cursor(s) + timedelta(seconds=10)
    s.record([(TimesProcessed, {"cursor": later.strftime("%Y-%m-%dT%H:%M:%SZ"), "due": [],
                                "skipped": [], "buffer": []})])
    assert invariants(s) == ["I18"]
