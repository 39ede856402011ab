"""Issue 27, item 11, on a real dev server: the server SIGKILLed mid-batch of rollbacks and
restarted on its database; nothing is parked.

A private dev server (this test kills it) persists to a SQLite file. Rollbacks of
``SCHEDFENCE_RETENTION_E2E_SCHEDULES`` schedules (default 40; the issue's figure is 200) are
accepted while it is up; a worker drains them in a thread, and the server is SIGKILLed as soon
as the batch's claims are stored and its CreateSchedule calls are going out. Starts cut by the
kill have an unknown answer (``unavailable``); those sent after it provably never left
(``not_sent``, re-armed at once). Once the server is back on the same port and database, the
reconcile of each unknown start after the claim grace either finds the chain the start
created (its head's create id is ours: the receipt) or finds no run at all at
``temporal-sys-scheduler:<id>`` by DescribeWorkflowExecution, inside the namespace's
retention, which proves no create committed: the claim is re-armed and started once more.

Judged by the server's own listing: one chain per schedule, started once; every source closed
on its receipt; nothing parked; the checker clean. The first ``PROGRAMS`` schedules run an
action every 2 s: every nominal time owed from the source's cursor on is started once on the
server (I14, ``check_exactly_once``), whichever create, first or re-armed, took the schedule.
"""
from __future__ import annotations

import os
import sqlite3
import threading
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.source.spec import make_spec
from schedfence.domain.rollback.evidence import REARM_REASON
from schedfence.infra.adapters.destination.temporal import TemporalDestination
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, ServerOps
from tests.e2e.test_temporal_outage_e2e import OwnServer, own_server  # noqa: F401 (fixture)
from tests.temporal_server import wait_ready

SCHEDULES = int(os.environ.get("SCHEDFENCE_RETENTION_E2E_SCHEDULES", "40"))
GRACE = 2.0  # the claim grace: at least twice a start's deadline below
ISSUED = "schedfence.migration.DestinationStartIssued"
PROGRAMS = 4  # schedules with an action every 2 s (the rest: pause-and-notes)
SPEC = make_spec(intervals=[(2, 0)])


def _issued(store: Path) -> int:
    """Starts recorded so far, read from the store file while the worker writes it."""
    try:
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=0.05)
        try:
            return db.execute("SELECT COUNT(*) FROM stored_events WHERE topic = ?",
                              (ISSUED,)).fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0


def _kill_once_starts_go_out(own_server: OwnServer, store: Path, worker: threading.Thread
                             ) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and worker.is_alive():
        issued = _issued(store)
        if issued:
            time.sleep(0.1)  # some creates land, some are cut
            own_server.kill()
            return issued
        time.sleep(0.002)
    raise AssertionError("the batch never started")


def _create(svc, sid: str, wtype: str | None) -> datetime | None:
    """A pause-and-notes schedule, or (``wtype``) one with an action every 2 s; its cursor."""
    if wtype is None:
        svc.create_schedule(NS, sid, notes=f"job {sid}")
        return None
    svc.create_schedule(NS, sid, notes=f"job {sid}", spec=SPEC,
                        action=make_action(workflow_type=wtype, task_queue=f"q-{sid}",
                                           workflow_id=f"act-{sid}"),
                        policies=make_policies(overlap="allow_all"))
    return parse_nominal(svc.load.source(NS, sid).state.cursor)


def _each_time_once(ops: ServerOps, svc, wtype: str, firsts: dict[str, datetime]) -> int:
    """Every nominal time owed since each source's cursor started once on the server; how
    many times that was."""
    time.sleep(6)  # the servers' schedulers run a few times
    until = datetime.now(timezone.utc) - timedelta(seconds=3)

    async def listing() -> list[str]:
        return [wf.id async for wf in ops.client.list_workflows(f'WorkflowType = "{wtype}"')]
    ids = ops.run(listing)
    assert len(ids) == len(set(ids))  # no action workflow id ran twice
    checked = 0
    for sid, first in firsts.items():
        on_server = [parse_nominal(i.removeprefix(f"act-{sid}-")) for i in ids
                     if i.startswith(f"act-{sid}-")]
        assert not any(e.type.endswith("ActionStartIssued") for e in svc.history(NS, sid))
        verdict = check_exactly_once(Owed(SPEC, first, until), [],
                                     [t for t in on_server if t <= until])
        assert verdict.ok, (sid, verdict.describe())
        checked += len([t for t in on_server if t <= until])
    assert checked > 0
    return checked


def _of(svc, sid: str, suffix: str) -> list[dict]:
    return [e.data for e in svc.history(NS, sid) if e.type.endswith(suffix)]


def _drain_and_kill(svc, own_server: OwnServer, store: Path) -> int:
    """Drain in a thread and SIGKILL the server once starts go out; starts issued by then."""
    failures: list[BaseException] = []

    def drain() -> None:
        try:
            svc.run_until_idle()
        except BaseException as exc:  # reported below
            failures.append(exc)
    worker = threading.Thread(target=drain, name="retention-e2e-drain")
    worker.start()
    issued = _kill_once_starts_go_out(own_server, store, worker)
    worker.join(120)
    assert not worker.is_alive() and not failures, failures
    return issued


def _one_chain_each(svc, ops: ServerOps, sids: list[str]) -> None:
    """Nothing parked, every source closed on the one chain the server lists for it."""
    states = Counter(svc.migration(NS, sid).state for sid in sids)
    assert svc.migrations_by_state("parked") == [], states
    assert states == {"completed": len(sids)}, states
    assert svc.verify() == []
    for sid in sids:
        mig = svc.migration(NS, sid)
        assert svc.schedule(NS, sid).closed
        chains = ops.chains(destination_workflow_id(sid), 1)
        assert list(chains) == [mig.destination_first_run_id], (sid, chains)
        assert len(chains[mig.destination_first_run_id]) == 1


def test_a_server_killed_mid_batch_parks_nothing(own_server, tmp_path):
    began, store = time.monotonic(), tmp_path / "fence.db"
    sids = [f"ret-{i:03d}-{uuid.uuid4().hex[:6]}" for i in range(SCHEDULES)]
    destination = TemporalDestination(own_server.target, NS, rpc_timeout=1.0)  # <= grace/2
    svc = open_service(f"sqlite:///{store}", destination, worker_id="retention-e2e",
                       claim_grace=GRACE, retry_for=1.0)
    ops: ServerOps | None = None
    wtype, firsts = f"Report{uuid.uuid4().hex[:8]}", {}
    try:
        for i, sid in enumerate(sids):
            first = _create(svc, sid, wtype if i < PROGRAMS else None)
            if first is not None:
                firsts[sid] = first
            assert svc.rollback(NS, sid).outcome == "accepted"
        issued = _drain_and_kill(svc, own_server, store)
        killed_at = time.monotonic()
        own_server.start()  # same port, same temporal.db
        wait_ready(own_server.target, NS)
        for _ in range(10):  # reconnects lazily; unknown starts wait out the claim grace
            svc.run_until_idle(retry_for=GRACE + 1)
            if all(svc.migration(NS, sid).state == "completed" for sid in sids):
                break
        ops = ServerOps(own_server.target)
        _one_chain_each(svc, ops, sids)
        answers = Counter(a["kind"] for sid in sids for a in _of(svc, sid, "DestinationAnswered"))
        absent = [sid for sid in sids if any(r["reason"] == REARM_REASON
                                             for r in _of(svc, sid, "StartClaimRearmed"))]
        # The kill cut creates in flight (0.1 s after the claims): their outcome was unknown.
        assert answers["unavailable"] > 0, answers
        times = _each_time_once(ops, svc, wtype, firsts)
    finally:
        if ops is not None:
            ops.close()
        svc.close()
        destination.close()
    print(f"\nretention e2e: {SCHEDULES} schedules, killed after {issued} starts issued; "
          f"answers {dict(answers)}; re-armed on absence {len(absent)}; parked 0; "
          f"{times} action times of {PROGRAMS} schedules each started once; "
          f"{killed_at - began:.1f}s to the kill, {time.monotonic() - killed_at:.1f}s after")
