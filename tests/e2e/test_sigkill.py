"""Crash safety with real processes: worker processes on PostgreSQL, SIGKILLed at random.

Several ``schedfence worker --concurrency 2`` processes share one PostgreSQL store and the
simulated destination persisted in it (so every process sees the same destination). While
rollbacks arrive in waves, a random worker is SIGKILLed at a random moment and a new one
started in its place. At the end, over the whole log and the destination:

- every migration ended: completed, or parked ``head_missing`` (a kill between the claim and
  the start: the protocol cannot tell "never started" from "retention removed it");
- every completed migration's schedule has exactly one destination chain, created once, and
  its source is closed; a parked one has no destination run at all;
- a source is closed iff its migration recorded an ownership receipt;
- the invariant checker finds nothing in the whole log.

``SCHEDFENCE_SIGKILL_MIGRATIONS`` and ``SCHEDFENCE_SIGKILL_KILLS`` raise the load (defaults:
200 migrations, 50 kills, as CI runs it).
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from uuid import UUID

import pytest

from schedfence.domain.ids import destination_workflow_id
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.sim_sql import SqlSimState
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from tests.pgtools import fresh_database

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = int(os.environ.get("SCHEDFENCE_SIGKILL_MIGRATIONS", "200"))
KILLS = int(os.environ.get("SCHEDFENCE_SIGKILL_KILLS", "50"))
PROCESSES = 4
LEASE = 3.0  # seconds a killed worker's leases keep its batch from the others
GRACE = "1.0"  # short claim grace, so killed claims are reconciled within the test
NS = "kill"
STARTUP = 5.0  # seconds a new worker process may take to import and install its handlers


class Workers:
    """``PROCESSES`` worker processes; ``kill_one`` SIGKILLs a random one and replaces it."""

    def __init__(self, store: str, log_dir: Path) -> None:
        self.store, self.log_dir = store, log_dir
        self.procs: list[subprocess.Popen] = []
        self.born: list[float] = []
        self.started = self.kills = 0
        self.killed: set[str] = set()  # the --worker-id of every SIGKILLed process
        for _ in range(PROCESSES):
            self.procs.append(self._spawn())
            self.born.append(time.monotonic())

    def _spawn(self) -> subprocess.Popen:
        self.started += 1
        log = open(self.log_dir / f"worker-{self.started}.err", "w")
        return subprocess.Popen(
            [sys.executable, "-m", "schedfence.infra.cli", "--store", self.store,
             "--worker-id", f"proc{self.started}", "worker", "--concurrency", "2",
             "--poll-interval", "0.05", "--claim-grace", GRACE],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log,
            env={**os.environ, "SCHEDFENCE_LEASE_SECONDS": str(LEASE)})

    def kill_one(self, rng: random.Random) -> None:
        i = rng.randrange(len(self.procs))
        victim = self.procs[i]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        self.killed.add(victim.args[victim.args.index("--worker-id") + 1])
        self.kills += 1
        self.procs[i] = self._spawn()
        self.born[i] = time.monotonic()

    def stop(self) -> list[int]:
        """SIGTERM each (once it is past start-up, so its handler is installed); a clean
        stop between attempts exits 0."""
        # The youngest process decides: a respawn may still be starting up (max, not min).
        time.sleep(max(0.0, STARTUP - (time.monotonic() - max(self.born))))
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(timeout=60))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append(p.wait())
        return codes


def _open(store: str):
    state = SqlSimState(store)
    dest = SimulatedDestination(state)
    return open_service(store, dest, worker_id="admin"), dest, state


def _wait_until_settled(svc, timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        by_state = {k: v for k, v in svc.stats()["by_state"].items() if v}
        if set(by_state) <= {"completed", "parked"} or time.monotonic() > deadline:
            return by_state
        time.sleep(0.2)


def test_sigkilled_workers_never_lose_or_duplicate_a_schedule(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("SCHEDFENCE_SIGKILL_SEED", "20261202")))
    with fresh_database("schedfence_kill") as store:
        svc, dest, sim_state = _open(store)
        sids = [f"s{i:04d}" for i in range(MIGRATIONS)]
        for sid in sids:
            svc.create_schedule(NS, sid, paused=rng.random() < 0.3, notes=f"notes {sid}")
        workers = Workers(store, tmp_path)
        try:
            waves = [sids[i::KILLS] for i in range(KILLS)]  # rollbacks arrive during kills
            for wave in waves:
                for sid in wave:
                    svc.rollback(NS, sid)
                time.sleep(rng.uniform(0.05, 0.6))
                workers.kill_one(rng)
            by_state = _wait_until_settled(svc, timeout=240)
        finally:
            codes = workers.stop()
        try:
            _check_outcome(svc, dest, sids, by_state)
            assert workers.kills >= KILLS and codes == [0] * PROCESSES, codes
            _check_leases(svc, workers.killed)
            print(f"{workers.kills} kills, {workers.started} worker processes, {by_state}, "
                  f"{_handed_over(svc, sids)} migrations finished by another process")
        finally:
            svc.close()
            sim_state.dispose()


def _check_outcome(svc, dest, sids: list[str], by_state: dict[str, int]) -> None:
    assert set(by_state) <= {"completed", "parked"}, by_state
    assert sum(by_state.values()) == len(sids)
    for sid in sids:
        mig = svc.migration(NS, sid)
        source = svc.app.repository.get(UUID(svc.app.repository.get(
            UUID(mig.migration_id)).state.source_id)).state
        wid = destination_workflow_id(sid)
        runs = dest.runs(NS, wid)
        proven = mig.destination_first_run_id is not None
        assert source.closed == proven, (sid, mig)  # closed iff ownership was proven
        if mig.state == "completed":
            assert dest.chains(NS, wid) == [mig.destination_first_run_id], (sid, runs)
            assert dest.created_count(NS, wid) == 1, (sid, runs)
        else:
            assert mig.park_reason == "head_missing" and source.paused, (sid, mig)
            assert runs == [], (sid, runs)  # never started: nothing at the destination
    assert svc.verify() == []
    assert by_state.get("completed", 0) > 0


def _check_leases(svc, killed: set[str]) -> None:
    """A worker stopped cleanly gave its leases back; a killed one's expire, and then no
    lease is held at all (settled work is never leased again)."""
    held = svc.leases.held()
    assert {holder.split("#")[0] for _, holder, _ in held} <= killed, held
    time.sleep(LEASE + 0.5)
    assert svc.leases.held() == []


def _handed_over(svc, sids: list[str]) -> int:
    """Migrations whose worker events came from more than one process: work a kill cut."""
    n = 0
    for sid in sids:
        workers = {e.data.get("worker", "").split("/")[0] for e in svc.history(NS, sid)
                   if e.aggregate == "migration" and e.data.get("worker")}
        n += len(workers) > 1
    return n
