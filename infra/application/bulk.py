"""Rollbacks of many schedules in one transaction (``MigrationService.rollback_many``).

Each schedule's rollback is decided exactly as one ``rollback`` decides it (``h.rollback``:
the admin gate, the sentinel check at the destination, the durable request id), from
aggregates read for the whole batch at once; every accepted one (source fenced, migration
created) is appended in **one** save. A save that loses a race to another writer writes
nothing; the batch then falls back to one ``rollback`` per schedule, which decides again.
It is given the parts it uses (``Parts``), never the application service.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, cast
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback import steps as h
from schedfence.domain.errors import DomainError, InvalidArgument, NotFound
from schedfence.domain.ports import Destination
from schedfence.domain.ids import schedule_key_id, validate_destination_key, validate_request_id
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.text import validate_actor

from schedfence.infra.adapters.store.bulk import load_many
from schedfence.infra.adapters.store.eventstore import FenceApplication
from schedfence.infra.application.actor import actor_or_default
from schedfence.infra.application.guards import accept_binding, rollback_check
from schedfence.infra.application.views import MigrationResult, Origin, Outcome
from schedfence.infra.engines.attempt import CONCURRENCY
from schedfence.infra.engines.unit_of_work import UnitOfWork

MAX_BATCH = 1000  # schedules per call


@dataclass(frozen=True)
class Parts:
    """What a batch of rollbacks uses."""

    app: FenceApplication
    destination: Destination
    require_active: Callable[[], None]
    unit: UnitOfWork  # every save: one append per decision
    epoch: Callable[[], int]
    rollback: Callable[[str, str, str | None, str, str | None], MigrationResult]  # one


def rollback_many(parts: Parts, namespace: str, schedule_ids: list[str],
                  request_ids: list[str] | None = None, actor: str = "",
                  job_id: str | None = None) -> list[MigrationResult | DomainError]:
    """One answer per schedule, in order: its ``MigrationResult``, or the refusal (a
    ``DomainError``) that one ``rollback`` of it would raise. Accepted ones land together."""
    _check(namespace, schedule_ids, request_ids, actor)
    parts.require_active()
    rids: list[str | None] = list(request_ids) if request_ids else [None] * len(schedule_ids)
    answers, changed = _decide(parts, namespace, schedule_ids, rids, actor, job_id)
    if changed:
        try:
            parts.unit.save("rollback", *changed)
        except IntegrityError:  # another writer moved one: nothing was written
            return [_one(parts, namespace, sid, rid, actor, job_id)
                    for sid, rid in zip(schedule_ids, rids)]
    return answers


def _check(namespace: str, schedule_ids: list[str], request_ids: list[str] | None,
           actor: str) -> None:
    if not 0 < len(schedule_ids) <= MAX_BATCH:
        raise InvalidArgument(f"give 1 to {MAX_BATCH} schedule ids, not {len(schedule_ids)}")
    if len(set(schedule_ids)) != len(schedule_ids):
        raise InvalidArgument("a schedule id is given twice")
    if request_ids is not None and len(request_ids) != len(schedule_ids):
        raise InvalidArgument("give one request id per schedule id")
    if actor:
        validate_actor(actor)


def _invalid(namespace: str, sid: str, rid: str | None) -> DomainError | None:
    """The refusal ``rollback`` gives this schedule's arguments before reading anything."""
    try:
        validate_destination_key(namespace, sid)
        if rid is not None:
            validate_request_id(rid)
    except DomainError as exc:
        return exc
    return None


def _one(parts: Parts, namespace: str, sid: str, rid: str | None,
         actor: str, job_id: str | None) -> MigrationResult | DomainError:
    try:
        return parts.rollback(namespace, sid, rid, actor, job_id)
    except DomainError as exc:
        return exc


@dataclass
class _Loaded:
    """One schedule's rollback inputs, read with the batch's."""

    source: Any
    identity: tuple[str, Origin, UUID]  # request id, its origin, migration id
    same: Any = None  # the migration of this request id, if any
    pending: Any = None  # the migration the source's fence holds, if any
    last: Any = None  # the source's last migration, if any
    sentinel: Any = None  # the destination check, when the gate would accept (or its error)
    binding: Any = None  # the destination it is accepted against (domain/destination_id.py)


def _load(parts: Parts, namespace: str, schedule_ids: list[str],
          rids: list[str | None]) -> dict[str, _Loaded]:
    """Keys, their current sources, and the migrations a rollback gate reads: three reads."""
    keys = load_many(parts.app, [schedule_key_id(namespace, s) for s in schedule_ids])
    current = {sid: key.state.current_schedule_id for sid in schedule_ids
               if (key := keys.get(schedule_key_id(namespace, sid))) is not None}
    sources = load_many(parts.app, [c for c in current.values() if c is not None])
    loaded = {sid: _Loaded(src, h.rollback_identity(namespace, sid, src.state.incarnation, rid))
              for sid, rid in zip(schedule_ids, rids)
              if (c := current.get(sid)) is not None and (src := sources.get(c)) is not None}
    wanted = [UUID(str(x)) for one in loaded.values()
              for x in (one.identity[2], one.source.state.fence_migration_id,
                        one.source.state.last_migration_id) if x is not None]
    migrations = load_many(parts.app, wanted)
    for one in loaded.values():
        st = one.source.state
        one.same, one.pending, one.last = (_state(migrations, x) for x in (
            one.identity[2], st.fence_migration_id, st.last_migration_id))
    return loaded


def _decide(parts: Parts, namespace: str, schedule_ids: list[str],
            rids: list[str | None], actor: str,
            job_id: str | None = None) -> tuple[list[Any], list[Any]]:
    loaded = _load(parts, namespace, schedule_ids, rids)
    _check_destination(parts, namespace, [
        (sid, one) for sid, rid in zip(schedule_ids, rids)
        if (one := loaded.get(sid)) is not None and _invalid(namespace, sid, rid) is None])
    epoch, who = parts.epoch(), actor_or_default(actor)
    answers: list[Any] = []
    changed: list[Any] = []
    for sid, rid in zip(schedule_ids, rids):
        one = loaded.get(sid)
        invalid = _invalid(namespace, sid, rid)
        if invalid is not None:
            answers.append(invalid)
            continue
        if one is None:
            answers.append(NotFound(f"schedule {namespace}/{sid} not found"))
            continue
        answer: MigrationResult | DomainError
        try:
            answer, aggregates = _decide_one(namespace, sid, one, epoch, who, job_id)
        except DomainError as exc:
            answer, aggregates = exc, []
        answers.append(answer)
        changed += aggregates
    return answers, changed


def _decide_one(namespace: str, sid: str, one: _Loaded, epoch: int,
                actor: str, job_id: str | None) -> tuple[MigrationResult, list[Any]]:
    """As ``MigrationService._rollback_once`` decides, on what the batch read."""
    st, (rid, origin, mid) = one.source.state, one.identity
    if isinstance(one.sentinel, Exception):
        raise one.sentinel  # what this schedule's own check raised, in its place
    change = h.rollback(st, str(one.source.id), rid, origin, mid, same=one.same,
                        pending=one.pending, last=one.last, sentinel=one.sentinel, epoch=epoch,
                        actor=actor, job_id=job_id, destination=one.binding)
    if change.outcome != "accepted":
        existing = one.same if one.same is not None else one.pending
        return MigrationResult(cast(Outcome, change.outcome), rid,
                               cast(Origin, existing.origin), change.migration_id), []
    return (MigrationResult("accepted", rid, origin, change.migration_id),
            change.apply(one.source, None))


def _check_destination(parts: Parts, namespace: str,
                       batch: list[tuple[str, _Loaded]]) -> None:
    """The sentinel check (one describe at the destination) of every schedule whose admin
    gate would accept, concurrently (bounded as the worker's starts are): one after another
    they cost a round trip each. A check's error is kept and raised in that schedule's place,
    so each answer is what one ``rollback`` of it would answer."""
    wanted = [(sid, one) for sid, one in batch if _gate(one) == "accept"]

    def check(item: tuple[str, _Loaded]) -> None:
        sid, one = item
        try:
            one.sentinel = rollback_check(parts.destination, namespace, sid,
                                          one.source.state)
            one.binding = accept_binding(parts.destination, namespace)
        except Exception as exc:  # noqa: BLE001 - re-raised by that schedule's decision
            one.sentinel = exc
    if len(wanted) == 1:
        check(wanted[0])
    elif wanted:
        with ThreadPoolExecutor(min(CONCURRENCY, len(wanted)), "sentinel-check") as pool:
            list(pool.map(check, wanted))


def _gate(one: _Loaded) -> str | None:
    """The admin gate's verdict; None for a refusal, which that schedule's decision raises
    again in its place."""
    try:
        return d.rollback_gate(one.source.state, one.identity[0], one.same, one.pending)
    except DomainError:
        return None


def _state(loaded: dict[UUID, Any], migration_id: Any) -> Any:
    found = loaded.get(UUID(str(migration_id))) if migration_id is not None else None
    return found.state if isinstance(found, Migration) else None
