"""Batched attempts: the rollback's happy path for many migrations at once, every step as
strong as one attempt's. The steps of ``RollbackEngine.attempt_batch`` (infra/engines/attempt.py),
as functions of the engine.

For a batch of due migrations the engine loads them, then

1. appends every claim (claim consumed, start issued, request recorded) in **one** save,
   before any start call (I4: a crash after it leaves each claimed migration reconcile-only);
2. issues the starts concurrently (the whole batch in flight together), each with its
   durable request id, exactly once;
3. appends every answer and receipt in one save;
4. closes every receipted one (source + migration) in one save.

Anything off the happy path (a chain head to prove, a settle, a back-off, a race with another
worker) is left to the one-migration attempt, which reloads and decides from the log. A save
that loses a race writes nothing (one transaction): the batch falls back to one attempt per
migration. A claim save whose answer was lost is checked migration by migration, as one
attempt's is; an answer save that fails is recorded one by one, never dropped.
"""
from __future__ import annotations

from concurrent.futures import wait
from dataclasses import dataclass
from threading import Event
from typing import Any, Iterator, cast
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from schedfence.domain.destination_id import DestinationMismatch, DestinationUnknown
from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback import steps as h
from schedfence.domain.errors import DomainError
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.ports import DestinationError, HandoverTarget
from schedfence.domain.process import Step
from schedfence.domain.source.schedule import Schedule

from schedfence.infra.adapters.store.bulk import load_many
from schedfence.infra.engines.attempt import (BACK_OFF, BATCH_SIZE, AttemptResult,
                                              RollbackEngine, _age)


@dataclass
class _Item:
    """One migration of a batch: its aggregates as loaded and what happened to it."""

    mig: Migration
    source: Schedule
    attempt: int
    outcome: d.StartOutcome | None = None
    head: str | None = None
    done: bool = False

    @property
    def answer(self) -> d.StartOutcome:
        """``outcome``, for the items past the starts: only answered ones get here."""
        return cast(d.StartOutcome, self.outcome)


def attempt_batch(engine: RollbackEngine, ids: list[UUID]) -> dict[UUID, AttemptResult]:
    """``engine.attempt_batch``: the happy path batched, the rest one by one."""
    results: dict[UUID, AttemptResult] = {}
    items = _claimable(engine, ids)
    if items:
        _claim_all(engine, items)
        claimed = [i for i in items if not i.done]
        _start_all(engine, claimed)
        _answer_all(engine, [i for i in claimed if i.outcome is not None])
        _verify_heads(engine, [i for i in claimed if i.head is not None])
        _close_all(engine, [i for i in claimed if _closable(engine, i)])
        results.update({i.mig.id: "progress" for i in items if i.done})
        results.update({i.mig.id: "backoff" for i in claimed  # as one attempt: look later
                        if i.outcome is not None and i.outcome.kind in BACK_OFF})
    for mid in ids:
        if mid not in results:  # off the happy path, or not finished: reload and decide
            results[mid] = engine.attempt(mid)
    return results


# -- the steps --------------------------------------------------------------------------------
def _claimable(engine: RollbackEngine, ids: list[UUID]) -> list[_Item]:
    """The migrations of ``ids`` whose next step is the claim, with their sources (two
    reads for the whole batch)."""
    epoch, ready = engine.epoch(), []
    for mig in load_many(engine.app, ids).values():
        st = mig.state
        in_flight = h.claim_in_flight(_age(mig), engine.claim_grace, engine.is_own(st.last_worker))
        if h.task_step(st, epoch, in_flight) is Step.CLAIM_AND_START and _ours(engine, st):
            ready.append(mig)
    sources = load_many(engine.app, [UUID(m.state.source_id) for m in ready])
    return [_Item(m, sources[UUID(m.state.source_id)], m.state.attempts + 1)
            for m in ready if UUID(m.state.source_id) in sources]


def _ours(engine: RollbackEngine, st: Any) -> bool:
    """Accepted against the destination this engine serves (else its attempt refuses it)."""
    try:
        engine.gate(st)
    except (DestinationMismatch, DestinationUnknown, DestinationError):
        return False
    return True


def _claim_all(engine: RollbackEngine, items: list[_Item]) -> None:
    """Every claim in one save; a refusal (fence moved) leaves that one to its attempt."""
    before = {i.mig.id: i.mig.state for i in items}  # as loaded, before the claim
    for item in list(items):
        try:
            h.claim(item.source.state, item.mig.state, item.attempt,
                    engine.worker_id).apply(None, item.mig)
        except DomainError:  # the fence no longer holds its id: its attempt decides
            items.remove(item)
    if not items:
        return
    try:
        engine.save("claim", *[i.mig for i in items])
    except IntegrityError:
        items.clear()  # one of them moved: nothing written; each goes one by one
    except Exception as exc:  # the store failed the save: which claims committed?
        for item in list(items):
            try:
                item.mig = engine.claim_if_ours(item.mig.id, before[item.mig.id],
                                                 item.attempt, exc)
            except Exception:  # noqa: BLE001 - not ours: its attempt decides
                items.remove(item)
        if not items:
            raise


def _start_all(engine: RollbackEngine, items: list[_Item]) -> None:
    """Each claimed migration's one start, concurrently (bounded)."""
    def start(item: _Item) -> None:  # not sent too late: then its attempt waits (F16)
        answer = engine.start_in_time(item.mig)
        item.outcome = None if answer is None else d.outcome_of_start(answer)
    futures = [engine.start_pool().submit(start, i) for i in items]
    wait(futures)  # every start returns before the batch goes on, even past a crash
    for future in futures:
        future.result()  # a crash in one start stops the batch (claims stay claimed)


def _answer_all(engine: RollbackEngine, items: list[_Item]) -> None:
    """Every answer (and receipt) in one save; on any failure, one by one (never lost)."""
    for item in items:
        change = h.answer(item.source.state, item.mig.state, item.answer, item.attempt,
                          engine.worker_id)
        change.apply(None, item.mig)
        item.head = change.head
    if not items:
        return
    try:
        engine.save("answer", *[i.mig for i in items])
    except IntegrityError:
        for item in items:  # nothing was written: record each answer on a fresh load
            fresh: Migration = engine.app.repository.get(item.mig.id)
            recorded = engine.record_answer(fresh, item.answer, item.attempt)
            item.mig = recorded[0] if recorded else fresh
            item.head = recorded[1] if recorded else None


def _verify_heads(engine: RollbackEngine, items: list[_Item]) -> None:
    """Starts answered with a run our id may not have created: each chain head proved
    at once, as one attempt does (the proof may park the migration, or accept it)."""
    for item in items:
        try:
            engine.verify_head(item.mig, cast(str, item.head), item.answer, item.attempt)
        except IntegrityError:
            continue  # another worker moved it: its own attempt decides
        item.done = True


def _closable(engine: RollbackEngine, item: _Item) -> bool:
    return h.batch_closable(item.mig.state, item.head,
                            isinstance(engine.destination, HandoverTarget))


def _close_all(engine: RollbackEngine, items: list[_Item]) -> None:
    changed: list[Any] = []
    for item in list(items):
        try:
            change = h.close(item.source.state, item.mig.state, item.attempt,
                             engine.worker_id)
        except DomainError:  # the fence moved: its own attempt decides
            items.remove(item)
            continue
        changed += change.apply(item.source, item.mig)
    if not changed:
        return
    try:
        engine.save("close", *changed)
    except IntegrityError:
        return  # nothing written: each closes in its own attempt
    for item in items:
        item.done = True


def leased_batches(worker: RollbackEngine, leases: Any, ids: list[UUID],
                   stop: Event | None = None,
                   size: int = BATCH_SIZE) -> Iterator[dict[UUID, AttemptResult]]:
    """``leased_batch`` over ``ids``, at most ``size`` at a time and no more than the worker's
    start limit leaves free (``worker.pacer``: infra/pacing.py ``AdaptiveLimit``, shared by a
    pool's threads), so no migration is claimed before its start can be sent; ``stop`` is
    checked before every batch: once it is set no new claim is taken."""
    start = 0
    while start < len(ids):
        if stop is not None and stop.is_set():
            return
        taken = worker.pacer.acquire(size, stop)
        if not taken:
            return  # stopped while waiting for a free slot
        try:
            yield leased_batch(worker, leases, ids[start:start + taken])
        finally:
            worker.pacer.release(taken)
        start += taken


def leased_batch(worker: RollbackEngine, leases: Any,
                 ids: list[UUID]) -> dict[UUID, AttemptResult]:
    """``worker.attempt_batch`` over the ids of ``ids`` it could lease (infra/engines/lease.py),
    the leases given back after; an id another worker holds is left out of the result."""
    held = leases.take(ids, worker.worker_id)
    try:
        return worker.attempt_batch(held)
    finally:
        leases.release(held, worker.worker_id)
