"""The due-work index, its backoff, the worker pool and the claim grace, on both stores."""
from __future__ import annotations

import threading

import pytest

from schedfence.domain.ids import destination_workflow_id
from schedfence.infra.engines.due import MAX_BACKOFF, backoff_seconds
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from tests.helpers import Crash, start_foreign

from tests.infra.engines.pool_helpers import NS, _rollbacks, store  # noqa: F401 (fixture)


def _service(store: str, dest: SimulatedDestination, wid: str, **kw) -> MigrationService:
    return open_service(store, dest, worker_id=wid, **kw)


def test_due_lists_open_migrations_from_the_index_not_finished_ones(store: str) -> None:
    dest = SimulatedDestination()
    with _service(store, dest, "w1") as svc:
        _rollbacks(svc, 3)
        due = [m for m, _ in svc.due.due()]
        assert len(due) == 3
        svc.run_until_idle()
        assert svc.due.due() == [] and svc.due.open_ids() == []


def test_a_backed_off_migration_is_not_due_until_its_time(store: str) -> None:
    dest = SimulatedDestination()
    with _service(store, dest, "w1") as svc:
        _rollbacks(svc, 2)
        first, second = [m for m, _ in svc.due.due()]
        delay = svc.due.back_off(first, "unavailable")
        assert 0 < delay <= MAX_BACKOFF
        assert [m for m, _ in svc.due.due()] == [second]
        assert svc.due.open_ids() == [first, second]  # still open, only not due yet
        svc.due.clear(first)
        assert [(m, backed) for m, backed in svc.due.due()] == [(first, False), (second, False)]


def test_backoff_grows_and_is_capped() -> None:
    import random
    rng = random.Random(1)
    delays = [backoff_seconds(n, rng) for n in range(1, 12)]
    assert delays[0] <= 0.5 and max(delays) <= MAX_BACKOFF
    assert backoff_seconds(4, random.Random(0)) > backoff_seconds(1, random.Random(0))


def test_a_pool_of_threads_completes_every_migration_once(store: str) -> None:
    dest = SimulatedDestination()
    with _service(store, dest, "pool") as svc:
        sids = _rollbacks(svc, 12)
        stats = svc.run_workers(threading.Event(), concurrency=3, until_idle=True,
                                poll_interval=0.01)
        assert stats.errors == []
        for sid in sids:
            assert svc.migration(NS, sid).state == "completed"
            assert dest.created_count(NS, destination_workflow_id(sid)) == 1
        workers = {svc.app.repository.get(m.originator_id).state.last_worker
                   for m in svc.app.notifications(("schedfence.migration.RequestIdAssigned",))}
        # One pool: the configured id, then this pool's token, then the thread.
        assert len({w.split("/")[0] for w in workers}) == 1 and len(workers) > 1
        assert all(w.startswith("pool#") and w.split("/")[1] in "012" for w in workers)
        assert svc.verify() == []


def test_two_pools_race_over_one_store_and_the_store_decides(store: str) -> None:
    dest = SimulatedDestination()
    with _service(store, dest, "a") as a, _service(store, dest, "b") as b:
        sids = _rollbacks(a, 10)
        results = []
        threads = [threading.Thread(target=lambda s=s: results.append(s.run_workers(
            threading.Event(), concurrency=2, until_idle=True, poll_interval=0.01)))
            for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert all(r.errors == [] for r in results)
        for sid in sids:
            assert a.migration(NS, sid).state == "completed"
            assert dest.created_count(NS, destination_workflow_id(sid)) == 1
        assert a.verify() == []


def test_a_fresh_claim_of_another_worker_is_left_in_flight(store: str) -> None:
    """Reconciling while the claimer's start is under way would see no run and park the
    migration head_missing; within the grace the other worker backs off instead."""
    dest = SimulatedDestination()

    def die(point: str) -> None:
        if point == "start.before_call":
            raise Crash(point)

    with _service(store, dest, "claimer", crash_hook=die) as claimer, \
            _service(store, dest, "other", claim_grace=30) as other:
        _rollbacks(claimer, 1)
        with pytest.raises(Crash):
            claimer.run_until_idle()  # claim consumed, then the process "dies"
        mid = other.due.open_ids()[0]
        assert other.worker.attempt(mid) == "wait"  # a drain waits the grace out
        assert other.migration(NS, "s0").state == "claimed"  # not parked
        other.worker.claim_grace = 0  # the grace has passed: reconcile
        other.worker.attempt(mid)
        view = other.migration(NS, "s0")
        assert (view.state, view.park_reason) == ("parked", "head_missing")
        assert other.verify() == []


def test_a_worker_does_not_wait_for_its_own_claim(store: str) -> None:
    dest = SimulatedDestination()
    dest.inject("start", "lose_response")
    with _service(store, dest, "w1", claim_grace=30) as svc:
        _rollbacks(svc, 1)
        svc.run_until_idle(retry_for=0)  # lost response: claimed, backs off once
        mid = svc.due.open_ids()[0]
        assert svc.worker.attempt(mid) == "progress"  # its own claim: reconcile at once
        assert svc.migration(NS, "s0").state == "completed"


def test_a_foreign_run_parks_and_is_rechecked_after_backoff(store: str) -> None:
    dest = SimulatedDestination()
    with _service(store, dest, "w1") as svc:
        svc.create_schedule(NS, "s0")
        start_foreign(dest, "s0")
        svc.rollback(NS, "s0")
        stop = threading.Event()
        stats = svc.run_workers(stop, until_idle=True, poll_interval=0.01)
        assert svc.migration(NS, "s0").park_reason == "foreign_destination"
        assert stats.results["backoff"] + stats.results["idle"] >= 1
        # Backed off: not due until its time comes, though it stays open.
        assert svc.due.due() == [] and len(svc.due.open_ids()) == 1
        dest.complete(NS, destination_workflow_id("s0"))
        svc.due.clear(svc.due.open_ids()[0])
        svc.run_workers(stop, until_idle=True, poll_interval=0.01)
        assert svc.migration(NS, "s0").state == "completed"
        assert svc.verify() == []
        assert svc.due.due() == []


def test_a_failing_pass_is_reported_and_the_thread_carries_on(store: str) -> None:
    """A pass that raises (here: reading the due index fails, as when the database goes away)
    is one error line per pass; the thread keeps running and the work completes after it."""
    dest = SimulatedDestination()
    with _service(store, dest, "w1") as svc:
        _rollbacks(svc, 2)
        broken = {"left": 2}
        real = svc.due.due

        def flaky(limit: int = 100):
            if broken["left"] > 0:
                broken["left"] -= 1
                raise RuntimeError("server closed the connection unexpectedly")
            return real(limit)

        svc.due.due = flaky
        seen: list[str] = []
        stop = threading.Event()

        def on_pass(thread: int, progressed: int) -> None:
            if svc.stats()["by_state"]["completed"] == 2 or len(seen) > 10:
                stop.set()

        stats = svc.run_workers(stop, poll_interval=0.01, on_pass=on_pass,
                                on_error=lambda t, m: seen.append(m))
        assert seen == ["internal: RuntimeError: server closed the connection "
                        "unexpectedly"] * 2
        assert stats.errors == seen
        assert [svc.migration(NS, sid).state for sid in ("s0", "s1")] == ["completed"] * 2
        assert svc.verify() == []


def test_prune_drops_backoff_rows_of_finished_migrations_only(store: str) -> None:
    dest = SimulatedDestination()
    with _service(store, dest, "w1") as svc:
        _rollbacks(svc, 2)
        done, still_open = [m for m, _ in svc.due.due()]
        svc.due.back_off(done, "unavailable")
        svc.due.back_off(still_open, "unavailable")
        svc.worker.attempt(done)  # completes it, backoff row or not
        assert svc.due.prune() == 1
        assert svc.due.due() == []  # the open one is still backed off
        assert svc.due.open_ids() == [still_open]
