"""Forensic replay: every step of one migration, re-derived from the stored events alone.

The fold is generic: each event goes through its aggregate's own reducer (the same functions
the service uses) and through one incremental ``Checker``, so an event type added later (a
recovery event, an upcast legacy event) replays without a line here. Nothing in this module
talks to a destination; ``infra/application/offline.py`` opens a store with a destination that refuses every
call, so a copy of a production store can be read where nothing else is reachable.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator
from uuid import UUID

from schedfence.domain.destination_id import describe_binding
from schedfence.domain.errors import InvalidArgument, NotFound
from schedfence.domain.ids import schedule_aggregate_id
from schedfence.domain.invariants.checker import Checker, Violation
from schedfence.domain.rollback.aggregate import MigrationState, evolve_migration
from schedfence.domain.forward.aggregate import evolve_forward
from schedfence.domain.source.incarnation import latest_migration_id
from schedfence.domain.source.schedule import evolve_schedule
from schedfence.domain.source.key import ScheduleKey

from schedfence.infra.application.replay.explain import explain, next_step
from schedfence.infra.adapters.store.eventstore import FenceApplication
from schedfence.infra.adapters.store.history import key_events, kind_of, topic_of  # noqa: F401

MIGRATION_KINDS = ("migration", "forward")  # a rollback, or a forward migration
REDUCERS: dict[str, Callable[[Any, Any], Any]] = {
    "migration": evolve_migration, "schedule": evolve_schedule, "key": ScheduleKey.evolve,
    "forward": evolve_forward}


def as_dict(state: Any) -> dict[str, Any] | None:
    return None if state is None else asdict(state)


def diff_states(before: Any, after: Any) -> list[dict[str, Any]]:
    """Changed fields, in the dataclass's field order; every field when the state is created."""
    old, new = as_dict(before) or {}, as_dict(after) or {}
    names = list(new) + [k for k in old if k not in new]
    return [{"field": k, "before": old.get(k), "after": new.get(k)} for k in names
            if (k not in old) or old.get(k) != new.get(k)]


@dataclass
class Folded:
    """One event after folding: its aggregate's state before and after, and new violations."""

    position: int
    event: Any
    kind: str
    aggregate_id: str
    before: Any
    after: Any
    error: str | None
    violations: list[Violation] = field(default_factory=list)


class Folder:
    """Folds a log one event at a time with today's reducers and an incremental checker."""

    def __init__(self) -> None:
        self.checker = Checker()
        self.states: dict[str, Any] = {}

    def add(self, position: int, event: Any) -> Folded:
        kind, aid = kind_of(event), str(event.originator_id)
        before, error = self.states.get(aid), None
        after = before
        reducer = REDUCERS.get(kind)
        if reducer is not None:
            try:
                after = reducer(before, event)
            except Exception as exc:  # shown at its step; the checker reports it as I0
                error = f"reducer refused {type(event).__name__}: {exc}"
        self.states[aid] = after
        seen = len(self.checker.violations)
        self.checker.add(position, event)
        return Folded(position, event, kind, aid, before, after, error,
                      self.checker.violations[seen:])

    def finish(self) -> list[Violation]:
        """Cross-aggregate checks that need the whole history (paired appends)."""
        seen = len(self.checker.violations)
        return self.checker.finish()[seen:]


def fold(events: Iterable[tuple[int, Any]]) -> Iterator[Folded]:
    folder = Folder()
    for position, event in events:
        yield folder.add(position, event)


# -- one migration's replay -----------------------------------------------------------------
def _belongs(f: Folded, mid: str, source_id: str | None) -> str | None:
    """'migration' or 'source' if the replay of ``mid`` shows this step, else None."""
    if f.kind in MIGRATION_KINDS and f.aggregate_id == mid:
        return "migration"
    if f.kind == "schedule" and f.aggregate_id == source_id:
        names_us = str(getattr(f.event, "migration_id", "")) == mid
        flagged = any(v.migration_id == mid for v in f.violations)
        return "source" if names_us or flagged else None
    return None


def _source_of(events: list[tuple[int, Any]], mid: str) -> str | None:
    """The source aggregate: named by the migration's creation, else by the fence naming it."""
    for _, e in events:
        if str(e.originator_id) == mid and getattr(e, "source_id", None):
            return str(e.source_id)
    for _, e in events:
        if kind_of(e) == "schedule" and str(getattr(e, "migration_id", "")) == mid:
            return str(e.originator_id)
    return None


def _step(f: Folded, role: str, ctx: dict[str, Any]) -> dict[str, Any]:
    e = f.event
    payload = e.payload()
    return {
        "position": f.position, "role": role, "aggregate_id": f.aggregate_id,
        "version": e.originator_version, "timestamp": e.timestamp.isoformat(),
        "type": type(e).__name__, "topic": topic_of(e), "payload": payload,
        "attempt": payload.get("attempt"), "worker": payload.get("worker"),
        "actor": payload.get("actor") or None,
        "diff": diff_states(f.before, f.after), "error": f.error,
        "decision": explain(role, e, f.before, f.after, ctx),
        "checks": [v.to_dict() for v in f.violations],
    }


def _cut(events: list[tuple[int, Any]], mid: str, at: int | None) -> int | None:
    """The log position of the migration's event at version ``at`` (None: the whole log)."""
    if at is None:
        return None
    versions = {e.originator_version: p for p, e in events if str(e.originator_id) == mid}
    if at not in versions:
        raise InvalidArgument(f"--at {at}: migration {mid} has versions 1..{max(versions)}")
    return versions[at]


def replay_migration(events: Iterable[tuple[int, Any]], migration_id: str,
                     at: int | None = None) -> dict[str, Any]:
    """The replay document of one migration, from a key's decoded (position, event) pairs.

    ``events`` must hold the key's whole history (its schedules and migrations) in log order,
    so the checker sees what the migration's invariants depend on."""
    events = list(events)
    mid = str(migration_id)
    if not any(str(e.originator_id) == mid and kind_of(e) in MIGRATION_KINDS
               for _, e in events):
        raise NotFound(f"migration {mid} not found in this schedule's history")
    cut, source_id = _cut(events, mid, at), _source_of(events, mid)
    folder, steps = Folder(), []
    ctx: dict[str, Any] = {}
    state: MigrationState | None = None
    version = 0
    for position, event in events:
        if cut is not None and position > cut:
            break
        f = folder.add(position, event)
        role = _belongs(f, mid, source_id)
        if role is None:
            continue
        steps.append(_step(f, role, ctx))
        if role == "migration":
            state, version = f.after, event.originator_version
    final = [] if cut is not None else [v for v in folder.finish()
                                        if v.migration_id == mid]
    violations = [v for s in steps for v in s["checks"]] + [v.to_dict() for v in final]
    return {
        "namespace": state.namespace if state else "", "schedule_id":
            state.schedule_id if state else "",
        "migration_id": mid, "source_id": source_id, "request_id":
            state.request_id if state else None,
        "requested_by": next((s["actor"] for s in steps if s["role"] == "migration"
                              and s["version"] == 1), None),
        "at": at, "version": version, "steps": steps, "state": as_dict(state),
        # What it was accepted against (domain/destination_id.py), one line.
        "destination": describe_binding(state.destination) if state else None,
        "next_step": next_step(state) if state else None,
        "final_checks": [v.to_dict() for v in final], "violations": violations,
        "ok": not violations,
    }


# -- reading a store --------------------------------------------------------------------------
def check_at(at: int | None) -> None:
    if at is not None and (isinstance(at, bool) or not isinstance(at, int) or at < 1):
        raise InvalidArgument(f"--at must be a migration version >= 1, got {at!r}")


def replay_key(app: FenceApplication, namespace: str, schedule_id: str, incarnation: int,
               at: int | None = None, migration_id: str | None = None) -> dict[str, Any]:
    """``MigrationService.replay``: the key's latest migration unless one is named
    (``incarnation``: the key's current one; ``at`` checked with ``check_at`` first)."""
    check_at(at)
    events = key_events(app, namespace, schedule_id, incarnation)
    if migration_id is None:
        migration_id = latest_migration(events, namespace, schedule_id, incarnation)
    try:
        mid = str(UUID(str(migration_id)))
    except ValueError:
        raise InvalidArgument(f"--migration {migration_id!r} is not a migration id") from None
    return replay_migration(events, mid, at)


def latest_migration(events: list[tuple[int, Any]], namespace: str, schedule_id: str,
                     incarnation: int) -> str:
    """As ``MigrationService.migration`` picks it (the open one, else the most recent), but
    from the sources' folded events: a migration event the aggregate cannot load is exactly
    what a forensic replay must still be able to show."""
    states = {f.aggregate_id: f.after for f in fold(events) if f.kind == "schedule"}
    found = latest_migration_id(
        states.get(str(schedule_aggregate_id(namespace, schedule_id, n)))
        for n in range(incarnation, 0, -1))
    if found is None:
        raise NotFound(f"schedule {namespace}/{schedule_id} has no migration")
    return found
