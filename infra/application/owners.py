"""The ownership audit (``schedfence owners``, ``GET /v1/owners``): every key the store has a
history for beside every schedule of the Temporal namespace, one row each
(domain/owners/classify.py), recorded as one event (domain/owners/audit.py).

The store's side is read from the operator projection, caught up first (each key's and its
current source's folded state; with ``deep``, each deciding rollback's handover). Temporal's
through the destination's ``ScheduleInventory`` port: ListSchedules page by page, then a
describe for each row that claims drift (a listing lags), or, ``deep``, for every schedule;
describes run ``concurrency`` at a time.

``last_audit(app, namespace)`` (projections/ownership.py) reads the last recorded audit from
the log alone (no Temporal call): what ``oncall``, the gauge ``schedfence_ownership_drift``
and the web page show.
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from sqlalchemy import select

from schedfence.domain.errors import InvalidArgument, NotFound
from schedfence.domain.owners.audit import AuditState, OwnershipAudits, decide_record
from schedfence.domain.owners.classify import (AtDestination, OwnerRow, StoreSays, classify,
                                               needs_describe, store_says)
from schedfence.domain.ports import (DestinationUnavailable, ListedSchedule,
                                     NamespaceNotFound, ScheduleInventory, command_error)
from schedfence.domain.text import validate_actor, validate_id
from schedfence.infra.application.actor import actor_or_default
from schedfence.infra.pacing import retry_call
from schedfence.projections import tables as t
from schedfence.projections.ownership import last_audit, load_audits

MAX_CONCURRENCY = 64
T = TypeVar("T")
READ_TRIES, READ_PAUSE = 4, 0.5  # a read asked again after 0.5, 1, 2 s
LIST_PAGE = 250  # a page the dev server lists well inside the RPC deadline when busy


@dataclass(frozen=True)
class AuditOptions:
    deep: bool = False
    actor: str = ""
    concurrency: int = 16  # describes in flight at once
    destination: str = ""  # what the audit names as where it looked (no secret)

    def check(self) -> AuditOptions:
        c = self.concurrency
        if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_CONCURRENCY:
            raise InvalidArgument(f"concurrency must be from 1 to {MAX_CONCURRENCY}")
        if self.actor:
            validate_actor(self.actor)
        return self


# -- the store's side ----------------------------------------------------------------------------
def store_keys(engine: Any, namespace: str,
               load_source: Callable[[str], dict[str, Any] | None]) -> dict[str, StoreSays]:
    """What the store's history says of every key of ``namespace`` (the projection's folded
    key and source rows; a key without a schedule yet is left out). A current source the
    projection holds no row for (one a forward migration created: its projection registers
    only ``Schedule.Created``) is read from the log by ``load_source(schedule_id)``."""
    a = t.aggregates.c
    keys: dict[str, dict[str, Any]] = {}
    sources: dict[tuple[str, int], dict[str, Any]] = {}
    with engine.connect() as conn:
        for kind, sid, incarnation, folded in conn.execute(
                select(a.kind, a.schedule_id, a.incarnation, a.folded).where(
                    a.namespace == namespace, a.kind.in_(("key", "schedule")),
                    a.folded.is_not(None))):
            if kind == "key":
                keys[sid] = json.loads(folded)
            else:
                sources[(sid, incarnation)] = json.loads(folded)
    found = {}
    for sid, key in keys.items():
        n = key.get("incarnation", 0)
        source = sources.get((sid, n)) if n else None
        if n and source is None:
            source = load_source(sid)
        says = store_says(key, source)
        if says is not None:
            found[sid] = says
    return found


def with_handovers(engine: Any, store: dict[str, StoreSays]) -> dict[str, StoreSays]:
    """Each handed-over key with its deciding rollback's handover (for ``deep``)."""
    m = t.migrations.c
    wanted = {s.migration_id: sid for sid, s in store.items()
              if s.stand == "temporal" and s.migration_id}
    ids = sorted(wanted)
    out = dict(store)
    with engine.connect() as conn:
        for start in range(0, len(ids), 500):
            for mid, folded in conn.execute(select(m.migration_id, m.folded).where(
                    m.migration_id.in_(ids[start:start + 500]))):
                sid = wanted[mid]
                out[sid] = StoreSays("temporal", migration_id=mid,
                                     handover=json.loads(folded).get("handover"))
    return out


# -- Temporal's side -----------------------------------------------------------------------------
def _at(found: ListedSchedule | None) -> AtDestination | None:
    return None if found is None else AtDestination(found.paused, found.next_run, found.program,
                                                    found.handed_over)


def read_again(read: Callable[[], T]) -> T:
    """A read of Temporal's, tried again after a pause when its outcome is unknown (a busy
    server times a describe out): a read changes nothing, so asking again is safe. A missing
    namespace, or a failure ``READ_TRIES`` times over, is raised."""
    for attempt in range(READ_TRIES):
        try:
            return read()
        except NamespaceNotFound:
            raise
        except DestinationUnavailable:
            if attempt == READ_TRIES - 1:
                raise
            time.sleep(READ_PAUSE * 2 ** attempt)
    raise AssertionError("unreachable")  # the loop returns or raises


class TemporalSide:
    """The namespace's schedules as listed, and describes, counted."""

    def __init__(self, inventory: ScheduleInventory, namespace: str, concurrency: int) -> None:
        self.inventory, self.namespace, self.concurrency = inventory, namespace, concurrency
        self.calls = {"list": 0, "describe": 0}

    def listed(self) -> dict[str, AtDestination]:
        found: dict[str, AtDestination] = {}
        token: bytes | None = None
        while True:
            page, token = read_again(lambda: self.inventory.list_schedule_page(
                self.namespace, token, LIST_PAGE))
            self.calls["list"] += 1
            found.update({s.schedule_id: AtDestination(s.paused, s.next_run,
                                                       handed_over=s.handed_over)
                          for s in page})
            if not token:
                return found

    def described(self, ids: list[str]) -> dict[str, AtDestination | None]:
        """A describe of each, ``concurrency`` at a time (None: no schedule there now)."""
        self.calls["describe"] += len(ids)
        if not ids:
            return {}

        def one(sid: str) -> AtDestination | None:
            return _at(read_again(lambda: self.inventory.find_schedule(self.namespace, sid)))
        with ThreadPoolExecutor(min(self.concurrency, len(ids))) as pool:
            return dict(zip(ids, pool.map(one, ids)))


def audit_rows(store: dict[str, StoreSays], side: TemporalSide, deep: bool) -> list[OwnerRow]:
    """One row per key either side knows, each drift confirmed by a describe (``deep``: every
    schedule described, and every handed-over key the listing misses)."""
    listed = side.listed()
    if deep:
        ask = sorted(set(listed) | {s for s, v in store.items() if v.stand == "temporal"})
    else:
        ask = sorted(s for s in set(store) | set(listed)
                     if needs_describe(store.get(s), listed.get(s)))
    now = side.described(ask)
    rows = []
    for sid in sorted(set(store) | set(listed) | {s for s, v in now.items() if v}):
        dest = now[sid] if sid in now else listed.get(sid)
        if dest is None and sid not in store:
            continue  # listed, then gone by its describe: nobody knows it now
        rows.append(classify(sid, store.get(sid), dest))
    return rows


# -- the use case --------------------------------------------------------------------------------
def run_audit(service: Any, namespace: str, options: AuditOptions = AuditOptions()
              ) -> AuditState:
    """Audit ``namespace`` and record it; the recorded audit. Temporal unreachable: nothing is
    recorded (``unavailable``; ``not_found`` for a namespace the server does not have)."""
    validate_id("namespace", namespace)
    options = options.check()
    inventory = service.destination
    if not isinstance(inventory, ScheduleInventory):
        raise InvalidArgument("the destination cannot list its schedules (choose sim or "
                              "temporal://HOST:PORT/NAMESPACE)")
    service.require_active()
    service.catch_up()
    store = store_keys(service.views.engine, namespace,
                       lambda sid: vars(service.load.source(namespace, sid).state))
    if options.deep:
        store = with_handovers(service.views.engine, store)
    side = TemporalSide(inventory, namespace, options.concurrency)
    try:
        rows = audit_rows(store, side, options.deep)
    except DestinationUnavailable as exc:
        raise command_error(exc, f"the ownership audit of {namespace}") from exc
    return record(service, namespace, rows, options, side.calls)


def record(service: Any, namespace: str, rows: list[OwnerRow], options: AuditOptions,
           calls: dict[str, int]) -> AuditState:
    facts = decide_record(namespace, rows, deep=options.deep, destination=options.destination,
                          actor=actor_or_default(options.actor), calls=calls)

    def save() -> AuditState:
        audits = load_audits(service.app, namespace) or OwnershipAudits.start(namespace)
        audits.record(facts)
        service.unit.save("owners", audits)
        return audits.state
    racing = InvalidArgument("another audit of this namespace was recorded at the same moment")
    return retry_call(save, **service.unit.on_conflict(racing))


def require_audit(app: Any, namespace: str) -> AuditState:
    found = last_audit(app, namespace)
    if found is None:
        raise NotFound(f"no ownership audit of {namespace} is recorded: run "
                       f"`schedfence owners --namespace {namespace}`")
    return found
