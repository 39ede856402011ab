"""Pure decisions of the fenced rollback: state × input → events or an error.

The rules are stated in docs/protocol.md, 'The steps'. No I/O happens here. The service asks
the destination and hands its answers in as data; the functions return ``Facts`` (event class,
fields) for the migration, or raise a domain error with nothing written; ``steps.py`` adds
the source's side and the fence rechecks, so each command is one decision over both.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Literal

from schedfence.domain.errors import AlreadyExists, Closed, RecoveryRefused, SentinelBlocked
from schedfence.domain.ids import DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.rollback.aggregate import Migration, MigrationState
from schedfence.domain.rollback.phases import CLOSED_PHASES, AnswerKind
from schedfence.domain.model import Fact, Facts
from schedfence.domain.rollback import evidence as rt
from schedfence.domain.ports import (AlreadyStarted, DestinationNotReached, DestinationUnavailable,
                    RunDescription, StartAccepted, StartWorkflow)
from schedfence.domain.process import Step
from schedfence.domain.source.scheduling import check_overlap_seen, check_phase
from schedfence.domain.source.state import ScheduleState

M = Migration
RollbackOutcome = Literal["accept", "already_pending", "already_completed"]


def rollback_gate(source: ScheduleState, request_id: str, same_id: MigrationState | None,
                  pending: MigrationState | None) -> RollbackOutcome:
    """Whether an admin rollback against the source's current incarnation is new, a retry
    of one pending or completed, or refused (F5, F7, F8, F11). The events of an accepted
    one are ``steps.rollback``'s; this gate is asked first, because only an accepted
    rollback needs the destination's sentinel check."""
    if same_id is not None and same_id.phase == "completed":
        return "already_completed"
    if source.closed:
        raise Closed(f"schedule {source.namespace}/{source.schedule_id} is closed")
    if pending is not None:
        if pending.request_id == request_id:
            return "already_pending"
        if pending.request_id is None:
            raise AlreadyExists("an identity-less (legacy) migration is pending; only an "
                                "operator may adopt it")
        raise AlreadyExists(f"a different migration is already pending "
                            f"(request id {pending.request_id})")
    if same_id is not None:
        raise AlreadyExists(f"request id {request_id} was already used by migration "
                            f"{same_id.migration_id} ({same_id.phase}); use a new request id")
    check_phase(source)  # no action start in flight, no stop pending (the phase gate)
    check_overlap_seen(source)  # no running action a Temporal Schedule's policy cannot see
    return "accept"


def claim_epoch(source: ScheduleState, last: MigrationState | None, epoch: int) -> int:
    """The epoch a new migration's claim belongs to. A source created before the latest
    failover may have been rolled back on the lost tail already (a derived id is a function of
    the incarnation, so a re-issued rollback is the same migration): its claim counts as
    pre-failover and reconciles first, unless an earlier migration of this incarnation has
    reconciled since the failover (the question is settled for it)."""
    if source.epoch >= epoch or (last is not None and last.epoch >= epoch):
        return epoch
    return source.epoch


def destination_check(workflow_id: str, current: RunDescription | None) -> dict[str, Any]:
    """A destination observation as events record it (sentinel gate, source create)."""
    run = None if current is None else {
        "run_id": current.run_id, "first_execution_run_id": current.first_execution_run_id,
        "workflow_type": current.workflow_type, "status": current.status,
        "create_request_id": current.create_request_id}
    return {"workflow_id": workflow_id, "current": run}


def sentinel_running(check: dict[str, Any] | None) -> bool:
    current = (check or {}).get("current")
    return isinstance(current, dict) and current.get("status") == "running" and \
        current.get("workflow_type") == DUMMY_WORKFLOW_TYPE


def check_sentinel(check: dict[str, Any]) -> None:
    """Only a *running* dummy blocks (F4, I12); a TOCTOU optimisation, not a proof."""
    if sentinel_running(check):
        raise SentinelBlocked(f"a running sentinel workflow holds {check['workflow_id']}; "
                              "retry after it ends")


def next_step(state: MigrationState, epoch: int = 0) -> Step:
    """What one task attempt may do in this state, in a store at ``epoch`` (the number
    of failovers recorded): a migration from before the latest failover reconciles first.
    A step of the shared vocabulary (domain/process.py): every rollback step but ``wait``
    and ``settle``, which ``steps.task_step`` adds."""
    if state.phase in CLOSED_PHASES:
        return Step.DROP
    if state.phase == "legacy_pending" or not state.request_id:
        return Step.FAIL_CLOSED
    if state.receipt is not None:  # a park after it (RECEIPTED_PARKS) waits for an operator
        return Step.IDLE if state.phase == "parked" else Step.CLOSE
    if state.epoch < epoch:
        return Step.FAILOVER_RECONCILE
    if state.phase == "pending" and state.claim_armed:
        return Step.CLAIM_AND_START
    if state.phase == "claimed":
        return Step.RECONCILE
    if state.park_reason == "foreign_destination" and state.no_commit_proven:
        return Step.CHECK_FOREIGN
    return Step.IDLE


Due = Literal["now", "after_failover", "operator", "closed"]
ACTS = (Step.CLOSE, Step.CLAIM_AND_START, Step.RECONCILE, Step.FAILOVER_RECONCILE,
        Step.CHECK_FOREIGN)


def due(state: MigrationState) -> Due:
    """Which workers may pick the migration up, as the due-work index stores it: a filter in
    front of ``next_step``, never instead of it. ``now``: a step can act in the migration's
    own epoch; ``after_failover``: only once the store has recorded a failover after its
    epoch (it reconciles first); ``operator``: only an operator moves it on (legacy, an
    unverified park, a park no answer proves harmless); ``closed``."""
    if state.phase in CLOSED_PHASES:
        return "closed"
    if next_step(state, state.epoch) in ACTS:
        return "now"
    if not state.unverified and next_step(state, state.epoch + 1) is Step.FAILOVER_RECONCILE:
        return "after_failover"
    return "operator"


def start_request(state: MigrationState) -> StartWorkflow:
    """The single start: the durable id, the *pre-migration* pause and notes (I3, I11), and
    for a schedule with a program the handover (the whole schedule the destination
    continues)."""
    return StartWorkflow(
        namespace=state.namespace, workflow_id=state.workflow_id,
        request_id=state.request_id or "", workflow_type=SCHEDULER_WORKFLOW_TYPE,
        input={"namespace": state.namespace, "schedule_id": state.schedule_id,
               "incarnation": state.incarnation, "paused": state.pre_paused,
               "notes": state.pre_notes,
               **({"handover": state.handover} if state.handover is not None else {})},
        id_reuse_policy="allow_duplicate", id_conflict_policy="fail",
    )


def claim_facts(state: MigrationState, attempt: int, worker: str) -> Facts:
    """Consume the claim and record the start, in one append, before the call (I4)."""
    req = start_request(state)
    ctx = {"request_id": state.request_id, "attempt": attempt, "worker": worker}
    return [
        Fact(M.StartClaimConsumed, dict(ctx)),
        Fact(M.DestinationStartIssued, dict(ctx, workflow_id=req.workflow_id,
                                        workflow_type=req.workflow_type,
                                        id_reuse_policy=req.id_reuse_policy,
                                        id_conflict_policy=req.id_conflict_policy,
                                        input=req.input)),
    ]


@dataclass(frozen=True)
class StartOutcome:
    """The start's answer as the decisions read it: the answer fields of its record,
    ``Migration.DestinationAnswered`` (the event adds the step's context and
    ``proves_no_commit``), recorded from this by ``decide_start_outcome`` alone."""

    kind: AnswerKind
    run_id: str = ""
    first_execution_run_id: str = ""
    start_request_id: str = ""
    status: str = ""
    detail: str = ""


def outcome_of_start(answer: StartAccepted | Exception) -> StartOutcome:
    """Classify what the destination said. Only a start the destination says it *started*
    is a creation; anything else that returned a run is a dedupe, which our id may owe to
    being attached to someone else's run, so it is verified against the chain head."""
    if isinstance(answer, StartAccepted):
        kind: AnswerKind = "created" if answer.started is True else "deduplicated"
        return StartOutcome(kind, answer.run_id, answer.first_execution_run_id, "",
                            answer.status)
    if isinstance(answer, AlreadyStarted):
        return StartOutcome("already_started", answer.run_id, answer.first_execution_run_id,
                            answer.start_request_id, "running")
    if isinstance(answer, DestinationNotReached):
        return StartOutcome("not_sent", detail=str(answer))
    if isinstance(answer, DestinationUnavailable):
        return StartOutcome("unavailable", detail=str(answer))
    return StartOutcome("rejected", detail=f"{type(answer).__name__}: {answer}")


def decide_start_outcome(state: MigrationState, out: StartOutcome, attempt: int,
                         worker: str) -> tuple[Facts, str | None]:
    """Events for the start's answer, and the chain head to verify (if any)."""
    ctx = {"request_id": state.request_id, "attempt": attempt, "worker": worker}
    same_id = out.kind == "already_started" and out.start_request_id == state.request_id
    no_commit = out.kind in ("rejected", "not_sent") or (out.kind == "already_started" and
                                                          not same_id)
    answered = Fact(M.DestinationAnswered, dict(ctx, **asdict(out), proves_no_commit=no_commit))
    first = out.first_execution_run_id or out.run_id
    if out.kind == "created" or same_id:
        # A creation, or AlreadyStarted naming our id as the running run's *create* id.
        evidence = "start_created" if out.kind == "created" else "already_started_same_id"
        return [answered, Fact(M.OwnershipAccepted, dict(ctx, destination_first_run_id=first,
                                                      evidence=evidence))], None
    if out.kind in ("already_started", "deduplicated"):
        return [answered], first
    if out.kind == "rejected":
        return [answered, Fact(M.MigrationParked, dict(ctx, reason="start_rejected",
                                                   detail=out.detail))], None
    if out.kind == "not_sent":
        # The call never left: nothing committed, so the claim may be used again later.
        return [answered, Fact(M.StartClaimRearmed, dict(
            ctx, actor="worker", reason="start_not_sent",
            evidence={"detail": out.detail}))], None
    return [answered], None  # unavailable: outcome unknown, the claim stays consumed


@dataclass(frozen=True)
class ChainObservation:
    """What the destination showed of the chain at the workflow id (reconcile)."""

    failure: Literal["unavailable", "no_current_run", "head_missing",
                     "no_first_run_identity"] | None = None
    current_run_id: str = ""
    current_status: str = ""
    first_run_id: str = ""
    head: RunDescription | None = None
    detail: str = ""
    claim_age: float | None = None  # seconds since the migration's last step, when read
    claim_grace: float | None = None  # for how long after it a start may still land
    observed_at: datetime | None = None  # when the destination was read
    retention: rt.RetentionReading | None = None  # read when the describe found no run

    @property
    def in_flight(self) -> bool:
        """Read so soon after the claim (or its unknown answer) that the one start may still
        be on its way: absence proves nothing yet."""
        return self.claim_age is not None and self.claim_grace is not None and \
            self.claim_age < self.claim_grace


def decide_chain(state: MigrationState, obs: ChainObservation, attempt: int,
                 worker: str) -> Facts:
    """Accept iff the chain head was *created* with our id (its STARTED request id, never an
    attached one); otherwise park (never start again)."""
    ctx = {"request_id": state.request_id, "attempt": attempt, "worker": worker}
    seen = dict(ctx, current_run_id=obs.current_run_id, current_status=obs.current_status,
                first_run_id=obs.first_run_id, detail=obs.detail, claim_age=obs.claim_age,
                claim_grace=obs.claim_grace)
    if obs.failure == "unavailable":
        return [Fact(M.ChainVerified, dict(seen, verdict="unavailable"))]
    if obs.in_flight and not chain_owned(state, obs):
        return []  # the start may still land: look again after the grace, park nothing
    if obs.failure is not None:
        return _absent(state, obs, ctx, seen)
    head = obs.head
    assert head is not None
    owned = chain_owned(state, obs)
    facts: Facts = [Fact(M.ChainVerified, dict(seen, **_head_seen(obs, owned)))]
    if owned:
        facts.append(Fact(M.OwnershipAccepted, dict(ctx, destination_first_run_id=obs.first_run_id,
                                                evidence="chain_head")))
    else:
        facts.append(Fact(M.MigrationParked, dict(
            ctx, reason="foreign_destination",
            detail=f"chain head {obs.first_run_id} was not started by {state.request_id}")))
    return facts


def _absent(state: MigrationState, obs: ChainObservation, ctx: dict[str, Any],
            seen: dict[str, Any]) -> Facts:
    """No chain head to judge: re-arm when no run at all is at the workflow id inside the
    namespace's retention and the start's outcome was unknown (F16, evidence.py); else park,
    saying why absence proved nothing."""
    detail = obs.detail or obs.failure or ""
    if obs.failure == "no_current_run":
        absence, why = rt.absence_proof(state.phase, state.unproven_starts, state.unverified,
                                        obs.retention, obs.claim_age, obs.claim_grace)
        if absence is not None:
            return [Fact(M.StartClaimRearmed, dict(
                ctx, actor="worker", reason=rt.REARM_REASON, absence=absence,
                evidence={"detail": detail}))]
        detail = f"{detail}; absence proves nothing: {why}"
    reason = "no_first_run_identity" if obs.failure == "no_first_run_identity" \
        else "head_missing"
    return [Fact(M.ChainVerified, dict(seen, verdict=obs.failure)),
            Fact(M.MigrationParked, dict(ctx, reason=reason, detail=detail))]


def chain_owned(state: MigrationState, obs: ChainObservation) -> bool:
    head = obs.head
    return head is not None and obs.failure is None and head.run_id == obs.first_run_id and \
        bool(state.request_id) and head.create_request_id == state.request_id


def _head_seen(obs: ChainObservation, owned: bool) -> dict[str, Any]:
    head = obs.head
    return {"verdict": "owned" if owned else "foreign",
            "head_request_ids": sorted(head.request_ids) if head else [],
            "head_create_request_id": head.create_request_id if head else ""}


def decide_failover_reconcile(state: MigrationState, obs: ChainObservation, epoch: int,
                              attempt: int, worker: str) -> Facts:
    """A migration accepted before the latest failover: the lost tail may have consumed its
    claim, started, and even seen the chain end. Accept only the chain head's create id as
    proof; anything else parks for an operator (``failover_unverified``), never re-arms."""
    if obs.failure == "unavailable":
        return []  # nothing learned: try again later, still before any start
    if obs.in_flight and not chain_owned(state, obs):
        return []  # a start from before the failover may still land: look again later
    ctx = {"request_id": state.request_id, "attempt": attempt, "worker": worker}
    seen = dict(ctx, current_run_id=obs.current_run_id, current_status=obs.current_status,
                first_run_id=obs.first_run_id, detail=obs.detail, claim_age=obs.claim_age,
                claim_grace=obs.claim_grace)
    facts: Facts = [Fact(M.FailoverReconciled, dict(ctx, epoch=epoch))]
    if obs.failure is not None:
        facts.append(Fact(M.ChainVerified, dict(seen, verdict=obs.failure)))
    else:
        owned = chain_owned(state, obs)
        facts.append(Fact(M.ChainVerified, dict(seen, **_head_seen(obs, owned))))
        if owned:
            return facts + [Fact(M.OwnershipAccepted, dict(
                ctx, destination_first_run_id=obs.first_run_id, evidence="chain_head"))]
    what = obs.detail or obs.failure or f"chain head {obs.first_run_id} was not created by " \
        f"{state.request_id}"
    return facts + [Fact(M.MigrationParked, dict(
        ctx, reason="failover_unverified",
        detail=f"accepted before failover {epoch}; the lost tail may have started the "
               f"destination and nothing proves the chain ours ({what})"))]


def decide_foreign_check(state: MigrationState, current: RunDescription | None,
                         attempt: int, worker: str) -> Facts:
    """Re-arm the claim once the foreign run that refused us has closed (F1)."""
    if current is not None and current.status == "running":
        return []
    evidence = {"current_run_id": current.run_id if current else "",
                "current_status": current.status if current else "no_current_run"}
    return [Fact(M.StartClaimRearmed, {"request_id": state.request_id, "attempt": attempt,
                                   "worker": worker, "actor": "worker",
                                   "reason": "foreign_run_closed", "evidence": evidence})]


def check_epoch(state: MigrationState, epoch: int, what: str) -> None:
    """Before the reconcile that follows a failover, nothing may act on the claim."""
    # An unverified park already demands a live-checked operator confirmation for anything.
    if state.is_open and state.receipt is None and state.epoch < epoch and not state.unverified:
        raise RecoveryRefused(
            f"cannot {what}: migration {state.migration_id} was accepted before failover "
            f"{epoch} and has not been reconciled since (the lost tail may have started the "
            "destination); run a worker first")


def decide_abort(state: MigrationState, actor: str, reason: str, epoch: int = 0) -> Facts:
    """Restore the source only while no start can have committed (F9, I9)."""
    if not state.is_open:
        raise RecoveryRefused(f"migration {state.migration_id} is {state.phase}")
    check_epoch(state, epoch, "abort")
    if state.receipt is not None:
        raise RecoveryRefused("ownership was already accepted by the destination; "
                              "the source can only be closed")
    if state.request_id is None:
        # An older release started with a fresh id on every attempt; any of them may have
        # committed, and nothing in our log can prove otherwise.
        raise RecoveryRefused("identity-less (legacy) migration: an older release may have "
                              "started the destination; it must be adopted, not aborted")
    if state.unverified:
        # Our log shows no start, but starts it does not hold (an older release's, a tail
        # lost in a failover) may have committed.
        raise RecoveryRefused(f"{state.unverified_why}; nothing proves that no start "
                              "committed: use recover resolve after a manual check")
    if not state.no_commit_proven:
        raise RecoveryRefused(
            f"a start was issued ({state.starts_issued}) and no answer proves it committed "
            "nothing; restoring the source could make two owners, so the migration stays")
    return [Fact(M.MigrationAborted, {"request_id": state.request_id, "actor": actor,
                                  "reason": reason, "restored_paused": state.pre_paused,
                                  "restored_notes": state.pre_notes})]


def close_facts(state: MigrationState, attempt: int, worker: str) -> Facts:
    return [Fact(M.SourceClosed, {"request_id": state.request_id, "attempt": attempt,
                              "worker": worker, "destination_first_run_id": state.receipt})]
