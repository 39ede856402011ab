"""Outcomes of action starts and runs, as given-events / when-decision / then-events: an
unknown outcome is retried with backoff under the same request id (and holds the phase gate),
a refusal for good is final, ``pause_on_failure`` pauses on a failed or timed-out action (not
while fenced), and ``cancel_other`` / ``terminate_other`` record the stop the runner is asked
for until the run is seen closed."""
from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.rollback.decide import rollback_gate
from schedfence.domain.errors import PhaseBlocked
from schedfence.domain.ports import (AlreadyStarted, DestinationUnavailable,
                                     InvalidStartRequest, StartAccepted)
from schedfence.domain.source.program import Program
from schedfence.domain.source.runs import ActionStarted
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.scheduling import (MAX_BACKOFF, backoff, issued_due, run_closed,
                                          start_answered, stops_pending, tick)
from schedfence.domain.source.spec import make_spec

NS, SID = "ns", "s"


def schedule(overlap: str = "skip", pause_on_failure: bool = False) -> Schedule:
    program = Program(make_spec(intervals=[(10, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="act"),
                      make_policies(overlap=overlap, pause_on_failure=pause_on_failure))
    return Schedule.create(NS, SID, 1, False, "", None, 0, program)


def names(facts) -> list[str]:
    return [f.event.__name__ for f in facts]


def issued_at(s: Schedule, seconds: int = 10) -> tuple[dict, datetime]:
    now = parse_nominal(s.state.cursor) + timedelta(seconds=seconds)
    s.record(tick(s.state, now))
    return s.state.issued[-1], now


def started(s: Schedule, issued: dict, now: datetime) -> None:
    s.record(start_answered(s.state, issued, StartAccepted("run-1", "run-1", "running"), now))


def test_an_unknown_outcome_is_retried_after_a_growing_backoff_with_the_same_request_id():
    s = schedule()
    issued, now = issued_at(s)
    facts = start_answered(s.state, issued, DestinationUnavailable("timeout"), now)
    assert names(facts) == ["ActionStartRetrying"] and facts[0].fields["attempt"] == 1
    s.record(facts)
    assert issued_due(s.state, now) == []  # backing off: not asked again yet
    [again] = issued_due(s.state, now + backoff(1))
    assert again["request_id"] == issued["request_id"]
    s.record(start_answered(s.state, again, DestinationUnavailable("timeout"), now))
    assert s.state.issued[0]["attempt"] == 2
    assert [backoff(n).total_seconds() for n in (1, 2, 3, 30)] == [1, 2, 4, MAX_BACKOFF]


def test_a_start_in_backoff_holds_the_phase_gate_until_it_is_answered():
    s = schedule("allow_all")  # a running action holds the others' gate too
    issued, now = issued_at(s)
    s.record(start_answered(s.state, issued, DestinationUnavailable("timeout"), now))
    with pytest.raises(PhaseBlocked):
        rollback_gate(s.state, "R1", None, None)
    started(s, issued, now)
    assert rollback_gate(s.state, "R1", None, None) == "accept"


def test_our_own_request_seen_as_already_started_is_the_same_start():
    s = schedule()
    issued, now = issued_at(s)
    facts = start_answered(s.state, issued, AlreadyStarted(issued["request_id"], "r", "r"), now)
    assert names(facts) == ["ActionStarted"]


@pytest.mark.parametrize("answer", [InvalidStartRequest("bad"), AlreadyStarted("other", "r", "r")])
def test_a_refusal_for_good_is_final_and_pauses_only_under_pause_on_failure(answer):
    for pause in (False, True):
        s = schedule(pause_on_failure=pause)
        issued, now = issued_at(s)
        facts = start_answered(s.state, issued, answer, now)
        assert names(facts) == ["ActionStartFailed"] + (["PausedOnFailure"] if pause else [])
        s.record(facts)
        assert s.state.issued == [] and s.state.paused is pause


@pytest.mark.parametrize("status,pauses", [("failed", True), ("timed_out", True),
                                           ("completed", False), ("canceled", False),
                                           ("terminated", False)])
def test_pause_on_failure_pauses_on_a_failed_or_timed_out_action(status, pauses):
    s = schedule(pause_on_failure=True)
    issued, now = issued_at(s)
    started(s, issued, now)
    s.record(run_closed(s.state, issued["workflow_id"], status))
    assert s.state.running == [] and s.state.paused is pauses
    if pauses:
        assert issued["workflow_id"] in s.state.notes


def test_a_failure_seen_while_fenced_is_recorded_but_does_not_touch_pause_or_notes():
    s = schedule(pause_on_failure=True)
    issued, now = issued_at(s)
    started(s, issued, now)
    s.fence_for_migration("R1", __import__("uuid").uuid4())
    facts = run_closed(s.state, issued["workflow_id"], "failed")
    assert names(facts) == ["ActionClosed"]  # an observation; the fence owns pause and notes


@pytest.mark.parametrize("overlap,kind", [("cancel_other", "cancel"),
                                          ("terminate_other", "terminate")])
def test_stop_policies_record_the_stop_once_and_the_next_start_waits_for_the_close(overlap, kind):
    s = schedule(overlap=overlap)
    issued, now = issued_at(s)
    started(s, issued, now)
    s.record(tick(s.state, now + timedelta(seconds=10)))
    assert stops_pending(s.state) == [(issued["workflow_id"], kind)]
    assert s.state.buffered and not s.state.issued
    assert "StopRequested" not in names(tick(s.state, now + timedelta(seconds=10)))
    with pytest.raises(PhaseBlocked):  # no fence while a stop is pending
        rollback_gate(s.state, "R1", None, None)
    s.record(run_closed(s.state, issued["workflow_id"], "canceled"))
    assert stops_pending(s.state) == []
    facts = tick(s.state, now + timedelta(seconds=10))
    assert "ActionStartIssued" in names(facts)


def test_an_answer_to_a_start_answered_already_records_nothing():
    s = schedule()
    issued, now = issued_at(s)
    started(s, issued, now)
    assert start_answered(s.state, issued, StartAccepted("x", "x", "running"), now) == []
    assert ActionStarted.__name__ == "ActionStarted"
