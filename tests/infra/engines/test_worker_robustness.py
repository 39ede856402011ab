"""The worker pool under trouble: failing passes and callbacks, threads that die, a stop while
the destination hangs, and several pools started with one worker id (the worker command
and real worker processes are in test_worker_processes.py)."""
from __future__ import annotations

import threading
import time

import pytest

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import destination_workflow_id
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import FaultRates, SimulatedDestination

from tests.helpers import Crash
from tests.infra.engines.pool_helpers import (NS, SlowDestination, _claim_workers,  # noqa: F401
                                             _pool_threads, _rollbacks, store)


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
    from schedfence.infra.engines.pool import WorkerPool
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
        # At most the batch each thread had in flight (its starts went out together, so the
        # pool returns within one deadline); no batch is claimed after the stop.
        states = [svc.migration(NS, sid).state for sid in sids]
        assert states.count("claimed") == len(dest.calls), states  # each claim, one start
        assert states.count("pending") == len(sids) - len(dest.calls), states


# -- 4. one configured worker id, many pools: each thread its own identity ------------------
def test_pools_with_one_worker_id_race_with_distinct_identities(store: str,
                                                              monkeypatch) -> None:
    # Small batches and leases that expire at once: the pools race as if nothing were leased.
    monkeypatch.setattr("schedfence.infra.engines.pool.BATCH_SIZE", 3)
    sim = SimulatedDestination(seed=7)
    dest = SlowDestination(sim, 0.02)  # each start is in flight for a moment
    services = [open_service(store, dest, worker_id="same", claim_grace=1.0)
                for _ in range(3)]
    for s in services:
        s.leases.seconds = 1e-6
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
        assert stats.results["wait"] >= 1  # the claimer's start may still land
        assert other.migration(NS, "s0").state == "claimed"  # not parked
        assert other.verify() == []
