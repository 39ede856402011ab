"""The destination workflow on a real server: actions at their times while not paused, a chain
of runs through continue-as-new that carries the state, signals, and a bad input that fails."""
from __future__ import annotations

import uuid

import pytest

from tests.contract.temporal_env import NS, temporal_env, wait_for  # noqa: F401

INTERVAL = 0.2


@pytest.fixture
def wid() -> str:
    return f"temporal-sys-scheduler:wf-{uuid.uuid4().hex[:12]}"


def state(env, wid):
    return env.ops.query(wid)


def test_actions_run_at_their_times_across_continue_as_new(temporal_env, wid):
    temporal_env.ops.start_schedule(wid, interval_seconds=INTERVAL,
                                    max_iterations_before_can=2, notes="fast")
    s = wait_for(lambda: state(temporal_env, wid), lambda s: s["runs"] >= 3, 20,
                 "three runs of the chain")
    assert s["actions_taken"] >= 4 and s["notes"] == "fast" and not s["paused"]
    times = s["recent_actions"]
    gaps = [round(b - a, 6) for a, b in zip(times, times[1:])]
    # Each action is at its scheduled time: exactly one interval after the previous one.
    assert gaps and all(g == pytest.approx(INTERVAL) for g in gaps), gaps
    current = temporal_env.destination.describe(NS, wid)
    chains = temporal_env.ops.chains(wid, s["runs"])
    assert list(chains) == [current.first_execution_run_id]  # one chain, many runs
    statuses = [r.status for r in chains[current.first_execution_run_id]]
    assert statuses[-1] == "running" and set(statuses[:-1]) == {"continued_as_new"}


def test_no_actions_while_paused_and_they_resume_after_unpause(temporal_env, wid):
    temporal_env.ops.start_schedule(wid, interval_seconds=INTERVAL, paused=True)
    wait_for(lambda: state(temporal_env, wid), lambda s: s["next_action_at"] is not None, 10,
             "the first workflow task")
    temporal_env.ops.signal(wid, "pause", "still paused")  # a signal is an iteration too
    skipped = wait_for(lambda: state(temporal_env, wid),
                       lambda s: s["notes"] == "still paused", 10, "pause signal")
    wait_for(lambda: state(temporal_env, wid),
             lambda s: s["next_action_at"] > skipped["next_action_at"] + INTERVAL, 10,
             "two action times passing while paused")
    assert state(temporal_env, wid)["actions_taken"] == 0
    temporal_env.ops.signal(wid, "unpause")
    s = wait_for(lambda: state(temporal_env, wid), lambda s: s["actions_taken"] >= 2, 10,
                 "actions after unpause")
    assert not s["paused"]


def test_delete_completes_the_chain(temporal_env, wid):
    run = temporal_env.ops.start_schedule(wid)
    temporal_env.ops.signal(wid, "delete")
    wait_for(lambda: temporal_env.destination.describe(NS, wid, run).status,
             lambda s: s == "completed", 10, "completed")


def test_a_bad_input_fails_the_run_instead_of_retrying(temporal_env, wid):
    run = temporal_env.ops.start_schedule(wid, interval_seconds=0)
    wait_for(lambda: temporal_env.destination.describe(NS, wid, run).status,
             lambda s: s == "failed", 10, "failed")
