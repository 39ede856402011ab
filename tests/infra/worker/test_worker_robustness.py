"""The worker pool under trouble: failing passes and callbacks, threads that die, a stop while
the destination hangs, and several pools (or processes) started with one worker id."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.ports import DestinationUnavailable, StartWorkflow
from schedfence.infra.service import MigrationService, open_service
from schedfence.infra.destination.simulator import FaultRates, SimulatedDestination
from tests.helpers import Crash

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


# -- 1. a thread never dies from a pass; one that dies anyway stops the pool loudly ----------
def test_threads_outlive_an_outage_and_failing_callbacks(store: str) -> None:
    dest = SimulatedDestination()
    with open_service(store, dest, worker_id="w") as svc:
        sids = _rollbacks(svc, 24)
        real, calls = svc.due.due, {"n": 0}
        lock = threading.Lock()

        def flaky_due(limit: int = 100):
            with lock:
                calls["n"] += 1
                n = calls["n"]
            if n <= 12 or n % 3 == 0:  # an outage, then a connection that keeps dropping
                raise RuntimeError("server closed the connection unexpectedly\n\tThis "
                                   "probably means the server terminated abnormally")
            return real(limit)

        def on_pass(thread: int, progressed: int) -> None:
            svc.due.due(1)  # like the CLI's progress line, it reads the (failing) store
            raise InvalidArgument("the progress line could not be written")

        def on_error(thread: int, message: str) -> None:
            errors.append(message)
            if len(errors) % 2:
                raise BrokenPipeError("stderr is gone")

        errors: list[str] = []
        svc.due.due = flaky_due
        stop, alive_seen = threading.Event(), []

        def watch() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                alive_seen.append(len([t for t in _pool_threads() if t.is_alive()]))
                if svc.stats()["by_state"].get("completed") == len(sids):
                    break
                time.sleep(0.05)
            stop.set()

        watcher = threading.Thread(target=watch)
        watcher.start()
        stats = svc.run_workers(stop, concurrency=3, poll_interval=0.01, on_pass=on_pass,
                                on_error=on_error)
        watcher.join()
        assert alive_seen and min(alive_seen[1:] or alive_seen) == 3, alive_seen
        assert [svc.migration(NS, sid).state for sid in sids] == ["completed"] * len(sids)
        assert stats.errors and all("\n" not in e and "\t" not in e for e in stats.errors)
        assert "invalid_argument: the progress line could not be written" in stats.errors
        assert svc.verify() == []


class Bug(BaseException):
    """What no pass handler catches: a thread of the old loop died of it silently."""


def test_a_thread_that_dies_anyway_stops_the_pool_with_one_error_line(store: str) -> None:
    dest = SimulatedDestination()
    with open_service(store, dest, worker_id="w") as svc:
        _rollbacks(svc, 2)
        stop = threading.Event()
        safety = threading.Timer(10, stop.set)
        safety.start()

        def on_pass(thread: int, progressed: int) -> None:
            if thread == 1:
                raise Bug("a bug\nover two lines")

        started = time.monotonic()
        try:
            with pytest.raises(RuntimeError, match="worker thread 1 died") as raised:
                svc.run_workers(stop, concurrency=2, poll_interval=0.01, on_pass=on_pass)
        finally:
            safety.cancel()
        assert time.monotonic() - started < 5
        assert "\n" not in str(raised.value) and "a bug over two lines" in str(raised.value)
        assert not [t for t in _pool_threads() if t.is_alive()]  # the others were stopped


def test_error_lines_are_single_lines(store: str) -> None:
    dest = SimulatedDestination()
    with open_service(store, dest, worker_id="w") as svc:
        _rollbacks(svc, 1)
        real, left = svc.due.due, {"n": 1}

        def broken(limit: int = 100):
            if left["n"]:
                left["n"] -= 1
                raise RuntimeError("terminating connection\nDETAIL:  admin\r\nCONTEXT: x\n")
            return real(limit)

        svc.due.due, seen = broken, []
        svc.run_workers(threading.Event(), until_idle=True, poll_interval=0.01,
                        on_error=lambda t, m: seen.append(m))
        assert seen == ["internal: RuntimeError: terminating connection DETAIL: admin "
                        "CONTEXT: x"]


# -- 2. the poll interval is finite and sane ------------------------------------------------
@pytest.mark.parametrize("interval", [float("inf"), 1e308, float("nan"), -1.0, 3601.0])
def test_the_pool_refuses_an_insane_poll_interval(interval: float) -> None:
    from schedfence.infra.worker.pool import WorkerPool
    with pytest.raises(ValueError, match="poll_interval"):
        WorkerPool(object(), 1, poll_interval=interval)


# -- 3. a stop is honoured between attempts, also while the destination hangs ---------------
def test_a_stop_ends_the_pass_while_the_destination_hangs(store: str) -> None:
    deadline = 1.0
    dest = SlowDestination(SimulatedDestination(), deadline, hang=True)
    with open_service(store, dest, worker_id="w") as svc:
        sids = _rollbacks(svc, 20)
        stop = threading.Event()
        stopped_at: list[float] = []

        def first_call() -> None:
            if not stop.is_set():
                stopped_at.append(time.monotonic())
                stop.set()

        dest.on_call = first_call
        svc.run_workers(stop, concurrency=2, poll_interval=0.01)
        returned = time.monotonic()
        assert returned - stopped_at[0] < deadline + 1.0, returned - stopped_at[0]
        after_stop = [c for c in dest.calls if c >= stopped_at[0]]
        assert len(after_stop) <= 2, len(after_stop)  # at most the one in flight per thread
        states = [svc.migration(NS, sid).state for sid in sids]
        assert states.count("claimed") == len(dest.calls) <= 2, states
        assert states.count("pending") >= len(sids) - 2


# -- 4. one configured worker id, many pools: each thread its own identity ------------------
def _claim_workers(svc: MigrationService, sids: list[str]) -> list[str]:
    return [e.data["worker"] for sid in sids for e in svc.history(NS, sid)
            if e.type.endswith("StartClaimConsumed")]


def test_pools_with_one_worker_id_race_with_distinct_identities(store: str) -> None:
    sim = SimulatedDestination(seed=7)
    dest = SlowDestination(sim, 0.02)  # each start is in flight for a moment
    services = [open_service(store, dest, worker_id="same", claim_grace=1.0)
                for _ in range(3)]
    try:
        sids = _rollbacks(services[0], 100)
        sim.faults = FaultRates(lose_response=0.15)  # on starts and describes, from now
        stop = threading.Event()
        errors: list[str] = []

        def watch() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                by_state = services[0].stats()["by_state"]
                if by_state.get("completed", 0) + by_state.get("parked", 0) == len(sids):
                    break
                time.sleep(0.1)
            stop.set()

        threads = [threading.Thread(target=s.run_workers, args=(stop, 2),
                                    kwargs={"poll_interval": 0.02,
                                            "on_error": lambda t, m: errors.append(m)})
                   for s in services]
        threads.append(threading.Thread(target=watch))
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
        svc = services[0]
        views = [svc.migration(NS, sid) for sid in sids]
        assert [v.park_reason for v in views if v.state == "parked"] == []
        assert [v.state for v in views] == ["completed"] * len(sids)
        for sid in sids:
            assert sim.created_count(NS, destination_workflow_id(sid)) == 1
        workers = set(_claim_workers(svc, sids))
        assert all(w.startswith("same#") for w in workers), workers
        assert len({w.split("/")[0] for w in workers}) > 1, workers  # more than one pool won
        assert svc.verify() == []
    finally:
        for s in services:
            s.close()


def test_another_pools_in_flight_claim_is_left_alone_after_a_failover(store: str) -> None:
    """After a promotion every claimed migration reconciles first; a claim whose start is
    still in flight must not be reconciled by a pool that merely shares the configured id
    (it would find no run and park a chain that is about to start)."""
    sim = SimulatedDestination()

    def die(point: str) -> None:
        if point == "start.before_call":
            raise Crash(point)  # the claimer's start is "still on its way"

    with open_service(store, sim, worker_id="same", crash_hook=die) as claimer, \
            open_service(store, sim, worker_id="same", claim_grace=30) as other:
        _rollbacks(claimer, 1)
        stats = claimer.run_workers(threading.Event(), until_idle=True, poll_interval=0.01)
        assert stats.errors == ["internal: Crash: start.before_call"]
        assert other.migration(NS, "s0").state == "claimed"
        other.promote("oncall", "failover drill")
        stats = other.run_workers(threading.Event(), until_idle=True, poll_interval=0.01)
        assert stats.results["backoff"] >= 1
        assert other.migration(NS, "s0").state == "claimed"  # not parked
        assert other.verify() == []


# -- the worker command: its options, its identity, and real processes on PostgreSQL --------
def _cli(store: str, *args: str) -> Any:
    from click.testing import CliRunner
    from schedfence.infra.cli.commands import cli
    return CliRunner().invoke(cli, ["--store", store, *args])


@pytest.mark.parametrize("option,value", [
    ("--poll-interval", "inf"), ("--poll-interval", "1e308"), ("--poll-interval", "nan"),
    ("--poll-interval", "3601"), ("--claim-grace", "nan"), ("--claim-grace", "inf"),
    ("--claim-grace", "1e400")])
def test_the_worker_refuses_insane_seconds(tmp_path: Path, option: str, value: str) -> None:
    store = f"sqlite:///{tmp_path}/w.db"
    result = _cli(store, "worker", "--until-idle", "--concurrency", "2", option, value)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, (result.stdout, result.stderr)
    assert lines[0].startswith(f"error: invalid_argument: {option} must be"), lines


def test_the_worker_command_records_a_unique_identity(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/w.db"
    for args in (["schedule", "create", NS, "a"], ["rollback", NS, "a"],
                 ["--worker-id", "me", "worker", "--until-idle"]):
        result = _cli(store, *args)
        assert result.exit_code == 0, (result.stdout, result.stderr)
    with open_service(store, SimulatedDestination()) as svc:
        workers = _claim_workers(svc, ["a"])
    assert len(workers) == 1 and workers[0].startswith("me#") and workers[0] != "me#"


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


def _settled(svc: MigrationService, n: int, timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while True:
        by_state = {k: v for k, v in svc.stats()["by_state"].items() if v}
        if by_state.get("completed", 0) == n or time.monotonic() > deadline:
            return by_state
        time.sleep(0.2)


def test_a_worker_process_rides_out_terminated_connections(tmp_path: Path) -> None:
    """The worker's PostgreSQL connections are killed again and again while rollbacks arrive;
    thread i serves only ids hashing to i, so every migration completing means every thread
    lived (and a thread that died would have ended the process non-zero)."""
    from schedfence.infra.destination.shared_sim import open_shared_sim
    from tests import pgtools
    with pgtools.fresh_database("schedfence_wr") as store, \
            pgtools.fresh_database("schedfence_wr_sim") as sim_url:
        dest = open_shared_sim(f"sim+{sim_url}")
        svc = open_service(store, dest, worker_id="admin")
        log = tmp_path / "worker.err"
        proc = _worker_process(store, sim_url, log, "--concurrency", "2",
                               "--claim-grace", "1")
        killed, sids = 0, [f"s{i}" for i in range(40)]
        try:
            for wave in range(8):
                for sid in sids[wave * 5:(wave + 1) * 5]:
                    svc.create_schedule(NS, sid)
                    svc.rollback(NS, sid)
                time.sleep(0.4)
                with pgtools.admin() as conn:
                    killed += len(conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = %s AND application_name = %s",
                        (pgtools.schema_of(store)[0], APP)).fetchall())
            outcome = pool_outcome(svc, proc, sids, timeout=90)
        finally:
            code = stop_all(proc, svc, dest)
        assert killed >= 8, killed
        assert_rode_it_out(outcome, code, log.read_text(), len(sids))


def pool_outcome(svc: MigrationService, proc: Any, sids: list[str],
                 timeout: float) -> dict[str, Any]:
    """Once every migration settled (or the time ran out): what the pool left behind."""
    by_state = _settled(svc, len(sids), timeout=timeout)
    return {"alive": proc.poll() is None, "by_state": by_state, "verdict": svc.verify(),
            "shards": {UUID(svc.migration(NS, sid).migration_id).int % 2 for sid in sids}}


def stop_all(proc: Any, *closing: Any) -> int:
    proc.terminate()
    code = proc.wait(timeout=60)
    for thing in closing:
        thing.close()
    return code


def assert_rode_it_out(outcome: dict[str, Any], code: int, errors: str, n: int) -> None:
    """Thread i serves only the ids hashing to i: every migration of both shards completing
    means every thread lived; each failed pass was one line, never a traceback."""
    assert outcome["alive"] and outcome["by_state"] == {"completed": n}, (outcome, errors)
    assert outcome["shards"] == {0, 1} and outcome["verdict"] == []
    assert code == 0 and "Traceback" not in errors, errors
    assert all(line.startswith(("worker robust", "worker thread "))
               for line in errors.splitlines()), errors


def test_sigterm_is_honoured_while_the_destination_hangs(tmp_path: Path) -> None:
    """The destination's table is locked, so every start call waits out its 1 s deadline (an
    accepting server that never answers); SIGTERM ends the worker within about one call."""
    import signal
    from schedfence.infra.destination.shared_sim import open_shared_sim
    from schedfence.infra.destination.sim_store import META_TABLE
    from tests import pgtools
    with pgtools.fresh_database("schedfence_wt") as store, \
            pgtools.fresh_database("schedfence_wt_sim") as sim_url:
        dest = open_shared_sim(f"sim+{sim_url}")
        svc = open_service(store, dest, worker_id="admin")
        sids = _rollbacks(svc, 12)
        lock = pgtools.connect(sim_url + "?schema=public")
        lock.autocommit = False
        # Every simulator call locks its counters row first: holding the table stalls each call.
        lock.execute(f"LOCK TABLE {META_TABLE} IN ACCESS EXCLUSIVE MODE")
        proc = _worker_process(store, sim_url + "?lock_timeout=1s", tmp_path / "w.err")
        try:
            deadline = time.monotonic() + 30
            while svc.stats()["by_state"].get("claimed", 0) < 1:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            code = proc.wait(timeout=60)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
            lock.rollback()
            lock.close()
        claimed = svc.stats()["by_state"].get("claimed", 0)
        svc.close()
        dest.close()
        assert code == 0 and took < 4, (code, took, (tmp_path / "w.err").read_text())
        assert claimed <= 2, claimed  # the one in flight at SIGTERM, perhaps one more
        assert len(sids) - claimed >= 10
