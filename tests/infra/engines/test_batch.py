"""Batched attempts (infra/engines/batch.py), bulk rollbacks (infra/application/bulk.py) and
leases (infra/engines/lease.py).

Given many accepted rollbacks, when a worker attempts them as one batch, then the claims, the
answers and the closes each land in one append, every schedule is started exactly once, and a
crash anywhere inside the batch leaves every claimed migration reconcile-only: finished by
the next worker with no second start, the checker clean."""
from __future__ import annotations

import threading
import time
from uuid import uuid4

import pytest

from schedfence.domain.errors import DomainError, NotFound, Unavailable
from schedfence.domain.ports import DestinationUnavailable
from schedfence.domain.ids import destination_workflow_id
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from schedfence.infra.engines.lease import Leases
from tests.helpers import Crash, Hooks

NS, N = "ns", 12
SIDS = [f"s{i:02d}" for i in range(N)]


class NthCrash(Hooks):
    """Crash at the ``n``-th time ``point`` is reached (the boundaries inside a batch)."""

    def __init__(self, point: str = "", n: int = 1) -> None:
        super().__init__()
        self.point, self.n, self._lock = point, n, threading.Lock()

    def __call__(self, point: str) -> None:
        with self._lock:
            super().__call__(point)
            hit = point == self.point and self.points.count(point) == self.n
        if hit:
            raise Crash(f"{point} #{self.n}")


def _accepted(svc) -> list:
    for sid in SIDS:
        svc.create_schedule(NS, sid)
    assert all(r.outcome == "accepted" for r in svc.rollback_many(NS, SIDS))
    return svc.open_migration_ids()


def test_a_batch_appends_each_step_once_and_starts_each_schedule_once(tmp_path) -> None:
    dest, hooks = SimulatedDestination(), NthCrash()
    with open_service(f"sqlite:///{tmp_path / 'b.db'}", dest, crash_hook=hooks,
                      worker_id="w") as svc:
        ids = _accepted(svc)
        assert hooks.seen("rollback.after_append") == ["rollback.after_append"]  # one append
        results = svc.worker.attempt_batch(ids)
        assert set(results.values()) == {"progress"} and len(results) == N
        for step in ("claim", "answer", "close"):
            assert hooks.seen(f"{step}.after_append") == [f"{step}.after_append"], step
        assert len(hooks.seen("start.before_call")) == N
        assert {svc.migration(NS, s).state for s in SIDS} == {"completed"}
        assert all(dest.created_count(NS, destination_workflow_id(s)) == 1 for s in SIDS)
        assert svc.verify() == []


CRASHES = [  # (boundary, which occurrence, concurrency): each inside one batch
    ("claim.after_append", 1, 8),  # after the batch claim, before any start
    ("start.before_call", 2, 1),  # between two starts
    ("start.after_call", 3, 1),  # a start answered, the rest not sent
    ("start.after_call", 1, 8),  # starts in flight together
    ("answer.before_append", 1, 8),  # before the batch's receipts
    ("answer.after_append", 1, 8),
    ("close.before_append", 1, 8),
]


@pytest.mark.parametrize("point, n, concurrency", CRASHES)
def test_a_crash_inside_a_batch_never_starts_a_schedule_twice(tmp_path, point, n,
                                                              concurrency) -> None:
    store, dest = f"sqlite:///{tmp_path / 'c.db'}", SimulatedDestination()
    with open_service(store, dest, crash_hook=NthCrash(point, n), worker_id="w1") as svc:
        ids = _accepted(svc)
        svc.worker.concurrency = concurrency
        with pytest.raises(Crash):
            svc.worker.attempt_batch(ids)
    with open_service(store, dest, worker_id="w2", claim_grace=0) as svc:
        svc.run_until_idle(retry_for=0)
        states = {s: svc.migration(NS, s).state for s in SIDS}
        for sid in SIDS:
            created = dest.created_count(NS, destination_workflow_id(sid))
            assert created <= 1, sid  # never a second start
            # A start that reached the destination completes; a claim whose start never
            # left parks for an operator (reconcile-only: nothing proves it did not run).
            assert states[sid] == ("completed" if created else "parked"), (sid, created)
        assert svc.verify() == []


def test_a_batch_claim_that_loses_a_race_falls_back_one_by_one(tmp_path) -> None:
    dest, hooks = SimulatedDestination(), Hooks()
    with open_service(f"sqlite:///{tmp_path / 'r.db'}", dest, crash_hook=hooks,
                      worker_id="w") as svc:
        ids = _accepted(svc)
        other = open_service(f"sqlite:///{tmp_path / 'r.db'}", dest, worker_id="other")
        # Another worker takes one of them while the batch's claim is about to land.
        hooks.once("claim.before_append", lambda: other.worker.attempt(ids[3]))
        svc.worker.attempt_batch(ids)
        other.close()
        assert {svc.migration(NS, s).state for s in SIDS} == {"completed"}
        assert all(dest.created_count(NS, destination_workflow_id(s)) == 1 for s in SIDS)
        assert svc.verify() == []


def test_rollback_many_answers_each_schedule_as_rollback_would(tmp_path) -> None:
    with open_service(f"sqlite:///{tmp_path / 'm.db'}", "sim", worker_id="w") as svc:
        for sid in SIDS[:3]:
            svc.create_schedule(NS, sid)
        svc.rollback(NS, SIDS[0], "R0")
        answers = svc.rollback_many(NS, [SIDS[0], "missing", SIDS[1], "bad\nid", SIDS[2]],
                                    ["R0", "Rm", "R1", "Rb", "R2"], actor="alice")
        assert isinstance(answers[1], NotFound) and answers[3].code == "invalid_argument"
        assert [a.outcome for i, a in enumerate(answers) if i not in (1, 3)] == [
            "already_pending", "accepted", "accepted"]
        before = svc.event_count()
        again = svc.rollback_many(NS, SIDS[:3], ["R0", "R1", "R2"])
        assert [a.outcome for a in again] == ["already_pending"] * 3
        assert svc.event_count() == before  # nothing written on a repeat
        svc.run_until_idle(retry_for=0)
        assert {svc.migration(NS, s).state for s in SIDS[:3]} == {"completed"}
        assert svc.verify() == []


class _MeetingDescribes(SimulatedDestination):
    """Once armed, every describe waits until ``n`` are in flight together (checks made one
    after another break the barrier, and the error fails the whole call); ``broken``'s
    describe is then unavailable."""

    def __init__(self, broken: str) -> None:
        super().__init__()
        self.barrier, self.broken = None, broken

    def describe(self, namespace, workflow_id, run_id=None):
        if self.barrier is not None:
            self.barrier.wait()
            if workflow_id == destination_workflow_id(self.broken):
                raise DestinationUnavailable("describe: unavailable")
        return super().describe(namespace, workflow_id, run_id)


def test_rollback_many_checks_the_destination_concurrently_each_error_in_its_place(
        tmp_path) -> None:
    dest = _MeetingDescribes(broken=SIDS[1])
    with open_service(f"sqlite:///{tmp_path / 'd.db'}", dest, worker_id="w") as svc:
        for sid in SIDS[:4]:
            svc.create_schedule(NS, sid)
        dest.barrier = threading.Barrier(4, timeout=10)
        answers = svc.rollback_many(NS, SIDS[:4])
        assert isinstance(answers[1], Unavailable), answers[1]  # as one rollback refuses it
        assert [answers[i].outcome for i in (0, 2, 3)] == ["accepted"] * 3
        with pytest.raises(NotFound):
            svc.migration(NS, SIDS[1])  # nothing written for the refused one
        assert svc.verify() == []


def test_rollback_many_answers_a_refused_gate_in_its_place(tmp_path) -> None:
    """A schedule pending under another request id is refused (as one ``rollback`` refuses
    it) without failing the rest of the call."""
    with open_service(f"sqlite:///{tmp_path / 'g.db'}", "sim", worker_id="w") as svc:
        for sid in SIDS[:2]:
            svc.create_schedule(NS, sid)
        svc.rollback(NS, SIDS[0], "someone-else")
        with pytest.raises(DomainError) as one:
            svc.rollback(NS, SIDS[0], "mine")
        answers = svc.rollback_many(NS, SIDS[:2], ["mine", "mine-too"])
        assert type(answers[0]) is type(one.value) and str(answers[0]) == str(one.value)
        assert answers[1].outcome == "accepted"


@pytest.fixture(params=["sqlite", "postgres"])
def lease_engine(request, tmp_path):
    if request.param == "sqlite":
        store = f"sqlite:///{tmp_path / 'l.db'}"
    else:
        store = request.getfixturevalue("pg_store")
    with open_service(store, "sim") as svc:
        yield svc.due.engine


def test_a_lease_is_held_by_one_worker_until_released_or_expired(lease_engine) -> None:
    a, b = Leases(lease_engine, seconds=0.5), Leases(lease_engine, seconds=60)
    m = [uuid4() for _ in range(4)]
    assert a.take(m[:3], "A") == m[:3]
    assert b.take(m[1:], "B") == [m[3]]  # A holds the rest
    assert a.take(m[:1], "A") == m[:1]  # its own again (renewed)
    time.sleep(0.6)  # A's leases expire: taken over
    assert b.take(m[:3], "B") == m[:3]
    a.release(m, "A")  # A's release no longer touches what B holds
    assert sorted(h[0] for h in b.held()) == sorted(str(x) for x in m)
    b.release(m, "B")
    assert b.held() == []


def test_two_workers_taking_one_batch_in_opposite_orders_never_deadlock(lease_engine) -> None:
    """Found by test_workers' two-pool race: two takes of the same ids, each in its own order,
    locked each other's index entries and PostgreSQL killed one ("deadlock detected"). Each
    take now locks its ids in one order; a duplicate id is taken once."""
    ids = [uuid4() for _ in range(300)]
    errors: list[BaseException] = []

    def take(holder: str, order: list) -> None:
        leases = Leases(lease_engine, seconds=60)
        try:
            for _ in range(15):
                taken = leases.take(order + order[:3], holder)
                assert len(set(taken)) == len(taken)  # each id answered once
                leases.release(order, holder)
        except Exception as exc:  # noqa: BLE001 (a deadlock is the finding)
            errors.append(exc)

    threads = [threading.Thread(target=take, args=("A", ids)),
               threading.Thread(target=take, args=("B", ids[::-1]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
