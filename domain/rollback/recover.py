"""Operator recovery of a stuck migration: pure decisions (F8, F9; docs/protocol.md).

Each recovery is an event carrying the operator's identity and reason, and is refused with
``RecoveryRefused`` (``failed_precondition``) where the protocol forbids it. The service hands in
what the destination showed live (``Look``); nothing here does I/O.

Adoption of a legacy migration is deliberately *not* a re-arm. An older release started the
destination with a fresh, unrecorded request id per attempt, so a chain it created can never
carry the new id and reconcile could never accept it, while a blind start could make a second
chain. The adopted migration therefore parks as ``adopted_unverified``; the operator then either
``resolve``s it after a manual check, or ``rearm``s it with ``confirm_no_destination_run``, which
is rechecked live (no current run, or a closed run that is not a scheduler run) and recorded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from schedfence.domain.destination_id import check_bind
from schedfence.domain.rollback.decide import check_epoch
from schedfence.domain.errors import InvalidArgument, RecoveryRefused
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.rollback.aggregate import Migration, MigrationState
from schedfence.domain.rollback.phases import RECEIPTED_PARKS
from schedfence.domain.model import Fact, Facts
from schedfence.domain.ports import RunDescription

M = Migration
KINDS = ("rearm", "abort", "adopt", "resolve", "bind")
RESOLUTIONS = ("source_kept", "destination_owns")
Resolution = Literal["source_kept", "destination_owns"]
ATTESTATIONS = {
    "source_kept": "the operator verified that no destination run of this schedule is live "
                   "(terminated or never started) and keeps the source",
    "destination_owns": "the operator verified that the named destination chain runs this "
                        "schedule",
    "no_destination_run": "the operator confirmed that no destination run of this schedule "
                          "exists, so a start cannot make a second chain",
}


@dataclass(frozen=True)
class Look:
    """The destination at the workflow id, read live: its current run, and a named run."""

    current: RunDescription | None = None
    named: RunDescription | None = None

    def observation(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"current": _run_doc(self.current)}
        if self.named is not None:
            doc["named"] = _run_doc(self.named)
        return doc


def _run_doc(run: RunDescription | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {"run_id": run.run_id, "first_execution_run_id": run.first_execution_run_id,
            "workflow_type": run.workflow_type, "status": run.status,
            "request_ids": sorted(run.request_ids), "create_request_id": run.create_request_id}


def receipted_park(state: MigrationState) -> bool:
    """Parked after the receipt (``RECEIPTED_PARKS``): the source stays fenced."""
    return state.phase == "parked" and state.receipt is not None and \
        state.park_reason in RECEIPTED_PARKS


def unverified(state: MigrationState) -> bool:
    return state.unverified


def _open_with_id(state: MigrationState, what: str) -> None:
    if not state.is_open:
        raise RecoveryRefused(f"cannot {what}: migration {state.migration_id} is {state.phase}")
    if state.request_id is None:
        raise RecoveryRefused(f"cannot {what}: identity-less (legacy) migration; adopt it "
                              "first (recover adopt)")
    if state.receipt is not None:
        raise RecoveryRefused(f"cannot {what}: ownership was already accepted (receipt "
                              f"{state.receipt}); the worker only closes the source now")


# -- rearm -------------------------------------------------------------------------------------
def check_rearm(state: MigrationState, confirmed: bool, epoch: int = 0) -> bool:
    """Refuse a re-arm the protocol forbids; True if it needs a live look at the destination."""
    _open_with_id(state, "re-arm the start claim")
    check_epoch(state, epoch, "re-arm the start claim")
    if state.phase not in ("parked", "claimed"):
        raise RecoveryRefused(f"nothing to re-arm: the migration is {state.phase} "
                              f"(claim armed: {state.claim_armed})")
    if not state.no_commit_proven:
        last = (state.last_answer or {}).get("kind", "none recorded")
        raise RecoveryRefused(
            f"the last start answer ({last}) does not prove that nothing committed; a new "
            "start could create a second chain (use recover resolve after a manual check)")
    if unverified(state):
        if not confirmed:
            raise RecoveryRefused(f"{state.unverified_why}; check it, then confirm "
                                  "(--confirm-no-destination-run)")
        return True
    return False


def decide_rearm(state: MigrationState, actor: str, reason: str, *, confirmed: bool,
                 look: Look | None, epoch: int = 0) -> Facts:
    """Re-arm the start claim: only with proof (or a live-checked confirmation) of no commit."""
    evidence: dict[str, Any] = {
        "starts_issued": state.starts_issued, "confirm_no_destination_run": confirmed,
        "last_answer_kind": (state.last_answer or {}).get("kind")}
    if check_rearm(state, confirmed, epoch):
        assert look is not None, "an unverified migration needs a live look"
        current = look.current
        if current is not None and current.status == "running":
            raise RecoveryRefused(f"run {current.run_id} ({current.workflow_type}) is running "
                                  f"at {state.workflow_id}; it must close first")
        if current is not None and current.workflow_type == SCHEDULER_WORKFLOW_TYPE:
            raise RecoveryRefused(
                f"the current run {current.run_id} at {state.workflow_id} is a scheduler run "
                f"({current.status}): a start we cannot see may own it; use recover resolve")
        evidence.update(basis="operator_confirmed_no_destination_run",
                        attestation=ATTESTATIONS["no_destination_run"],
                        observed="no_current_run" if current is None else "closed_foreign_run",
                        observation=look.observation())
    else:
        evidence.update(basis="no_commit_proven")
    return [Fact(M.StartClaimRearmed, {"request_id": state.request_id, "actor": actor,
                                   "reason": reason, "evidence": evidence})]


# -- adopt -------------------------------------------------------------------------------------
def decide_adopt(state: MigrationState, actor: str, reason: str, request_id: str,
                 id_taken_by: str | None, binding: dict[str, str] | None = None) -> Facts:
    """Give an identity-less migration a durable id; it parks until verified (never starts).
    ``binding``: the destination the adopting operator's process serves, which the adoption
    binds it to (domain/destination_id.py; an older release recorded none)."""
    if not state.is_open or state.phase != "legacy_pending" or state.request_id is not None:
        raise RecoveryRefused(f"only an identity-less (legacy_pending) migration can be "
                              f"adopted; migration {state.migration_id} is {state.phase} "
                              f"with request id {state.request_id!r}")
    if id_taken_by is not None:
        raise RecoveryRefused(f"request id {request_id} is already used by migration "
                              f"{id_taken_by} of this schedule; choose a new one")
    return [Fact(M.LegacyMigrationAdopted, {"request_id": request_id, "actor": actor,
                                            "reason": reason, "destination": binding})]


# -- bind --------------------------------------------------------------------------------------
def decide_bind(state: MigrationState, actor: str, reason: str,
                binding: dict[str, str]) -> Facts:
    """Bind an open migration whose destination is unknown (accepted by an older release) to
    ``binding``, the one the operator's process serves, on the operator's word that it is
    the one it was accepted against (domain/destination_id.py). A recorded destination is
    never replaced, and a closed migration has nothing left to bind."""
    if not state.is_open:
        raise RecoveryRefused(f"migration {state.migration_id} is {state.phase}: nothing "
                              "left to bind")
    check_bind(f"migration {state.namespace}/{state.schedule_id}", state.destination)
    return [Fact(M.DestinationBound, {"request_id": state.request_id, "actor": actor,
                                      "reason": reason, "destination": binding})]


# -- resolve -----------------------------------------------------------------------------------
def check_resolve(state: MigrationState, resolution: str, first_run_id: str | None) -> None:
    if resolution not in RESOLUTIONS:
        raise InvalidArgument(f"resolution must be one of {', '.join(RESOLUTIONS)}")
    if resolution == "destination_owns" and not first_run_id:
        raise InvalidArgument("destination_owns needs the destination chain's first run id")
    if resolution == "source_kept" and first_run_id:
        raise InvalidArgument("source_kept takes no first run id")
    if receipted_park(state):  # the receipt proved the chain; its schedule was deleted since
        if resolution != "destination_owns" or first_run_id != state.receipt:
            raise RecoveryRefused(f"the destination took ownership (receipt {state.receipt}) "
                                  f"before its schedule was deleted: only destination_owns "
                                  f"{state.receipt} resolves it (start the owed boundary times "
                                  "by hand first, if they are due)")
        return
    _open_with_id(state, "resolve")
    if state.phase != "parked":
        raise RecoveryRefused(f"only a parked migration can be resolved; it is {state.phase}")


def decide_resolve(state: MigrationState, actor: str, reason: str, resolution: str,
                   first_run_id: str | None, look: Look) -> Facts:
    """The operator's attested end of a parked migration, and the step it justifies."""
    check_resolve(state, resolution, first_run_id)
    rid = state.request_id
    resolved = {"request_id": rid, "actor": actor, "reason": reason, "resolution": resolution,
                "attestation": ATTESTATIONS[resolution], "observation": look.observation()}
    if resolution == "destination_owns":
        if not receipted_park(state):  # else the receipt proved the head (now past retention)
            _check_named_head(state, first_run_id or "", look.named)
        return [Fact(M.MigrationResolved, dict(resolved, destination_first_run_id=first_run_id)),
                Fact(M.SourceClosed, {"request_id": rid, "destination_first_run_id": first_run_id})]
    current = look.current
    if current is not None and current.status == "running" and \
            current.workflow_type == SCHEDULER_WORKFLOW_TYPE:
        raise RecoveryRefused(f"scheduler run {current.run_id} is running at "
                              f"{state.workflow_id}: keeping the source would make two owners; "
                              "terminate it first, or resolve destination_owns")
    return [Fact(M.MigrationResolved, resolved),
            Fact(M.MigrationAborted, {"request_id": rid, "actor": actor, "reason": reason,
                                  "restored_paused": state.pre_paused,
                                  "restored_notes": state.pre_notes})]


def _check_named_head(state: MigrationState, first: str, named: RunDescription | None) -> None:
    """The run the operator names must exist at our workflow id and head a scheduler chain."""
    if named is None:
        raise RecoveryRefused(f"run {first} does not exist at {state.workflow_id}")
    if named.workflow_type != SCHEDULER_WORKFLOW_TYPE:
        raise RecoveryRefused(f"run {first} is a {named.workflow_type}, not a scheduler run")
    if named.first_execution_run_id not in ("", named.run_id):
        raise RecoveryRefused(f"run {first} is not a chain head (its first run is "
                              f"{named.first_execution_run_id}); name the first run")


def confirmed_no_run(e: Migration.StartClaimRearmed) -> bool:
    """The re-arm records the operator's confirmation and a live look that backs it (the
    checker's I9 and I16 read it)."""
    ev = e.evidence or {}
    current = (ev.get("observation") or {}).get("current", "missing")
    if e.actor == "worker" or ev.get("confirm_no_destination_run") is not True:
        return False
    return current is None or (isinstance(current, dict) and current.get("status") != "running"
                               and current.get("workflow_type") != SCHEDULER_WORKFLOW_TYPE)
