"""What an operator may do about a migration that needs one, derived from the domain decisions.

Each operator action's verdict is a dry run of the decision that guards it on the folded state
(``decide_abort``, ``check_rearm``, ``check_resolve``, ``decide_adopt``: each raises where the
protocol forbids the action), and whether the worker will act by itself is ``next_step``'s
answer. Only the wording of the advice lives here; nothing is recorded.
"""
from __future__ import annotations

from typing import Any, Callable

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback import recover as r
from schedfence.domain.errors import DomainError
from schedfence.domain.rollback.aggregate import MigrationState
from schedfence.domain.rollback.phases import PARK_MEANING, WORKER_PHASES

ALLOWED = "allowed"


def dry_run(decide: Callable[[], object]) -> str:
    try:
        decide()
    except DomainError as exc:
        return f"refused: {exc.message}"
    return ALLOWED


def verdicts(state: MigrationState) -> dict[str, str]:
    """Operator action → ``allowed`` or ``refused: <the decision's reason>``."""
    rearm = dry_run(lambda: r.check_rearm(state, confirmed=False))
    if rearm != ALLOWED and dry_run(lambda: r.check_rearm(state, confirmed=True)) == ALLOWED:
        rearm = "allowed with --confirm-no-destination-run, after checking the destination"
    return {
        "abort": dry_run(lambda: d.decide_abort(state, "oncall", "dry-run")),
        "rearm": rearm,
        "resolve": dry_run(lambda: r.check_resolve(state, "destination_owns", state.receipt)
                           if r.receipted_park(state) else
                           r.check_resolve(state, "source_kept", None)),
        "adopt": dry_run(lambda: r.decide_adopt(state, "oncall", "dry-run", "dry-run", None)),
    }


# Seconds without progress (no event, or only failed attempts) before an open migration
# counts as stuck.
STUCK_AFTER = 300.0


def category(state: MigrationState, idle_seconds: float, stuck_after: float) -> str | None:
    if state.phase == "parked":
        return "parked"
    if state.phase == "legacy_pending":
        return "legacy"
    if state.phase in WORKER_PHASES and idle_seconds >= stuck_after:
        return "stuck"
    return None


CONFIRM = "--confirm-no-destination-run"


def commands(ns_id: str, allowed: dict[str, str],
             receipt: str | None = None) -> dict[str, list[str]]:
    """Operator action → the complete commands it may run as (every required flag present;
    YOU, WHY and FIRST_RUN_ID are the operator's values). ``receipt``: a park after the
    receipt, which only ``destination_owns`` naming the receipt's first run id resolves."""
    base = f"schedfence recover {{}} {ns_id} --actor YOU --reason WHY"
    rearm = base.format("rearm") + (f" {CONFIRM}" if CONFIRM in allowed["rearm"] else "")
    owns = base.format("resolve") + " --resolution destination_owns --first-run-id "
    return {"abort": [base.format("abort")],
            "rearm": [rearm],
            "resolve": [owns + receipt] if receipt else
                       [base.format("resolve") + " --resolution source_kept",
                        owns + "FIRST_RUN_ID"],
            "adopt": [base.format("adopt") + " --request-id NEW"]}


def actions(state: MigrationState, ns_id: str, idle_seconds: float,
            allowed: dict[str, str]) -> list[str]:
    """Advice lines, most useful first; ``ns_id`` is the "NAMESPACE SCHEDULE" argument pair.

    A line names at most one command, complete and at its end after ": "; the situation line
    only describes, the action lines below it carry the commands."""
    lines = _situation(state, idle_seconds)
    cmd = commands(ns_id, allowed, state.receipt if r.receipted_park(state) else None)
    for action in ("adopt", "rearm", "abort", "resolve"):
        verdict = allowed[action]
        if action == "resolve" and allowed["rearm"] == ALLOWED:
            continue  # nothing committed, proven: re-arm or abort, no manual attestation
        if verdict.startswith(ALLOWED):
            lines += [f"{action} {verdict}: {c}" for c in cmd[action]]
    return lines


def _situation(state: MigrationState, idle_seconds: float) -> list[str]:
    idle = f"{idle_seconds:.0f}s"
    if state.phase == "legacy_pending":
        return ["identity-less (legacy): an older release may have started the destination, "
                "so it cannot be aborted; adopt it with a new request id (it then parks "
                "adopted_unverified)"]
    if state.phase == "pending":
        return [f"no worker has claimed it for {idle}: check that a worker runs against this "
                "store"]
    if state.phase == "claimed":
        return [f"claim consumed {idle} ago, no receipt: reconcile only, never restart; check "
                "the worker and the destination's availability"]
    if state.phase == "receipted":
        return [f"ownership receipted {idle} ago but the source is not closed: check that a "
                "worker runs against this store; the close needs no destination call, "
                "except the boundary's settle on a Temporal Schedule destination"]
    return _parked(state)


# What an operator does about each park reason (what the reason means: PARK_MEANING).
_PARK_ACTION = {
    "foreign_destination": "re-arm only after proving nothing committed, or resolve after a "
                           "manual check",
    "head_missing": "re-arm only after proving nothing committed, or resolve after a manual "
                    "check",
    "no_first_run_identity": "verify the chain by hand, then resolve",
    "start_rejected": "fix the cause, then re-arm (the same request id starts again); "
                      "abort instead to give the rollback up",
    "adopted_unverified": "check the destination by hand, then re-arm confirming no "
                          "destination run, or resolve",
    "deleted_unsettled": "start by hand the boundary times a never-migrated schedule would "
                         "have started before the delete, then resolve destination_owns with "
                         "the receipt's first run id (the source then closes)",
    "failover_unverified": "check the destination by hand, then re-arm confirming no "
                           "destination run (none there), or resolve (source_kept / "
                           "destination_owns)",
}


def _parked(state: MigrationState) -> list[str]:
    reason = state.park_reason or ""
    if reason == "foreign_destination" and d.next_step(state) == "check_foreign":
        return ["a foreign run holds the workflow id and our start provably committed nothing:"
                " the claim re-arms automatically when the foreign run closes"]
    detail = f" ({state.park_detail})" if reason == "start_rejected" and state.park_detail \
        else ""
    action = _PARK_ACTION.get(reason, "resolve manually")
    return [f"{PARK_MEANING.get(reason, f'parked ({reason})')}{detail}: {action}"]


def stall_line(stall: dict[str, Any]) -> str:
    """The situation of a migration whose attempts keep failing (infra/engines/stalls.py):
    how long, at which step, the last error, and what to do about it."""
    step, error = stall["step"], stall.get("error")
    head = (f"no progress: {stall['failures']} failed attempt(s) at {step} over the last "
            f"{stall['stalled_seconds']:.0f}s")
    if step == "wait":
        return (f"{head}; a start another worker claimed may still land: a worker "
                "reconciles it after the claim grace; if this persists, check the worker "
                "that claimed it and the destination")
    last = f", last error: {error}" if error else " (no error raised; see its last answer)"
    return (f"{head}{last}; the destination does not answer this step (unreachable, or the "
            "server's scheduler workflow is busy): check the Temporal server's health and "
            "load; workers keep retrying by themselves and nothing is lost meanwhile (the "
            "fence holds); if it never clears, abort where allowed")
