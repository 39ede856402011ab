"""The source scheduler's tick, on the Schedule aggregate: given a schedule with a program,
when ticks come, then due times are buffered, started (recorded before the call, with a
deterministic request id) or skipped with a reason; nothing while fenced (I1); and a rollback
waits behind the phase gate while a start is in flight."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.source.action import action_request_id, make_action, make_policies
from schedfence.domain.rollback.decide import rollback_gate
from schedfence.domain.errors import PhaseBlocked
from schedfence.domain.source.program import Program
from schedfence.domain.source.runs import ActionStarted
from schedfence.domain.source.scheduling import run_closed, tick
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.spec import make_spec

NS, SID = "ns", "s"


def schedule(overlap: str = "skip", limit: int | None = None, every: int = 2) -> Schedule:
    program = Program(make_spec(intervals=[(every, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="act"),
                      make_policies(overlap=overlap), limit)
    return Schedule.create(NS, SID, 1, False, "", None, 0, program)


def start_of(s: Schedule) -> datetime:
    return datetime.fromisoformat(s.state.cursor.replace("Z", "+00:00"))


def types(facts) -> list[str]:
    return [f.event.__name__ for f in facts]


def test_a_tick_starts_the_first_due_time_and_skip_drops_the_overlapping_ones():
    s = schedule()
    t0 = start_of(s)
    facts = tick(s.state, t0 + timedelta(seconds=5))
    assert types(facts) == ["TimesProcessed", "ActionStartIssued"]
    processed, issued = facts[0].fields, facts[1].fields
    first = (t0 + timedelta(seconds=2 - t0.second % 2)).replace(microsecond=0)
    assert issued["workflow_id"] == f"act-{first.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    assert issued["request_id"] == action_request_id(NS, SID, first)
    assert [r["reason"] for r in processed["skipped"]] == ["overlap"] * \
        (len(processed["skipped"]))
    s.record(facts)
    assert s.state.issued and s.state.action_count == 1


def test_the_same_tick_again_decides_nothing_so_each_time_starts_at_most_once():
    s = schedule(overlap="allow_all")
    now = start_of(s) + timedelta(seconds=9)
    s.record(tick(s.state, now))
    assert tick(s.state, now) == []
    assert len({i["request_id"] for i in s.state.issued}) == len(s.state.issued) >= 4


def test_buffer_all_waits_for_the_running_action_then_starts_the_next():
    s = schedule(overlap="buffer_all")
    t0 = start_of(s)
    s.record(tick(s.state, t0 + timedelta(seconds=5)))
    assert len(s.state.issued) == 1 and len(s.state.buffered) >= 1
    started = s.state.issued[0]
    s.record([(ActionStarted, {"nominal": started["nominal"], "origin": "auto",
                               "workflow_id": started["workflow_id"], "run_id": "r1"})])
    assert s.state.running == [started["workflow_id"]] and not s.state.issued
    assert tick(s.state, t0 + timedelta(seconds=5)) == []  # still running: the buffer waits


def test_nothing_is_decided_while_fenced_or_after_the_close():
    s = schedule()
    now = start_of(s) + timedelta(seconds=30)
    s.fence_for_migration("R1", uuid.uuid4())
    assert tick(s.state, now) == []  # I1
    s.close_for_migration("R1", "run-1")
    assert tick(s.state, now) == []


def test_paused_time_passes_and_the_buffer_waits():
    s = schedule(overlap="buffer_all")
    s.set_paused(True)
    facts = tick(s.state, start_of(s) + timedelta(seconds=9))
    assert types(facts) == ["TimesProcessed"] and facts[0].fields["skipped"] == []


def test_limited_actions_skip_the_rest_as_limit():
    s = schedule(overlap="allow_all", limit=2)
    facts = tick(s.state, start_of(s) + timedelta(seconds=11))
    assert types(facts).count("ActionStartIssued") == 2
    assert {r["reason"] for r in facts[0].fields["skipped"]} == {"limit"}
    s.record(facts)
    assert s.state.remaining_actions == 0


@pytest.mark.parametrize("overlap", ["allow_all", "skip"])
def test_a_rollback_waits_behind_the_phase_gate_while_a_start_is_in_flight(overlap):
    """In flight: every policy waits. Running: only ``allow_all`` goes ahead, since a
    Temporal Schedule's overlap policy cannot see a run it did not start (the others wait
    for the close, nothing written)."""
    s = schedule(overlap)
    s.record(tick(s.state, start_of(s) + timedelta(seconds=3)))
    with pytest.raises(PhaseBlocked, match="in flight"):
        rollback_gate(s.state, "R1", None, None)
    issued = list(s.state.issued)  # one or two, by the wall clock's parity (every 2 s)
    for started in issued:
        s.record([(ActionStarted, {"nominal": started["nominal"], "origin": "auto",
                                   "workflow_id": started["workflow_id"], "run_id": "r1"})])
    if overlap != "allow_all":
        with pytest.raises(PhaseBlocked, match="running under overlap skip"):
            rollback_gate(s.state, "R1", None, None)
        for started in issued:
            s.record(run_closed(s.state, started["workflow_id"], "completed"))
    assert rollback_gate(s.state, "R1", None, None) == "accept"
