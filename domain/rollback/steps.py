"""The handoff across the two aggregates: every command and task step of a rollback as one
pure decision (docs/protocol.md, 'The steps').

Each function takes the states it needs (the source's, the migration's), the inputs the
application gathered (the destination's answer, the store's epoch, the time since the last
step) and returns a ``Change``: the events for the source *and* the migration, which the
application saves in one append, or raises the domain error with nothing to write. The fence
rechecks (the source must still be fenced for this migration's id, I10) are made here, on the
source state handed in, before any event is returned.

The migration-only rules these build on are in ``decide.py`` (worker steps) and
``recover.py`` (operator steps); the source's own rules in ``source/schedule.py``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence
from uuid import UUID

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback import recover as r
from schedfence.domain.errors import Closed, RecoveryRefused
from schedfence.domain.rollback.handover import check_handover, handover_of
from schedfence.domain.ids import derive_request_id, destination_workflow_id, migration_aggregate_id
from schedfence.domain.rollback.aggregate import Migration, MigrationState
from schedfence.domain.model import EvolvingAggregate, Fact, Facts
from schedfence.domain.ports import RunDescription
from schedfence.domain.process import Step
from schedfence.domain.source.schedule import (Schedule, adopt_fence_facts, close_source_facts,
                                               fence_facts, release_fence_facts)
from schedfence.domain.source.state import ScheduleState, check_fence

M = Migration


@dataclass(frozen=True)
class Change:
    """What one decision writes: the source's events and the migration's, in one append.

    ``outcome`` is the command's answer where it has one (a rollback's ``accepted``,
    ``already_pending`` or ``already_completed``); ``migration_id`` names the migration the
    change is about; ``head`` is a chain head the worker must verify next (a start answer
    that returned a run our id may not have created)."""

    source: tuple[Fact, ...] = ()
    migration: tuple[Fact, ...] = ()
    outcome: str = ""
    migration_id: str = ""
    head: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.source or self.migration)

    @property
    def receipt(self) -> bool:
        return any(f.event is M.OwnershipAccepted for f in self.migration)

    def apply(self, source: Schedule | None,
              migration: Migration | None) -> list[EvolvingAggregate]:
        """Record the events on the aggregates (a rollback creates the migration); returns
        the aggregates that changed, source first, for one atomic save."""
        changed: list[EvolvingAggregate] = []
        if self.source:
            assert source is not None
            source.record(list(self.source))
            changed.append(source)
        if self.migration:
            facts = list(self.migration)
            if migration is None:
                first = facts.pop(0)
                assert first.event is M.RequestIdAssigned, "only a rollback creates"
                migration = Migration.assign_request_id(UUID(self.migration_id),
                                                        **first.fields)
            migration.record(facts)
            changed.append(migration)
        return changed


def change(source: Sequence[Fact] = (), migration: Sequence[Fact] = (), **kw: Any) -> Change:
    return Change(tuple(source), tuple(migration), **kw)


def _open(source: ScheduleState, mig: MigrationState | None) -> MigrationState:
    if mig is None:
        held = source.fence_migration_id
        raise RecoveryRefused(
            f"schedule {source.namespace}/{source.schedule_id} has no open migration" +
            (f" to roll back; forward migration {held} holds it (forward-status, "
             "forward-abort)"
             if held else ""))
    return mig


# -- rollback (admin) --------------------------------------------------------------------------
def rollback_identity(namespace: str, schedule_id: str, incarnation: int,
                      request_id: str | None) -> tuple[str, Literal["caller", "derived"], UUID]:
    """The durable request id (the caller's, or derived from the incarnation so a retried
    caller-less rollback is the same migration), its origin, and the migration's id."""
    origin: Literal["caller", "derived"] = "caller" if request_id is not None else "derived"
    rid = request_id if request_id is not None else derive_request_id(
        namespace, schedule_id, incarnation)
    return rid, origin, migration_aggregate_id(namespace, schedule_id, rid)


def rollback(source: ScheduleState, source_id: str, request_id: str, origin: str,
             migration_id: UUID, *, same: MigrationState | None,
             pending: MigrationState | None, last: MigrationState | None,
             sentinel: dict[str, Any] | None, epoch: int, actor: str,
             job_id: str | None = None,
             destination: dict[str, str] | None = None) -> Change:
    """Accept a rollback: the migration's id and armed claim, and the source's fence, in one
    append (F5, F7, F8, F11). ``sentinel`` is the destination check the gate needs; it is
    only read when the rollback is accepted (see ``decide.rollback_gate``); ``destination``:
    the destination both were read from, which binds the migration (domain/destination_id.py)."""
    outcome = d.rollback_gate(source, request_id, same, pending)
    if outcome != "accept":
        existing = same if same is not None else pending
        assert existing is not None
        return change(outcome=outcome, migration_id=existing.migration_id)
    assert sentinel is not None, "an accepted rollback needs the sentinel check"
    d.check_sentinel(sentinel)
    handover = None if source.spec is None else handover_of(source, source.paused, source.notes)
    if handover is not None:
        check_handover(handover)  # what the destination cannot carry is refused, unwritten
    created = Fact(M.RequestIdAssigned, dict(
        namespace=source.namespace, schedule_id=source.schedule_id, source_id=source_id,
        incarnation=source.incarnation, workflow_id=destination_workflow_id(source.schedule_id),
        request_id=request_id, origin=origin, pre_paused=source.paused, pre_notes=source.notes,
        claim_armed=True, actor=actor, epoch=d.claim_epoch(source, last, epoch),
        sentinel_check=sentinel, job_id=job_id, destination=destination,
        handover=None if handover is None else handover.model_dump(mode="json")))
    return change(fence_facts(source, request_id, str(migration_id)), [created],
                  outcome="accepted", migration_id=str(migration_id))


def abort(source: ScheduleState, mig: MigrationState | None, actor: str, reason: str,
          epoch: int) -> Change:
    """Cancel the open migration and restore the source, only while no start can have
    committed (F9, I9)."""
    mig = _open(source, mig)
    facts = d.decide_abort(mig, actor, reason, epoch)
    return change(release_fence_facts(source, mig.request_id, mig.pre_paused, mig.pre_notes),
                  facts, migration_id=mig.migration_id)


# -- the worker's task steps -------------------------------------------------------------------
def is_own_worker(worker: str | None, worker_id: str, own_prefix: str = "") -> bool:
    """The step was taken by this worker (or, with ``own_prefix``, by one of its threads)."""
    p = own_prefix
    return worker == worker_id or bool(p) and (worker == p or (worker or "").startswith(p + "/"))


def claim_in_flight(age_seconds: float, claim_grace: float, own: bool) -> bool:
    """Another worker consumed the claim (or its answer was unknown) ``age_seconds`` ago: its
    one start may still be on its way, so leave it. A liveness rule, not a safety one:
    reconciling early can only park (head_missing), never start twice. Our own claims are
    never waited for: their start calls have returned."""
    return not own and claim_grace > 0 and age_seconds < claim_grace


def task_step(mig: MigrationState, epoch: int, in_flight: bool,
              settles: bool = False) -> Step:
    """What one attempt may do now: ``decide.next_step``, or ``wait`` while another
    worker's start may still land before a reconcile would look, or ``settle`` before the
    close when the destination takes the whole schedule (``settles``, see ``needs_settle``)."""
    step = d.next_step(mig, epoch)
    if in_flight and (step is Step.RECONCILE or
                      (step is Step.FAILOVER_RECONCILE and mig.phase == "claimed")):
        return Step.WAIT
    if step is Step.CLOSE and needs_settle(mig, settles):
        return Step.SETTLE
    return step


def claim(source: ScheduleState, mig: MigrationState, attempt: int, worker: str) -> Change:
    """Consume the claim and record the start before the call (I4), while the fence holds."""
    check_fence(source, mig.request_id or "")
    return change((), d.claim_facts(mig, attempt, worker), migration_id=mig.migration_id)


def claimed_by(now: MigrationState, before: MigrationState, worker: str, attempt: int) -> bool:
    """Whether ``now`` (reloaded after a save whose answer was lost) holds the claim this
    worker's attempt made on ``before``: one more start issued, by this worker and attempt."""
    return now.phase == "claimed" and now.last_worker == worker and now.attempts == attempt \
        and now.starts_issued == before.starts_issued + 1 and not now.claim_armed


def _receipted(source: ScheduleState, mig: MigrationState, facts: Facts, **kw: Any) -> Change:
    """A receipt is only written while the source's fence still holds our id (I10)."""
    if any(f.event is M.OwnershipAccepted for f in facts):
        check_fence(source, mig.request_id or "")
    return change((), facts, migration_id=mig.migration_id, **kw)


def answer(source: ScheduleState, mig: MigrationState, outcome: d.StartOutcome, attempt: int,
           worker: str) -> Change:
    """The one start's answer; ``head`` names a chain head to verify next. Never after the
    receipt or the end (I8): a second answer there could only repeat what is settled."""
    if mig.receipt is not None or not mig.is_open:
        raise Closed(f"migration {mig.migration_id} is {mig.phase} and holds "
                     f"{'a' if mig.receipt is not None else 'no'} receipt: no answer is "
                     "recorded after the receipt or the end")
    facts, head = d.decide_start_outcome(mig, outcome, attempt, worker)
    return _receipted(source, mig, facts, head=head)


def chain(source: ScheduleState, mig: MigrationState, obs: d.ChainObservation, attempt: int,
          worker: str) -> Change:
    """Reconcile: accept iff the chain head was created with our id, else park."""
    return _receipted(source, mig, d.decide_chain(mig, obs, attempt, worker))


def failover_reconcile(source: ScheduleState, mig: MigrationState, obs: d.ChainObservation,
                       epoch: int, attempt: int, worker: str) -> Change:
    """The first step of a migration accepted before the latest failover."""
    return _receipted(source, mig, d.decide_failover_reconcile(mig, obs, epoch, attempt,
                                                               worker))


def foreign_check(mig: MigrationState, current: RunDescription | None, attempt: int,
                  worker: str) -> Change:
    """Re-arm once the foreign run that refused us has closed (F1)."""
    return change((), d.decide_foreign_check(mig, current, attempt, worker),
                  migration_id=mig.migration_id)


def needs_settle(mig: MigrationState, settles: bool) -> bool:
    """Before the close: a destination that took the whole schedule (``settles``) has not
    yet been asked for the times at its boundary."""
    return settles and mig.handover is not None and mig.receipt is not None and \
        not mig.boundary_settled


def batch_closable(mig: MigrationState, head: str | None, settles: bool) -> bool:
    """Whether a batch closes the migration in its one close save: its answer left no chain
    head to prove, the receipt is in, it is still open, and no settle is owed first
    (``needs_settle``). Anything else is left to the migration's own attempt."""
    return head is None and mig.receipt is not None and mig.is_open and \
        not needs_settle(mig, settles)


def settled(mig: MigrationState, started: list[str], attempt: int, worker: str,
            detail: str = "", pin: str | None = None, deleted_at: str | None = None,
            over_limit: int | None = None, after_delete: list[str] | None = None) -> Change:
    """Record what the boundary's settle asked the destination to start (after the receipt);
    ``deleted_at``: the schedule was deleted first, and ``started`` were started as plain
    workflows (domain/rollback/handover_gone.py); ``over_limit``: starts the destination made beyond
    the limit (domain.handover.limit_overrun); ``after_delete``: the times the server itself
    started at or after the delete."""
    _settle_open(mig)
    return change((), [Fact(M.BoundarySettled, {
        "request_id": mig.request_id, "attempt": attempt, "worker": worker,
        "started": list(started), "detail": detail[:500], "pin": pin,
        "deleted_at": deleted_at, "over_limit": over_limit,
        "after_delete": list(after_delete or [])})], migration_id=mig.migration_id)


def settle_unreadable(mig: MigrationState, detail: str, attempt: int, worker: str) -> Change:
    """The schedule was deleted before the settle and its scheduler workflow cannot be read:
    park ``deleted_unsettled`` with the source still fenced (nothing is guessed)."""
    _settle_open(mig)
    return change((), [Fact(M.MigrationParked, {
        "request_id": mig.request_id, "attempt": attempt, "worker": worker,
        "reason": "deleted_unsettled", "detail": detail[:500]})],
                  migration_id=mig.migration_id)


def _settle_open(mig: MigrationState) -> None:
    if mig.receipt is None or mig.handover is None or mig.boundary_settled or \
            mig.phase != "receipted":
        raise RecoveryRefused("a boundary is settled once, after the receipt of a handover")


def close(source: ScheduleState, mig: MigrationState, attempt: int, worker: str) -> Change:
    """Close the source for good with the receipt, and complete the migration (I2, I10)."""
    return change(close_source_facts(source, mig.request_id or "", mig.receipt or ""),
                  d.close_facts(mig, attempt, worker), migration_id=mig.migration_id)


# -- operator recovery -------------------------------------------------------------------------
def adoption_id(source: ScheduleState, request_id: str | None) -> tuple[str, UUID]:
    """The id an adoption gives (default: the one a caller-less rollback of this incarnation
    derives, so that rollback finds this migration), and the migration id it maps to."""
    rid = request_id or derive_request_id(source.namespace, source.schedule_id,
                                          source.incarnation)
    return rid, migration_aggregate_id(source.namespace, source.schedule_id, rid)


def adopt(source: ScheduleState, mig: MigrationState | None, actor: str, reason: str,
          request_id: str, id_taken_by: str | None,
          binding: dict[str, str] | None = None) -> Change:
    """A durable id for an identity-less migration, on it and on the fence at once (F8),
    bound to the destination the operator's process serves."""
    mig = _open(source, mig)
    facts = r.decide_adopt(mig, actor, reason, request_id, id_taken_by, binding)
    return change(adopt_fence_facts(source, request_id, mig.migration_id), facts,
                  migration_id=mig.migration_id)


def bind(source: ScheduleState, mig: MigrationState | None, actor: str, reason: str,
         binding: dict[str, str]) -> Change:
    """Bind an unknown migration to the destination the operator serves (recover.py)."""
    mig = _open(source, mig)
    return change((), r.decide_bind(mig, actor, reason, binding),
                  migration_id=mig.migration_id)


def rearm_needs_look(source: ScheduleState, mig: MigrationState | None, confirmed: bool,
                     epoch: int) -> bool:
    """Refuse a re-arm the protocol forbids before the destination is asked; True if the
    decision needs a live look at the destination."""
    return r.check_rearm(_open(source, mig), confirmed, epoch)


def rearm(source: ScheduleState, mig: MigrationState | None, actor: str, reason: str, *,
          confirmed: bool, look: r.Look | None, epoch: int) -> Change:
    """Re-arm the start claim: the fence must hold its id, and nothing may have committed."""
    mig = _open(source, mig)
    r.check_rearm(mig, confirmed, epoch)
    check_fence(source, mig.request_id or "")
    return change((), r.decide_rearm(mig, actor, reason, confirmed=confirmed, look=look,
                                     epoch=epoch), migration_id=mig.migration_id)


def resolve_check(source: ScheduleState, mig: MigrationState | None, resolution: str,
                  first_run_id: str | None) -> MigrationState:
    """Refuse a resolution the protocol forbids before the destination is asked."""
    mig = _open(source, mig)
    r.check_resolve(mig, resolution, first_run_id)
    return mig


def resolve(source: ScheduleState, mig: MigrationState | None, actor: str, reason: str,
            resolution: str, first_run_id: str | None, look: r.Look) -> Change:
    """An operator's attested end of a parked migration, and the source's side of it: closed
    for the named destination chain, or restored."""
    mig = resolve_check(source, mig, resolution, first_run_id)
    facts = r.decide_resolve(mig, actor, reason, resolution, first_run_id, look)
    rid = mig.request_id or ""
    src = close_source_facts(source, rid, first_run_id or "") \
        if resolution == "destination_owns" \
        else release_fence_facts(source, rid, mig.pre_paused, mig.pre_notes)
    return change(src, facts, migration_id=mig.migration_id)
