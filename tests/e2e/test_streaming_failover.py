"""Failover on PostgreSQL's own streaming replication (not our ``replicate`` copy loop).

A private primary and its hot standby (``tests/pg_standby.py``); the destination is the
simulator kept on the shared server (``sim+postgresql://``), so it outlives the primary. Two
worker processes run the migrations against the primary; after KILL_AFTER acknowledged appends
the primary stops sending WAL for LAG seconds (the standby falls behind, as over a slow link),
then its postmaster is SIGKILLed mid-batch and the old workers are stopped. The standby is
promoted (``pg_ctl promote``) and new workers are pointed at it (its own URL). Then, in both
modes: every migration completes with the request id issued before the failover (except one
the operator had to re-issue, below) and exactly one destination chain per schedule, ever;
the invariant checker is clean on the new primary. What each mode lost is counted against the
dead primary's own WAL (its data directory started again afterwards).

- **synchronous** (``synchronous_standby_names`` names the standby): nothing a worker saw
  acknowledged is lost (the workers wait while the standby lags). No failover epoch is
  recorded: a worker calls the destination only after its append is acknowledged, so the
  standby holds every claim that was acted on. A claim the primary never acknowledged may be
  on the standby; no start was issued for it, it parks, and the operator resolves it
  ``source_kept`` and rolls back again under a new request id.
- **asynchronous**: what was not streamed is lost, acknowledged appends included (asserted:
  some are). The new primary records a failover epoch (``promote``) first, as after a
  ``replicate`` failover: every earlier migration reconciles against the destination, and one
  whose start never reached it parks ``failover_unverified`` until the operator confirms there
  is no run (``recover rearm --confirm-no-destination-run``).
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, TextIO
from uuid import UUID

import psycopg
import pytest

from schedfence.domain.ids import destination_workflow_id
from schedfence.infra.adapters.destination.shared_sim import SharedSimDestination
from schedfence.infra.application.service import MigrationService, open_service
from tests import pgtools
from tests.pg_standby import StandbyPair, alive, standby_pair
from tests.replica_helpers import databases

NS = "payments"
N = 30  # migrations
WORKERS = 2
KILL_AFTER = 30  # acknowledged worker appends before the standby falls behind (of ~4 each)
LAG = 0.3  # seconds the standby receives nothing before the primary is killed
DB = "fence"
ROOT = Path(__file__).resolve().parents[2]


def sid(i: int) -> str:
    return f"sched-{i:02d}"


class Acks:
    """Every append a worker saw acknowledged: each aggregate's highest version saved. A
    worker process writes one line per acknowledged append to ``out`` (line-buffered, so
    a SIGKILL keeps every line written)."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.lock = threading.Lock()
        self.versions: dict[str, int] = {}
        self.count = 0
        self.first_at: float | None = None
        self.out = out

    def add(self, saved: list[tuple[str, int]]) -> None:
        with self.lock:
            for oid, version in saved:
                self.versions[oid] = max(version, self.versions.get(oid, 0))
            self.count += 1
            self.first_at = self.first_at or time.monotonic()
            if self.out is not None:
                self.out.write(" ".join(f"{oid}:{version}" for oid, version in saved) + "\n")

    def wrap(self, svc: MigrationService) -> None:
        save = svc.worker.save

        def recorded(label: str, *aggregates: Any) -> None:
            pending = [(str(a.id), a.version) for a in aggregates
                       if a is not None and a.pending_events]
            save(label, *aggregates)
            self.add(pending)

        svc.worker.save = recorded  # type: ignore[method-assign]  # records, then saves

    @classmethod
    def read(cls, paths: list[Path]) -> Acks:
        acks = cls()
        for path in paths:
            for line in path.read_text().splitlines() if path.exists() else []:
                acks.add([(oid, int(v)) for oid, v in (w.split(":") for w in line.split())])
        return acks


def worker_process(url: str, dest: str, acks_path: str, worker_id: str, *ids: str) -> None:
    """One old worker (``python -m tests.e2e.test_streaming_failover ...``): attempts its
    migrations on ``url``, writing every acknowledged append to ``acks_path``."""
    stop = Path(acks_path + ".stop")

    def stop_at_next_append(point: str) -> None:
        if point.endswith(".before_append") and stop.exists():
            os._exit(3)  # stopped by the operator: a destination call in flight has returned

    with open(acks_path, "a", buffering=1) as out, \
            open_service(url, dest, worker_id=worker_id, claim_grace=0,
                         crash_hook=stop_at_next_append) as svc:
        Acks(out).wrap(svc)
        for mid in ids:
            svc.worker.attempt(UUID(mid))


def start_processes(url: str, dest: str, ids: list[UUID],
                    base: Path) -> tuple[list[subprocess.Popen], list[Path]]:
    paths = [base / f"acks-{k}" for k in range(WORKERS)]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.test_streaming_failover", url, dest, str(paths[k]),
         f"old-{k}", *map(str, ids[k::WORKERS])], cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL) for k in range(WORKERS)]
    return procs, paths


def wait_for_acks(paths: list[Path], procs: list[subprocess.Popen], count: int) -> int:
    """Until the workers saw ``count`` appends acknowledged; returns how many they saw."""
    deadline = time.monotonic() + 60
    while (seen := Acks.read(paths).count) < count:
        assert time.monotonic() < deadline, "the workers made no progress on the primary"
        assert any(p.poll() is None for p in procs), "the workers exited before the kill"
        time.sleep(0.005)
    return seen


def run_workers(url: str, dest: str, ids: list[UUID], acks: Acks,
                tag: str) -> list[threading.Thread]:
    """WORKERS worker services on the new primary, each over its share of ``ids``."""
    def work(k: int) -> None:
        with open_service(url, dest, worker_id=f"{tag}-{k}", claim_grace=0) as svc:
            acks.wrap(svc)
            for mid in ids[k::WORKERS]:
                svc.worker.attempt(mid)

    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(WORKERS)]
    for thread in threads:
        thread.start()
    return threads


def store_url(cluster_url: str, schema: str) -> str:
    return f"{cluster_url}?schema={schema}&statement_timeout=20s"


def log_of(url: str) -> set[tuple[str, int]]:
    """(originator id, version) of every stored event in the store at ``url``."""
    target = pgtools.schema_of(url)
    with psycopg.connect(url.split("?")[0], autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute(f'SELECT originator_id::text, originator_version FROM '
                            f'"{target[1]}".schedfence_events').fetchall()
    return {(oid, version) for oid, version in rows}


@dataclass
class Figures:
    """What one failover did and lost (times in seconds from the SIGKILL)."""

    mode: str
    promoted_s: float = 0.0  # the standby accepts writes
    resumed_s: float = 0.0  # a worker's first acknowledged append on the new primary
    completed_s: float = 0.0  # every migration completed (operator confirmations included)
    wal_lost: int = 0  # events the dead primary had committed that the standby never got
    acked_lost: int = 0  # ... of them, appends a worker saw acknowledged
    confirmed: int = 0  # migrations re-armed on the operator's confirmation
    reissued: int = 0  # migrations resolved by the operator and rolled back again
    acked_before: int = 0  # appends the old workers saw acknowledged before the crash
    request_ids: dict[str, str] = field(default_factory=dict)


def rollbacks(url: str, dest: str, figures: Figures) -> list[UUID]:
    """Schedules and their rollbacks on the primary; returns the migration ids."""
    with open_service(url, dest, worker_id="admin") as svc:
        for i in range(N):
            svc.create_schedule(NS, sid(i), notes=f"schedule {i}")
        results = [svc.rollback(NS, sid(i)) for i in range(N)]
    figures.request_ids = {sid(i): r.request_id for i, r in enumerate(results)}
    return [UUID(r.migration_id) for r in results]


def crash_mid_batch(pair: StandbyPair, url: str, dest: str, ids: list[UUID],
                    lag: float) -> Acks:
    """Worker processes on the primary; after KILL_AFTER acknowledged appends the primary
    stops sending WAL to the standby for ``lag`` seconds (if > 0), then its postmaster is
    SIGKILLed. The old workers are stopped before the new ones start (each at its next
    append, after any destination call in flight). Returns what they saw acknowledged."""
    procs, paths = start_processes(url, dest, ids, pair.base)
    try:
        seen = wait_for_acks(paths, procs, KILL_AFTER)
        if lag > 0:
            pair.pause_sending()
            time.sleep(lag)
            if not pair.synchronous:  # on a loaded machine: until some did go on
                wait_for_acks(paths, procs, seen + 3)
        pair.kill_primary()
        for path in paths:  # a start already issued goes on; nothing after it can append
            Path(f"{path}.stop").touch()
        deadline = time.monotonic() + 2
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        for proc in procs:  # still waiting for the dead primary: stopped
            proc.kill()
            proc.wait()
    return Acks.read(paths)


def join(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive(), "a worker hung"


def versions(log: set[tuple[str, int]]) -> dict[str, int]:
    """Each aggregate's last version in a log."""
    have: dict[str, int] = {}
    for oid, version in log:
        have[oid] = max(version, have.get(oid, 0))
    return have


def lost(acks: Acks, on_standby: set[tuple[str, int]]) -> int:
    """Acknowledged events (aggregate versions) the standby does not hold."""
    have = versions(on_standby)
    return sum(max(0, version - have.get(oid, 0)) for oid, version in acks.versions.items())


def confirm_parked(svc: MigrationService, dest: SharedSimDestination, figures: Figures,
                   unacked: set[str]) -> None:
    """The operator's live check and decision for every parked migration. Only ones whose
    start never reached the destination may park. One that holds no consumed claim (the lost
    tail may have consumed it) is re-armed on the operator's confirmation that no run exists. One
    whose claim the new primary holds consumed, but which no worker saw acknowledged (the
    primary died before answering: no start was ever issued), cannot be re-armed (nothing
    proves that no start committed): it is resolved ``source_kept`` and rolled back again
    under a new request id."""
    for key in map(sid, range(N)):
        mig = svc.migration(NS, key)
        if mig.state != "parked":
            continue
        assert dest.start_log(NS, destination_workflow_id(key)) == [], key
        if figures.mode == "asynchronous":
            assert mig.park_reason == "failover_unverified", (key, mig.park_reason)
        if mig.starts_issued == 0:  # no claim consumed in this log
            assert figures.mode == "asynchronous", (key, mig.park_reason)
            svc.recover("rearm", NS, key, actor="oncall", reason="live check: no run",
                        confirm_no_destination_run=True)
            figures.confirmed += 1
            continue
        assert mig.migration_id in unacked, (key, mig.park_reason)  # never acted on
        svc.recover("resolve", NS, key, actor="oncall", reason="live check: no run",
                    resolution="source_kept")
        figures.request_ids[key] = svc.rollback(NS, key, str(uuid.uuid4())).request_id
        figures.reissued += 1
    svc.run_until_idle()


def check_outcomes(svc: MigrationService, dest: SharedSimDestination,
                   figures: Figures) -> None:
    for key in map(sid, range(N)):
        wid, mig = destination_workflow_id(key), svc.migration(NS, key)
        assert mig.state == "completed", (key, mig)
        assert mig.request_id == figures.request_ids[key], key
        assert svc.schedule(NS, key).closed, key
        assert dest.chains(NS, wid) == [mig.destination_first_run_id], key
        assert dest.created_count(NS, wid) == 1, key  # exactly one chain, ever
        assert {req.request_id for req, _ in dest.start_log(NS, wid)} == {mig.request_id}
    assert svc.verify() == []


def take_over(url: str, dest: str, ids: list[UUID], figures: Figures, killed: float,
              unacked: set[str]) -> None:
    """On the promoted standby: the failover epoch (asynchronous mode only), the workers,
    the operator's confirmations, and the checks."""
    sim = SharedSimDestination(dest)
    try:
        with open_service(url, dest, worker_id="oncall", claim_grace=0) as svc:
            if figures.mode == "asynchronous":
                svc.promote("oncall", "primary SIGKILLed; asynchronous standby promoted")
            acks = Acks()
            join(run_workers(url, dest, ids, acks, "new"))
            assert acks.first_at is not None, "no worker appended on the new primary"
            figures.resumed_s = acks.first_at - killed
            svc.run_until_idle()
            confirm_parked(svc, sim, figures, unacked)
            figures.completed_s = time.monotonic() - killed
            check_outcomes(svc, sim, figures)
    finally:
        sim.close()


def failover(synchronous: bool, dest: str, lag: float = LAG) -> Figures:
    """The whole scenario on a new primary/standby pair; returns what it measured."""
    figures = Figures("synchronous" if synchronous else "asynchronous")
    with standby_pair(synchronous) as pair:
        pair.primary.create_database(DB)
        primary = store_url(pair.primary.url(DB), "fence")
        standby = store_url(pair.standby.url(DB), "fence")
        ids = rollbacks(primary, dest, figures)
        pair.wait_replayed()  # every rollback is on the standby; the workers' steps may not be
        before = versions(log_of(primary))
        acks = crash_mid_batch(pair, primary, dest, ids, lag)
        killed = time.monotonic()
        pair.promote()
        figures.promoted_s = time.monotonic() - killed
        on_standby = log_of(standby)
        figures.acked_lost = lost(acks, on_standby)
        have = versions(on_standby)
        unacked = {mid for mid in map(str, ids)  # holds more than any writer saw
                   if have.get(mid, 0) > max(acks.versions.get(mid, 0), before.get(mid, 0))}
        take_over(standby, dest, ids, figures, killed, unacked)
        pair.restart_dead_primary()
        on_old = log_of(primary)
        assert on_standby <= on_old, "the standby holds events the primary never committed"
        figures.wal_lost = len(on_old - on_standby)
        figures.acked_before = acks.count
    return figures


@pytest.fixture(scope="module")
def dest_db() -> Iterator[str]:
    yield from (names[0] for names in databases("sf_sr_dest"))


def report(figures: Figures) -> None:
    print(f"\n{figures.mode}: promoted {figures.promoted_s:.2f}s, resumed "
          f"{figures.resumed_s:.2f}s, completed {figures.completed_s:.2f}s after the SIGKILL; "
          f"{figures.acked_before} appends acknowledged before it; events lost "
          f"{figures.wal_lost} (acknowledged {figures.acked_lost}); "
          f"{figures.confirmed} re-armed and {figures.reissued} re-issued by the operator")


def test_synchronous_standby_loses_nothing_acknowledged(dest_db: str) -> None:
    figures = failover(True, "sim+" + pgtools.new_schema_url(dest_db))
    report(figures)
    assert figures.acked_lost == 0


def test_asynchronous_standby_fails_over_with_an_epoch(dest_db: str) -> None:
    figures = failover(False, "sim+" + pgtools.new_schema_url(dest_db))
    report(figures)
    # The workers went on for LAG seconds while nothing reached the standby: all of it lost.
    assert 0 < figures.acked_lost <= figures.wal_lost



def test_the_pair_is_stopped_and_removed_even_when_the_test_fails() -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with standby_pair(synchronous=True) as pair:
            pids = [pair.primary.postmaster_pid(), pair.standby.postmaster_pid()]
            assert None not in pids
            raise Boom()
    assert not pair.base.exists()
    assert not any(alive(pid) for pid in pids if pid is not None)


if __name__ == "__main__":
    worker_process(*sys.argv[1:])
