"""What each replayed step decided, and on what inputs: the ids compared, the destination's
answer, the verdict, evidence or reason, as recorded in the event and the state before it.

Explanations are keyed by event type name; an event type without one (a later recovery event,
say) still gets a generic explanation from its payload, so replay never needs a list of types.
"""
from __future__ import annotations

from typing import Any, Callable

from schedfence.domain.decisions import next_step

# Fields every migration step carries; shown on the step's header line, not as inputs.
_CONTEXT = {"request_id", "attempt", "worker"}
Explainer = Callable[[Any, Any, dict[str, Any]], tuple[str, list[dict[str, Any]]]]


def compare(name: str, left: Any, right: Any, *, member: bool = False) -> dict[str, Any]:
    """One recorded comparison; ``member`` means "left is in right"."""
    equal = (left in right) if member else (left == right)
    return {"name": name, "left": left, "right": right, "equal": bool(equal)}


def _short(value: Any) -> str:
    text = "-" if value in (None, "") else str(value)
    return text[:8] if len(text) == 36 and text.count("-") == 4 else text


def _requested(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    if getattr(e, "request_id", "") is None:  # an older release's (v1) record, upcast on read
        return _legacy(e, st, ctx)
    return (f"rollback accepted with request id {e.request_id} ({e.origin}); pre-migration "
            f"paused={str(e.pre_paused).lower()}, notes recorded; source fenced in the same "
            "append", [])


def _legacy(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    return ("pending rollback with no durable request id (older release): every worker "
            "attempt fails closed", [])


def _claim(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    return ("start claim consumed durably before the only start call",
            [compare("claim_armed before the claim", st.claim_armed, True)])


def _start(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    got = (e.input.get("paused"), e.input.get("notes"))
    return (f"start issued at {e.workflow_id} ({e.id_reuse_policy}/{e.id_conflict_policy}), "
            f"input paused={str(got[0]).lower()}",
            [compare("start input (paused, notes) == pre-migration", list(got),
                     [st.pre_paused, st.pre_notes])])


def _answer(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    run, first = _short(e.run_id), _short(e.first_execution_run_id or e.run_id)
    if e.kind == "already_started":
        same = e.start_request_id == st.request_id
        tail = "ours (same request id): accept" if same else \
            "not ours: no proof of ownership, verify the chain head"
        return (f"destination answered already_started: run {run} (chain head {first}) was "
                f"started by {e.start_request_id}; {tail}",
                [compare("start_request_id == request id", e.start_request_id,
                         st.request_id)])
    text = {"created": f"created run {run}: accept (start_created)",
            "deduplicated": f"returned run {run} ({e.status}) that it did not create for "
                            "this id (the id may be attached): verify the chain head",
            "unavailable": f"unavailable ({e.detail}): outcome unknown, the claim stays "
                           "consumed, reconcile next",
            "rejected": f"rejected ({e.detail}): nothing committed, park start_rejected"}
    return (f"destination answered {e.kind}; " + text.get(e.kind, e.kind) +
            (" (proves no commit)" if e.proves_no_commit else ""), [])


def _chain(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    ctx["chain"] = e
    creator = e.head_create_request_id or "- (not recorded)"
    comps = [compare("head_create_request_id == request id", e.head_create_request_id,
                     st.request_id)] if e.verdict in ("owned", "foreign") else []
    attached = [i for i in e.head_request_ids if i != e.head_create_request_id]
    return (f"chain verified: {e.verdict}; current run {_short(e.current_run_id)} "
            f"({e.current_status or '-'}), chain head {_short(e.first_run_id)} created by "
            f"{creator}" + (f" (attached: {', '.join(attached)})" if attached else "") +
            (f"; {e.detail}" if e.detail else ""), comps)


def _failover(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    return (f"accepted before failover {e.epoch}: the lost tail may have used its claim, so "
            "it reconciles (accepts only the chain head's create id) before anything else",
            [])


def _accept(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    if e.evidence == "chain_head":
        chain = ctx.get("chain")
        proof = chain.first_run_id if chain is not None else None
        name = "receipt == verified chain head"
    else:
        answer = st.last_answer or {}
        proof = answer.get("first_execution_run_id") or answer.get("run_id")
        name = "receipt == answered chain head"
    return (f"ownership accepted on evidence {e.evidence}: receipt "
            f"{_short(e.destination_first_run_id)}",
            [compare(name, e.destination_first_run_id, proof)])


def _parked(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    return (f"parked {e.reason}" + (f": {e.detail}" if e.detail else "") +
            "; the source stays paused and fenced", [])


def _rearm(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    return (f"start claim re-armed by {e.actor} ({e.reason}); evidence {e.evidence or '-'}",
            [compare("unproven starts before the re-arm", st.unproven_starts, 0)])


def _closed(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    return (f"source closed; the receipt is {_short(st.receipt) if st.receipt else 'none'}",
            [compare("destination_first_run_id == receipt", e.destination_first_run_id,
                     st.receipt)])


def _aborted(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    return (f"aborted by {e.actor} ({e.reason}); source restored",
            [compare("unproven starts before the abort", st.unproven_starts, 0),
             compare("restored (paused, notes) == pre-migration",
                     [e.restored_paused, e.restored_notes], [st.pre_paused, st.pre_notes])])


def _fenced(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    return (f"source paused and fenced by request id {e.request_id or '- (none)'}", [])


def _fence_holder(e: Any, st: Any) -> list[dict[str, Any]]:
    held = (st.fence_request_id, st.fence_migration_id) if st is not None else (None, None)
    return [compare("request id == fence request id", e.request_id, held[0]),
            compare("migration id == fence holder", e.migration_id, held[1])]


def _source_closed(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    return (f"source closed by the migration (destination chain "
            f"{_short(e.destination_first_run_id)})", _fence_holder(e, st))


def _released(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    return (f"fence released; source restored to paused={str(e.restored_paused).lower()}",
            _fence_holder(e, st))


EXPLAINERS: dict[str, Explainer] = {
    "RequestIdAssigned": _requested,
    "StartClaimConsumed": _claim, "DestinationStartIssued": _start,
    "DestinationAnswered": _answer, "ChainVerified": _chain, "OwnershipAccepted": _accept,
    "MigrationParked": _parked, "StartClaimRearmed": _rearm, "SourceClosed": _closed,
    "MigrationAborted": _aborted, "FencedForMigration": _fenced,
    "FailoverReconciled": _failover,
    "ClosedByMigration": _source_closed, "FenceReleased": _released,
}


def _generic(e: Any, st: Any, ctx: dict) -> tuple[str, list]:
    known = getattr(st, "request_id", None)  # a new id (an adoption, say) is worth showing
    fields = {k: v for k, v in e.payload().items()
              if k not in _CONTEXT or (k == "request_id" and v not in (None, known))}
    shown = ", ".join(f"{k}={_short(v)}" for k, v in fields.items()) or "no fields"
    return f"{type(e).__name__}: {shown}", []


def explain(role: str, event: Any, before: Any, after: Any,
            ctx: dict[str, Any]) -> dict[str, Any]:
    """The step's decision: summary, inputs and comparisons, and what a worker may do next."""
    fn = EXPLAINERS.get(type(event).__name__, _generic)
    try:
        summary, comparisons = fn(event, before, ctx)
    except Exception as exc:  # an event that does not fit its explainer is still shown
        summary, comparisons = _generic(event, before, ctx)[0] + f" ({exc})", []
    rid = getattr(event, "request_id", None)
    # An identity-less migration has no id to compare with (an adoption assigns one).
    if role == "migration" and before is not None and None not in (rid, before.request_id):
        comparisons.insert(0, compare("event request id == migration request id", rid,
                                      before.request_id))
    migration = role == "migration"
    return {
        "summary": summary,
        "inputs": {k: v for k, v in event.payload().items() if k not in _CONTEXT},
        "comparisons": comparisons,
        "step": next_step(before) if migration and before is not None else None,
        "next": next_step(after) if migration and after is not None else None,
    }
