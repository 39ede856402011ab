"""What each replayed step decided, and on what inputs: the ids compared, the destination's
answer, the verdict, evidence or reason, as recorded in the event and the state before it.

The summary is the step's narration (projections/narration.py, the one every reader uses); the
comparisons are checked here, keyed by event type name. An event type without either (a later
release's, say) is still shown from its payload, so replay never needs a list of types.
"""
from __future__ import annotations

from typing import Any, Callable

from schedfence.domain.rollback.decide import next_step as rollback_next_step
from schedfence.domain.forward.aggregate import ForwardState
from schedfence.domain.rollback.evidence import refusal
from schedfence.projections.narration import narrate, short

# Fields every migration step carries; shown on the step's header line, not as inputs.
_CONTEXT = {"request_id", "attempt", "worker"}
Check = Callable[[Any, Any, dict[str, Any]], list[dict[str, Any]]]


def compare(name: str, left: Any, right: Any, *, member: bool = False) -> dict[str, Any]:
    """One recorded comparison; ``member`` means "left is in right"."""
    equal = (left in right) if member else (left == right)
    return {"name": name, "left": left, "right": right, "equal": bool(equal)}


def _claim(e: Any, st: Any, ctx: dict) -> list:
    return [compare("claim_armed before the claim", st.claim_armed, True)]


def _start(e: Any, st: Any, ctx: dict) -> list:
    got = [e.input.get("paused"), e.input.get("notes")]
    return [compare("start input (paused, notes) == pre-migration", got,
                    [st.pre_paused, st.pre_notes])]


def _answer(e: Any, st: Any, ctx: dict) -> list:
    if e.kind != "already_started":
        return []
    return [compare("start_request_id == request id", e.start_request_id, st.request_id)]


def _chain(e: Any, st: Any, ctx: dict) -> list:
    ctx["chain"] = e
    if e.verdict not in ("owned", "foreign"):
        return []
    return [compare("head_create_request_id == request id", e.head_create_request_id,
                    st.request_id)]


def _accept(e: Any, st: Any, ctx: dict) -> list:
    if e.evidence == "chain_head":
        chain = ctx.get("chain")
        proof = chain.first_run_id if chain is not None else None
        name = "receipt == verified chain head"
    else:
        answer = st.last_answer or {}
        proof = answer.get("first_execution_run_id") or answer.get("run_id")
        name = "receipt == answered chain head"
    return [compare(name, e.destination_first_run_id, proof)]


def _rearm(e: Any, st: Any, ctx: dict) -> list:
    absence = getattr(e, "absence", None)
    if absence is not None:  # F16: absence inside retention settles the one unproven start
        return [compare("unproven starts before the re-arm", st.unproven_starts, 1),
                compare("absence inside retention proves no commit",
                        refusal(absence) or "proves", "proves")]
    return [compare("unproven starts before the re-arm", st.unproven_starts, 0)]


def _closed(e: Any, st: Any, ctx: dict) -> list:
    return [compare("destination_first_run_id == receipt", e.destination_first_run_id,
                    st.receipt)]


def _aborted(e: Any, st: Any, ctx: dict) -> list:
    return [compare("unproven starts before the abort", st.unproven_starts, 0),
            compare("restored (paused, notes) == pre-migration",
                    [e.restored_paused, e.restored_notes], [st.pre_paused, st.pre_notes])]


def _fence_holder(e: Any, st: Any, ctx: dict) -> list:
    held = (st.fence_request_id, st.fence_migration_id) if st is not None else (None, None)
    return [compare("request id == fence request id", e.request_id, held[0]),
            compare("migration id == fence holder", e.migration_id, held[1])]


# What each step is checked against (the narration of the step is projections/narration.py's).
CHECKS: dict[str, Check] = {
    "StartClaimConsumed": _claim, "DestinationStartIssued": _start,
    "DestinationAnswered": _answer, "ChainVerified": _chain, "OwnershipAccepted": _accept,
    "StartClaimRearmed": _rearm, "SourceClosed": _closed, "MigrationAborted": _aborted,
    "ClosedByMigration": _fence_holder, "FenceReleased": _fence_holder,
}


def _generic(e: Any, st: Any) -> str:
    known = getattr(st, "request_id", None)  # a new id (an adoption, say) is worth showing
    fields = {k: v for k, v in e.payload().items()
              if k not in _CONTEXT or (k == "request_id" and v not in (None, known))}
    shown = ", ".join(f"{k}={short(v)}" for k, v in fields.items()) or "no fields"
    return f"{type(e).__name__}: {shown}"


def next_step(state: Any) -> str:
    """What a worker does next with a migration of either direction."""
    if isinstance(state, ForwardState):
        return f"forward {state.phase}" if state.is_open else "nothing (closed)"
    return rollback_next_step(state)


def summary(event: Any, before: Any) -> str:
    """The step's narration, or its fields for a type this release does not narrate."""
    line = narrate(getattr(type(event), "TOPIC", None) or type(event).__name__, event.payload())
    return line.text if line is not None else _generic(event, before)


def explain(role: str, event: Any, before: Any, after: Any,
            ctx: dict[str, Any]) -> dict[str, Any]:
    """The step's decision: summary, inputs and comparisons, and what a worker may do next."""
    check = CHECKS.get(type(event).__name__)
    text = summary(event, before)
    try:
        comparisons = check(event, before, ctx) if check is not None else []
    except Exception as exc:  # an event that does not fit its checks is still shown
        text, comparisons = _generic(event, before) + f" ({exc})", []
    rid = getattr(event, "request_id", None)
    # An identity-less migration has no id to compare with (an adoption assigns one).
    if role == "migration" and before is not None and None not in (rid, before.request_id):
        comparisons.insert(0, compare("event request id == migration request id", rid,
                                      before.request_id))
    migration = role == "migration"
    return {
        "summary": text,
        "inputs": {k: v for k, v in event.payload().items() if k not in _CONTEXT},
        "comparisons": comparisons,
        "step": next_step(before) if migration and before is not None else None,
        "next": next_step(after) if migration and after is not None else None,
    }
