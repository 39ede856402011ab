"""End to end on a real Temporal dev server: a schedule every 2 s with a backfill in progress
runs on the source, is rolled back mid-backfill (a finished backfill, a second one not yet
processed), and runs as a real Temporal Schedule for ~10 s more; also with the worker dying between the
create and the receipt (an exception at that point, and a worker process SIGKILLed there),
and with the server's scheduler continued-as-new before the receipt. The action workflows the
server lists are exactly the nominal times one scheduler would have started (I14: none twice,
none missing, nothing else); ``temporal schedule describe`` shows the handed-over spec, notes
and pause, and ``temporal schedule toggle --pause`` works on it."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import (NS, TemporalEnv, schedule_cli,  # noqa: F401
                                         temporal_env, wait_for)
from tests.helpers import Crash

SPEC = make_spec(intervals=[(2, 0)])


def listed(env: TemporalEnv, workflow_type: str) -> list[str]:
    async def listing() -> list[str]:
        return [wf.id async for wf in env.ops.client.list_workflows(
            f'WorkflowType = "{workflow_type}"')]
    return env.ops.run(listing)


def run_source(svc, seconds: float) -> datetime:
    deadline, last = time.monotonic() + seconds, datetime.now(timezone.utc)
    while time.monotonic() < deadline:
        last = datetime.now(timezone.utc)
        svc.run_scheduler(now=last)
        time.sleep(0.5)
    return last


def start_and_fence(svc, sid: str, wtype: str, prefix: str, tag: str):
    """The schedule runs on the source with a finished backfill; a second backfill is asked
    for and the rollback fences it before the source processed any of it."""
    svc.create_schedule(NS, sid, notes="nightly reports", spec=SPEC,
                        action=make_action(workflow_type=wtype, task_queue=f"q-{tag}",
                                           workflow_id=prefix, input={"tag": tag}),
                        policies=make_policies(overlap="allow_all"))
    first = parse_nominal(svc.load.source(NS, sid).state.cursor)
    done = (first - timedelta(minutes=10), first - timedelta(minutes=9))
    pending = (first - timedelta(minutes=5), first - timedelta(minutes=4))
    svc.backfill_schedule(NS, sid, *done, overlap="allow_all")
    run_source(svc, 4)
    svc.backfill_schedule(NS, sid, *pending, overlap="allow_all")  # not yet processed
    assert svc.rollback(NS, sid, f"R-{tag}").outcome == "accepted"
    assert svc.load.source(NS, sid).state.backfills  # handed over mid-backfill
    return first, done, pending


def crash_after_create(point: str) -> None:
    if point == "start.after_call":
        raise Crash(point)


def force_continue_as_new(env: TemporalEnv, sid: str) -> None:
    wid = destination_workflow_id(sid)
    before = env.destination.describe(NS, wid).run_id
    env.ops.signal(wid, "force-continue-as-new")
    wait_for(lambda: env.destination.describe(NS, wid).run_id, lambda r: r != before, 20.0,
             "the server's scheduler to continue as new")


# A worker process that SIGKILLs itself right after the create call returned (before the
# answer is appended): the real process death, not an exception.
KILLED_WORKER = """
import os, signal, sys
from schedfence.infra.application.service import open_service
def hook(point):
    if point == "start.after_call":
        os.kill(os.getpid(), signal.SIGKILL)
with open_service(sys.argv[1], sys.argv[2], worker_id="doomed", crash_hook=hook) as svc:
    svc.run_until_idle()
"""


def sigkilled_worker(store: str, env: TemporalEnv) -> None:
    done = subprocess.run([sys.executable, "-c", KILLED_WORKER, store, env.url],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr[-2000:])


@pytest.mark.parametrize("fault", [None, "crash_after_create", "continue_as_new", "sigkill"])
def test_a_schedule_handed_to_temporal_mid_backfill_runs_every_time_exactly_once(
        temporal_env: TemporalEnv, tmp_path: Path, fault: str | None) -> None:
    """``crash_after_create``: the worker dies between the create and the receipt (nothing
    after the call runs); ``continue_as_new``: that, and the server's scheduler continues as
    new before the worker comes back, so the receipt needs the chain-head proof."""
    tag = uuid.uuid4().hex[:8]
    sid, wtype, prefix = f"handover-{tag}", f"Report{tag}", f"act-{tag}"
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    if fault == "sigkill":
        with open_service(store, temporal_env.destination, worker_id="e2e-1") as svc:
            first, done, pending = start_and_fence(svc, sid, wtype, prefix, tag)
        sigkilled_worker(store, temporal_env)
    elif fault:
        with open_service(store, temporal_env.destination, worker_id="e2e-1",
                          crash_hook=crash_after_create) as svc:
            first, done, pending = start_and_fence(svc, sid, wtype, prefix, tag)
            with pytest.raises(Crash):
                svc.run_until_idle()
        if fault == "continue_as_new":
            force_continue_as_new(temporal_env, sid)
    # Another worker takes over; the dead one's claim counts as in flight for the grace (2 s
    # here instead of 15 s, to keep the test short).
    with open_service(store, temporal_env.destination, worker_id="e2e", claim_grace=2.0) as svc:
        if not fault:
            first, done, pending = start_and_fence(svc, sid, wtype, prefix, tag)
        svc.run_until_idle(retry_for=10.0)
        assert svc.migration(NS, sid).state == "completed"
        source_started = [parse_nominal(e.data["nominal"]) for e in svc.history(NS, sid)
                          if e.type.endswith("ActionStartIssued")]
        assert svc.verify() == []
    time.sleep(10)  # the server runs it now
    until = datetime.now(timezone.utc) - timedelta(seconds=3)  # what it has surely reached
    ids = listed(temporal_env, wtype)  # the source's starts and the server's own, all runs
    assert len(ids) == len(set(ids))  # no action workflow id ran twice
    on_server = [parse_nominal(w.removeprefix(f"{prefix}-")) for w in ids]
    assert set(source_started) <= set(on_server)
    owed = Owed(SPEC, first, until, backfills=(done, pending))
    verdict = check_exactly_once(owed, [], [t for t in on_server if t <= until])
    assert verdict.ok, verdict.describe()
    doc = json.loads(schedule_cli(temporal_env, "describe", "--schedule-id", sid, "--output", "json"))
    assert doc["schedule"]["state"]["notes"] == "nightly reports"
    assert doc["schedule"]["state"].get("paused", False) is False
    assert doc["schedule"]["spec"]["interval"][0]["interval"] == "2s"
    schedule_cli(temporal_env, "toggle", "--schedule-id", sid, "--pause", "--reason", "by an operator")
    paused = json.loads(schedule_cli(temporal_env, "describe", "--schedule-id", sid, "--output", "json"))
    assert paused["schedule"]["state"]["paused"] is True
