"""Shared by the worker pool's robustness tests (test_worker_robustness.py,
test_worker_processes.py, tests/e2e/test_db_restart.py): a store on both backends, a slow
or hanging destination, the pool's threads, and a real worker process with what it left."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from schedfence.domain.ports import DestinationUnavailable, StartWorkflow
from schedfence.infra.application.service import MigrationService
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

NS = "default"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/w.db"
    return request.getfixturevalue("pg_store")


def _rollbacks(svc: MigrationService, n: int) -> list[str]:
    sids = [f"s{i}" for i in range(n)]
    for sid in sids:
        svc.create_schedule(NS, sid)
        svc.rollback(NS, sid)
    return sids


def _pool_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("schedfence-worker-")]


class SlowDestination:
    """The simulator behind a start call that takes ``delay`` seconds; with ``hang``, the call
    runs into its deadline and fails as unavailable (an accepting server that never answers)."""

    def __init__(self, inner: SimulatedDestination, delay: float, hang: bool = False) -> None:
        self.inner, self.delay, self.hang = inner, delay, hang
        self.calls: list[float] = []
        self.on_call = lambda: None
        self._lock = threading.Lock()

    def start_workflow(self, request: StartWorkflow) -> Any:
        with self._lock:
            self.calls.append(time.monotonic())
        self.on_call()
        time.sleep(self.delay)
        if self.hang:
            raise DestinationUnavailable(f"start: deadline of {self.delay}s exceeded")
        return self.inner.start_workflow(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _claim_workers(svc: MigrationService, sids: list[str]) -> list[str]:
    return [e.data["worker"] for sid in sids for e in svc.history(NS, sid)
            if e.type.endswith("StartClaimConsumed")]


ROOT = Path(__file__).resolve().parents[3]
APP = "schedfence-robustness-worker"


def _worker_process(store: str, sim_url: str, log: Path, *extra: str) -> Any:
    import os
    import subprocess
    import sys
    return subprocess.Popen(
        [sys.executable, "-m", "schedfence.infra.cli", "--store", store, "--destination", f"sim+{sim_url}",
         "--worker-id", "robust", "worker", "--poll-interval", "0.05", *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(log, "w"),
        env={**os.environ, "PGAPPNAME": APP})


def worker_backends(conn: Any, dbname: str, terminate: bool = False) -> int:
    """How many connections the worker process holds to ``dbname`` (``conn``: an admin
    connection to its server); with ``terminate``, each one is cut."""
    what = "pg_terminate_backend(pid)" if terminate else "pid"
    return len(conn.execute(f"SELECT {what} FROM pg_stat_activity WHERE datname = %s AND "
                            "application_name = %s", (dbname, APP)).fetchall())


def _settled(svc: MigrationService, n: int, timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        by_state = {k: v for k, v in svc.stats()["by_state"].items() if v}
        if by_state.get("completed", 0) + by_state.get("parked", 0) == n or \
                time.monotonic() > deadline:
            return by_state
        time.sleep(0.2)


def pool_outcome(svc: MigrationService, proc: Any, sids: list[str],
                 timeout: float) -> dict[str, Any]:
    """Once every migration settled (or the time ran out): what the pool left behind."""
    by_state = _settled(svc, len(sids), timeout=timeout)
    return {"alive": proc.poll() is None, "by_state": by_state, "verdict": svc.verify(),
            "shards": {UUID(svc.migration(NS, sid).migration_id).int % 2 for sid in sids},
            "unfinished": _unfinished(svc, sids)}


def _unfinished(svc: MigrationService, sids: list[str]) -> dict[str, list[Any]]:
    """The last events of each migration that did not complete: a failure names its cause."""
    return {sid: [(e.type.rsplit(".", 1)[-1], e.data) for e in svc.history(NS, sid)[-4:]]
            for sid in sids if svc.migration(NS, sid).state != "completed"}


def _parked_on_unknown(events: list[Any]) -> bool:
    (last, data), answers = events[-1], [a for t, a in events if t == "DestinationAnswered"]
    return last == "MigrationParked" and data["reason"] == "head_missing" and \
        bool(answers) and answers[-1]["kind"] == "unavailable"


def stop_all(proc: Any, *closing: Any) -> int:
    proc.terminate()
    code = proc.wait(timeout=60)
    for thing in closing:
        thing.close()
    return code


def assert_rode_it_out(outcome: dict[str, Any], code: int, errors: str, n: int,
                      unknown_starts: bool = False) -> None:
    """Thread i serves only the ids hashing to i: every migration of both shards completing
    means every thread lived; each failed pass was one line, never a traceback.

    With ``unknown_starts`` (the destination itself went down), a start whose COMMIT was cut
    off has an unknown outcome, and the protocol parks it ``head_missing`` once the grace has
    passed with nothing at the workflow id: a live thread's decision, so that end counts too."""
    settled = [sid for sid, events in outcome["unfinished"].items()
               if unknown_starts and _parked_on_unknown(events)]
    assert outcome["alive"] and not set(outcome["unfinished"]) - set(settled), (outcome, errors)
    assert outcome["by_state"].get("completed", 0) == n - len(settled), outcome
    assert outcome["shards"] == {0, 1} and outcome["verdict"] == []
    assert code == 0 and "Traceback" not in errors, errors
    assert all(line.startswith(("worker robust", "worker thread "))
               for line in errors.splitlines()), errors
