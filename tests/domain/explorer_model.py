"""The transition system the bounded explorer (test_model_explorer.py) walks: a tiny pure
model of the destination (runs, current run, chain heads, request ids; start semantics
under ALLOW_DUPLICATE/FAIL), our side folded from ``domain.decisions``, and ``step``,
the whole transition function over every input."""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from schedfence.domain.rollback import decide as d
from schedfence.domain.errors import DomainError, RecoveryRefused
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.rollback.aggregate import Migration, MigrationState, evolve_migration
from schedfence.domain.ports import (AlreadyStarted, DestinationUnavailable, RunDescription,
                                     StartAccepted)
from schedfence.domain.source.schedule import Schedule, evolve_schedule
from schedfence.domain.source.state import ScheduleState, check_fence
from schedfence.infra.adapters.store.codec import JSONBytes, PydanticMapper

NS, SID, RID, WORKER = "model", "explored", "rid-1", "explorer"
WID = destination_workflow_id(SID)
T = datetime(2024, 1, 1, tzinfo=timezone.utc)  # fixed: events must compare equal across runs
LEGACY_MAPPER = PydanticMapper(transcoder=JSONBytes())
MAX_DEPTH = 6


# -- the destination model -------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    run_id: str
    first: str
    create_id: str
    request_ids: frozenset[str]
    workflow_type: str
    status: str


@dataclass(frozen=True)
class Dest:
    runs: tuple[Run, ...] = ()  # retained runs; deletion removes them
    current: str | None = None  # None: never started, or the current run was deleted
    counter: int = 0
    created: tuple[tuple[str, str], ...] = ()  # (run id, create request id) of every start

    def run(self, run_id: str | None) -> Run | None:
        wanted = self.current if run_id is None else run_id
        return next((r for r in self.runs if r.run_id == wanted), None)

    def describe(self, run_id: str | None = None) -> RunDescription | None:
        r = self.run(run_id)
        if r is None:
            return None
        return RunDescription(r.run_id, r.first, r.workflow_type, r.status, r.request_ids,
                              r.create_id)

    def _add(self, create_id: str, wtype: str, first: str | None, by_start: bool) -> Dest:
        n = self.counter + 1
        rid = f"run-{n}"
        run = Run(rid, first or rid, create_id, frozenset({create_id}), wtype, "running")
        created = self.created + ((rid, create_id),) if by_start else self.created
        return Dest(self.runs + (run,), rid, n, created)

    def _set(self, run_id: str, **changes: Any) -> Dest:
        runs = tuple(replace(r, **changes) if r.run_id == run_id else r for r in self.runs)
        return replace(self, runs=runs)

    def start(self, request_id: str, wtype: str) -> tuple[Dest, StartAccepted | Exception]:
        """Dedupe against the current run, conflict FAIL while running, else a new chain."""
        cur = self.run(None)
        if cur is not None and request_id in cur.request_ids:
            # As the server answers: started iff our id is the run's create id.
            return self, StartAccepted(cur.run_id, cur.first, cur.status,
                                       started=request_id == cur.create_id)
        if cur is not None and cur.status == "running":
            return self, AlreadyStarted(cur.create_id, cur.run_id, cur.first)
        new = self._add(request_id, wtype, None, True)
        return new, StartAccepted(new.current, new.current, "running", started=True)

    def continue_as_new(self) -> Dest | None:
        cur = self.run(None)
        if cur is None or cur.status != "running":
            return None
        closed = self._set(cur.run_id, status="continued_as_new")
        return closed._add(f"can-{self.counter + 1}", cur.workflow_type, cur.first, False)

    def terminate(self) -> Dest | None:
        cur = self.run(None)
        if cur is None or cur.status != "running":
            return None
        return self._set(cur.run_id, status="terminated")

    def foreign_start(self) -> Dest | None:
        cur = self.run(None)
        if cur is not None and cur.status == "running":
            return None
        new, _ = self.start(f"foreign-{self.counter + 1}", "user-workflow")
        return new

    def attach_ours(self) -> Dest | None:
        """Somebody's USE_EXISTING start attaches our request id to a running foreign run:
        starts with our id now dedupe to it, yet it was never ours."""
        cur = self.run(None)
        if cur is None or cur.status != "running" or RID in cur.request_ids:
            return None
        return self._set(cur.run_id, request_ids=cur.request_ids | {RID})

    def delete_head(self) -> Dest | None:
        """Retention or DeleteWorkflowExecution of the latest chain's first run."""
        if not self.runs:
            return None
        head = self.runs[-1].first
        if self.run(head) is None:
            return None
        runs = tuple(r for r in self.runs if r.run_id != head)
        return replace(self, runs=runs, current=None if self.current == head else self.current)


# -- the world: our side plus the destination ------------------------------------------------

@dataclass(frozen=True)
class World:
    m: MigrationState
    s: ScheduleState
    dest: Dest
    mv: int  # aggregate versions, for the events' originator_version
    sv: int


def _key(w: World) -> str:
    return repr(w)  # MigrationState holds dicts, so the repr is the hashable identity


def _migration_events(w: World, facts: d.Facts) -> list[Any]:
    mid = UUID(w.m.migration_id)
    return [cls(originator_id=mid, originator_version=w.mv + i, timestamp=T, **fields)
            for i, (cls, fields) in enumerate(facts, start=1)]


def _schedule_event(w: World, cls: type, **fields: Any) -> Any:
    return cls(originator_id=UUID(w.m.source_id), originator_version=w.sv + 1, timestamp=T,
               **fields)


def _apply(w: World, events: list[Any], dest: Dest | None = None) -> World:
    m, s, mv, sv = w.m, w.s, w.mv, w.sv
    for e in events:
        if isinstance(e, Migration.Event):
            m, mv = evolve_migration(m, e), e.originator_version
        else:
            s, sv = evolve_schedule(s, e), e.originator_version
    return World(m, s, w.dest if dest is None else dest, mv, sv)


def _observe(dest: Dest, fault: str) -> d.ChainObservation:
    """What the worker's reconcile reads: the current run, then its chain head by run id."""
    if fault == "unavailable":
        return d.ChainObservation(failure="unavailable", detail="describe: unavailable")
    cur = dest.describe()
    if cur is None:
        return d.ChainObservation(failure="no_current_run")
    return _observe_head(dest, cur.first_execution_run_id, cur.run_id, cur.status)


def _observe_head(dest: Dest, first: str, run_id: str, status: str) -> d.ChainObservation:
    seen = dict(current_run_id=run_id, current_status=status, first_run_id=first)
    head = dest.describe(first)
    if head is None:
        return d.ChainObservation(failure="head_missing", **seen)
    return d.ChainObservation(head=head, **seen)


START_FAULTS = ("ok", "lost", "unavailable", "crash_after_claim", "crash_after_call")


def _claim_and_start(w: World, fault: str, attempt: int) -> tuple[World, list[Any]]:
    check_fence(w.s, w.m.request_id or "")
    events = _migration_events(w, d.claim_facts(w.m, attempt, WORKER))
    w = _apply(w, events)
    if fault == "crash_after_claim":
        return w, events
    req = d.start_request(w.m)
    dest, answer = w.dest, DestinationUnavailable("start: unavailable")
    if fault != "unavailable":
        dest, answer = w.dest.start(req.request_id, req.workflow_type)
        if fault == "lost":
            answer = DestinationUnavailable("start committed, response lost")
    w = replace(w, dest=dest)
    if fault == "crash_after_call":
        return w, events
    outcome = d.outcome_of_start(answer)
    facts, head = d.decide_start_outcome(w.m, outcome, attempt, WORKER)
    more = _migration_events(w, facts)
    w = _apply(w, more)
    if head is not None:
        obs = _observe_head(w.dest, head, outcome.run_id, outcome.status)
        chain = _migration_events(w, d.decide_chain(w.m, obs, attempt, WORKER))
        w, more = _apply(w, chain), more + chain
    return w, events + more


def _worker(w: World, fault: str) -> tuple[World, list[Any]] | None:
    """One worker step (a whole ``RollbackEngine._step``), with ``fault`` on its destination call."""
    step, attempt = d.next_step(w.m), w.m.attempts + 1
    if step == "claim_and_start":
        return _claim_and_start(w, fault, attempt)
    if step == "reconcile" and fault in ("ok", "unavailable"):
        events = _migration_events(w, d.decide_chain(w.m, _observe(w.dest, fault), attempt,
                                                     WORKER))
        return _apply(w, events), events
    if step == "check_foreign" and fault == "ok":
        facts = d.decide_foreign_check(w.m, w.dest.describe(), attempt, WORKER)
        events = _migration_events(w, facts)
        return (_apply(w, events), events) if events else None
    if step == "close" and fault == "ok":
        check_fence(w.s, w.m.request_id or "")
        close = _schedule_event(w, Schedule.ClosedByMigration, request_id=w.m.request_id,
                                migration_id=w.m.migration_id,
                                destination_first_run_id=w.m.receipt)
        events = [close] + _migration_events(w, d.close_facts(w.m, attempt, WORKER))
        return _apply(w, events), events
    return None  # drop, fail_closed, idle, or a fault this step cannot meet


def _may_abort(m: MigrationState) -> bool:
    return m.is_open and m.receipt is None and m.request_id is not None and m.no_commit_proven


def _abort(w: World) -> tuple[World, list[Any]] | None:
    try:
        facts = d.decide_abort(w.m, "operator", "explorer abort")
    except RecoveryRefused:
        # Refused exactly when it is over, a receipt exists, a start may have committed, or
        # it has no identity (an older release may have started the destination).
        assert not _may_abort(w.m)
        return None
    assert _may_abort(w.m)
    check_fence(w.s, w.m.request_id)
    release = _schedule_event(w, Schedule.FenceReleased, request_id=w.m.request_id,
                              migration_id=w.m.migration_id, restored_paused=w.m.pre_paused,
                              restored_notes=w.m.pre_notes)
    events = [release] + _migration_events(w, facts)
    return _apply(w, events), events


ENV = {"foreign_start": Dest.foreign_start, "continue_as_new": Dest.continue_as_new,
       "terminate": Dest.terminate, "delete_head": Dest.delete_head,
       "attach_ours": Dest.attach_ours}
INPUTS = [("worker", f) for f in START_FAULTS] + [("abort", "")] + [("env", e) for e in ENV]


def step(w: World, inp: tuple[str, str]) -> tuple[World, list[Any]] | None:
    """The whole transition function: pure, total over INPUTS (None = not applicable)."""
    kind, arg = inp
    try:
        if kind == "worker":
            return _worker(w, arg)
        if kind == "abort":
            return _abort(w)
    except DomainError:
        return None  # a fence recheck refused the transition: nothing is written
    dest = ENV[arg](w.dest)
    return None if dest is None else (replace(w, dest=dest), [])
