"""Pure decisions of the fenced rollback (PROTOCOL.md A2): state × input → events or an error.

No I/O happens here. The service asks the destination and hands its answers in as data; the
functions return ``facts`` (event class, fields) for ``Migration.record`` or raise a domain error
with nothing written.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .errors import AlreadyExists, Closed, RecoveryRefused
from .ids import SCHEDULER_WORKFLOW_TYPE
from .migration import Migration, MigrationState
from .ports import (AlreadyStarted, DestinationUnavailable, RunDescription, StartAccepted,
                    StartWorkflow)
from .schedule import ScheduleState

Facts = list[tuple[type, dict[str, Any]]]
M = Migration
RollbackOutcome = Literal["accept", "already_pending", "already_completed"]
TaskStep = Literal["drop", "fail_closed", "close", "claim_and_start", "reconcile",
                   "check_foreign", "idle"]


def decide_rollback(source: ScheduleState, request_id: str, same_id: MigrationState | None,
                    pending: MigrationState | None) -> RollbackOutcome:
    """Admin request against the source's current incarnation (A2.1, F5, F7, F8, F11)."""
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
    return "accept"


def next_step(state: MigrationState) -> TaskStep:
    """What one task attempt may do in this state (A2.2)."""
    if state.phase in ("completed", "aborted"):
        return "drop"
    if state.phase == "legacy_pending" or not state.request_id:
        return "fail_closed"
    if state.receipt is not None:
        return "close"
    if state.phase == "pending" and state.claim_armed:
        return "claim_and_start"
    if state.phase == "claimed":
        return "reconcile"
    if state.park_reason == "foreign_destination" and state.no_commit_proven:
        return "check_foreign"
    return "idle"


def start_request(state: MigrationState) -> StartWorkflow:
    """The single start: the durable id, and the *pre-migration* pause and notes (I3, I11)."""
    return StartWorkflow(
        namespace=state.namespace, workflow_id=state.workflow_id,
        request_id=state.request_id or "", workflow_type=SCHEDULER_WORKFLOW_TYPE,
        input={"namespace": state.namespace, "schedule_id": state.schedule_id,
               "incarnation": state.incarnation, "paused": state.pre_paused,
               "notes": state.pre_notes},
        id_reuse_policy="allow_duplicate", id_conflict_policy="fail",
    )


def claim_facts(state: MigrationState, attempt: int, worker: str) -> Facts:
    """Consume the claim and record the start, in one append, before the call (I4)."""
    req = start_request(state)
    ctx = {"request_id": state.request_id, "attempt": attempt, "worker": worker}
    return [
        (M.StartClaimConsumed, dict(ctx)),
        (M.DestinationStartIssued, dict(ctx, workflow_id=req.workflow_id,
                                        workflow_type=req.workflow_type,
                                        id_reuse_policy=req.id_reuse_policy,
                                        id_conflict_policy=req.id_conflict_policy,
                                        input=req.input)),
    ]


@dataclass(frozen=True)
class StartOutcome:
    kind: Literal["created", "deduplicated", "already_started", "unavailable", "rejected"]
    run_id: str = ""
    first_execution_run_id: str = ""
    start_request_id: str = ""
    status: str = ""
    detail: str = ""


def outcome_of_start(answer: StartAccepted | Exception) -> StartOutcome:
    """Classify what the destination said. A fresh run is running; a closed one is a dedupe."""
    if isinstance(answer, StartAccepted):
        kind = "created" if answer.status == "running" else "deduplicated"
        return StartOutcome(kind, answer.run_id, answer.first_execution_run_id, "",
                            answer.status)
    if isinstance(answer, AlreadyStarted):
        return StartOutcome("already_started", answer.run_id, answer.first_execution_run_id,
                            answer.start_request_id, "running")
    if isinstance(answer, DestinationUnavailable):
        return StartOutcome("unavailable", detail=str(answer))
    return StartOutcome("rejected", detail=f"{type(answer).__name__}: {answer}")


def decide_start_outcome(state: MigrationState, out: StartOutcome, attempt: int,
                         worker: str) -> tuple[Facts, str | None]:
    """Events for the start's answer, and the chain head to verify (if any) (A2.2)."""
    ctx = {"request_id": state.request_id, "attempt": attempt, "worker": worker}
    same_id = out.kind == "already_started" and out.start_request_id == state.request_id
    no_commit = out.kind == "rejected" or (out.kind == "already_started" and not same_id)
    answered = (M.DestinationAnswered, dict(
        ctx, kind=out.kind, run_id=out.run_id, first_execution_run_id=out.first_execution_run_id,
        start_request_id=out.start_request_id, status=out.status, detail=out.detail,
        proves_no_commit=no_commit))
    first = out.first_execution_run_id or out.run_id
    if out.kind in ("created", "deduplicated") or same_id:
        evidence = {"created": "start_created", "deduplicated": "start_deduplicated"}.get(
            out.kind, "already_started_same_id")
        return [answered, (M.OwnershipAccepted, dict(ctx, destination_first_run_id=first,
                                                      evidence=evidence))], None
    if out.kind == "already_started":
        return [answered], first
    if out.kind == "rejected":
        return [answered, (M.MigrationParked, dict(ctx, reason="start_rejected",
                                                   detail=out.detail))], None
    return [answered], None  # unavailable: outcome unknown, the claim stays consumed


@dataclass(frozen=True)
class ChainObservation:
    """What the destination showed of the chain at the workflow id (reconcile, A2.2)."""

    failure: Literal["unavailable", "no_current_run", "head_missing",
                     "no_first_run_identity"] | None = None
    current_run_id: str = ""
    current_status: str = ""
    first_run_id: str = ""
    head: RunDescription | None = None
    detail: str = ""


def decide_chain(state: MigrationState, obs: ChainObservation, attempt: int,
                 worker: str) -> Facts:
    """Accept iff the chain head's request ids hold ours; otherwise park (never start again)."""
    ctx = {"request_id": state.request_id, "attempt": attempt, "worker": worker}
    seen = dict(ctx, current_run_id=obs.current_run_id, current_status=obs.current_status,
                first_run_id=obs.first_run_id, detail=obs.detail)
    if obs.failure == "unavailable":
        return [(M.ChainVerified, dict(seen, verdict="unavailable"))]
    if obs.failure is not None:
        reason = "no_first_run_identity" if obs.failure == "no_first_run_identity" \
            else "head_missing"
        return [(M.ChainVerified, dict(seen, verdict=obs.failure)),
                (M.MigrationParked, dict(ctx, reason=reason,
                                         detail=obs.detail or obs.failure))]
    head = obs.head
    assert head is not None
    ids = sorted(head.request_ids)
    owned = head.run_id == obs.first_run_id and state.request_id in head.request_ids
    verdict = "owned" if owned else "foreign"
    facts: Facts = [(M.ChainVerified, dict(seen, verdict=verdict, head_request_ids=ids))]
    if owned:
        facts.append((M.OwnershipAccepted, dict(ctx, destination_first_run_id=obs.first_run_id,
                                                evidence="chain_head")))
    else:
        facts.append((M.MigrationParked, dict(
            ctx, reason="foreign_destination",
            detail=f"chain head {obs.first_run_id} was not started by {state.request_id}")))
    return facts


def decide_foreign_check(state: MigrationState, current: RunDescription | None,
                         attempt: int, worker: str) -> Facts:
    """Re-arm the claim once the foreign run that refused us has closed (F1 note, A2.2)."""
    if current is not None and current.status == "running":
        return []
    evidence = {"current_run_id": current.run_id if current else "",
                "current_status": current.status if current else "no_current_run"}
    return [(M.StartClaimRearmed, {"request_id": state.request_id, "attempt": attempt,
                                   "worker": worker, "actor": "worker",
                                   "reason": "foreign_run_closed", "evidence": evidence})]


def decide_abort(state: MigrationState, actor: str, reason: str) -> Facts:
    """Restore the source only while no start can have committed (A2.4, F9, I9)."""
    if not state.is_open:
        raise RecoveryRefused(f"migration {state.migration_id} is {state.phase}")
    if state.receipt is not None:
        raise RecoveryRefused("ownership was already accepted by the destination; "
                              "the source can only be closed")
    if state.request_id is None:
        # An older release started with a fresh id on every attempt; any of them may have
        # committed, and nothing in our log can prove otherwise.
        raise RecoveryRefused("identity-less (legacy) migration: an older release may have "
                              "started the destination; it must be adopted, not aborted")
    if state.park_reason == "adopted_unverified":
        # Our log shows no start, but the older release's unknown starts are not in it.
        raise RecoveryRefused("adopted legacy migration: nothing proves the older release "
                              "committed no start; use recover resolve after a manual check")
    if not state.no_commit_proven:
        raise RecoveryRefused(
            f"a start was issued ({state.starts_issued}) and no answer proves it committed "
            "nothing; restoring the source could make two owners, so the migration stays")
    return [(M.MigrationAborted, {"request_id": state.request_id, "actor": actor,
                                  "reason": reason, "restored_paused": state.pre_paused,
                                  "restored_notes": state.pre_notes})]


def close_facts(state: MigrationState, attempt: int, worker: str) -> Facts:
    return [(M.SourceClosed, {"request_id": state.request_id, "attempt": attempt,
                              "worker": worker, "destination_first_run_id": state.receipt})]
