"""The checker's rules for each step of one migration, over what it remembers of that migration
(``MigrationTrace``): the claim and its one start (I4, I11), the destination's answer and the
chain it saw (I4; the first proof of our own chain, for I5), a park on a read the start could
still land after (L1), the receipt's proof (I2, I13), the source close (I2), a re-arm (I9), the
restore (I9, I11), and the operator's adoption and resolution (I3, I2, I9).

``Checker`` (checker.py) runs the rules every step shares, then the one ``STEP_CHECKS`` names
for the step's event class; each rule reports through the checker's ``flag``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from schedfence.domain.rollback.aggregate import Migration, MigrationState
from schedfence.domain.rollback.evidence import ClaimRecord, rearm_refusal
from schedfence.domain.rollback.recover import confirmed_no_run

M = Migration
# The checker's ``flag``: (invariant, migration id, log positions, message).
Flag = Callable[[str, str, Iterable[int], str], None]


@dataclass
class MigrationTrace:
    """What the checker remembers of one migration beyond its folded state."""

    state: MigrationState
    created_at: int
    prev: Any = None
    prev_pos: int = 0
    answer: tuple[int, Any] | None = None
    chain: tuple[int, Any] | None = None
    receipt_at: int | None = None
    created_answers: list[int] = field(default_factory=list)
    source_closed_at: int | None = None
    aborted_at: int | None = None
    adopted_at: int | None = None
    chain_seen_at: int | None = None  # first proof that our own chain exists (I5)
    chains: set[str] = field(default_factory=set)  # first run ids this migration created
    claim: ClaimRecord | None = None  # the latest claim, and the answer to its start (F16)


def _claim(flag: Flag, mid: str, t: MigrationTrace, pos: int,
           e: Migration.StartClaimConsumed) -> None:
    t.claim = ClaimRecord(e.timestamp)
    if not t.state.claim_armed:
        flag("I4", mid, [pos], "start claim consumed while not armed")


def _start(flag: Flag, mid: str, t: MigrationTrace, pos: int,
           e: Migration.DestinationStartIssued) -> None:
    if not isinstance(t.prev, M.StartClaimConsumed):
        flag("I4", mid, [t.prev_pos, pos], "start issued without a claim consumed "
             "directly before it")
    handover = e.input.get("handover") or {}
    if (e.input.get("paused"), e.input.get("notes")) != (t.state.pre_paused,
                                                         t.state.pre_notes) or \
            handover.get("paused", t.state.pre_paused) != t.state.pre_paused or \
            handover.get("notes", t.state.pre_notes) != t.state.pre_notes:
        flag("I11", mid, [t.created_at, pos],
             "start input does not carry the pre-migration pause and notes")


def _answer(flag: Flag, mid: str, t: MigrationTrace, pos: int,
            e: Migration.DestinationAnswered) -> None:
    t.answer, t.claim = (pos, e), t.claim and ClaimRecord(t.claim.at, e.kind)
    if e.kind == "created" or (e.kind == "already_started" and
                               e.start_request_id == t.state.request_id):
        t.chain_seen_at = t.chain_seen_at or pos
    if e.kind == "created":
        t.chains.add(e.first_execution_run_id or e.run_id)
        t.created_answers.append(pos)
        if len(t.created_answers) > 1:
            flag("I4", mid, t.created_answers, "more than one destination chain "
                 "created by this migration")


def _park(flag: Flag, mid: str, t: MigrationTrace, pos: int, e: Migration.MigrationParked) -> None:
    """L1 (liveness): no park on what a destination read showed while the one start
    could still land (its recorded age inside its recorded grace): a false park."""
    c = t.prev
    if isinstance(c, M.ChainVerified) and c.claim_age is not None and \
            c.claim_grace is not None and c.claim_age < c.claim_grace:
        flag("L1", mid, [t.prev_pos, pos], f"parked {e.reason} on a read "
             f"{c.claim_age:.3f}s after the claim's last step, inside its "
             f"{c.claim_grace:g}s grace: the start could still land")


def _chain(flag: Flag, mid: str, t: MigrationTrace, pos: int, e: Migration.ChainVerified) -> None:
    t.chain = (pos, e)
    if _head_created_by(e, t.state.request_id):
        t.chain_seen_at = t.chain_seen_at or pos


def _accept(flag: Flag, mid: str, t: MigrationTrace, pos: int,
            e: Migration.OwnershipAccepted) -> None:
    t.receipt_at = pos
    rid, first = t.state.request_id, e.destination_first_run_id
    if e.evidence == "chain_head":
        # Only the head's *create* id proves the chain ours: an attached id proves
        # nothing, and a v1 record (which kept no create id) proves nothing either.
        ok = t.chain is not None and t.chain[1].first_run_id == first and \
            _head_created_by(t.chain[1], rid)
        proof = t.chain
    elif e.evidence == "start_deduplicated":
        ok, proof = False, t.answer  # our id was on the run: it may have been attached
    else:
        a = t.answer[1] if t.answer else None
        want = {"start_created": "created", "start_deduplicated": "deduplicated",
                "already_started_same_id": "already_started"}[e.evidence]
        ok = a is not None and a.kind == want and \
            (a.first_execution_run_id or a.run_id) == first and \
            (want != "already_started" or a.start_request_id == rid)
        proof = t.answer
    if not ok:
        # A chain-head receipt without an owned head is the continue-as-new hole (I13).
        inv = "I13" if e.evidence in ("chain_head", "start_deduplicated") else "I2"
        flag(inv, mid, [pos] + ([proof[0]] if proof else []),
             f"ownership accepted ({e.evidence}) without matching proof")


def _close(flag: Flag, mid: str, t: MigrationTrace, pos: int, e: Migration.SourceClosed) -> None:
    t.source_closed_at = pos
    if t.state.receipt is None or e.destination_first_run_id != t.state.receipt:
        flag("I2", mid, [pos], "source closed without an ownership receipt")


def _rearm(flag: Flag, mid: str, t: MigrationTrace, pos: int,
           e: Migration.StartClaimRearmed) -> None:
    if e.absence is not None:  # F16: is absence inside retention the proof it claims?
        why = rearm_refusal(e.absence, t.state, t.claim, getattr(t.prev, "timestamp", None))
        if why:
            flag("I9", mid, [t.prev_pos, pos], f"re-armed on an absence: {why}")
    elif not t.state.no_commit_proven:
        flag("I9", mid, [pos], "claim re-armed while a start may have committed")
    elif t.state.unverified and not confirmed_no_run(e):  # starts outside this log may exist
        flag("I9", mid, [pos], "adopted legacy migration re-armed without the "
             "operator-attested, live-checked absence of a destination run")


def _abort(flag: Flag, mid: str, t: MigrationTrace, pos: int,
           e: Migration.MigrationAborted) -> None:
    t.aborted_at = pos
    # An operator's source_kept resolution directly before it attests what no answer proves.
    attested = isinstance(t.prev, M.MigrationResolved) and \
        t.prev.resolution == "source_kept"
    if t.state.receipt is not None or not (attested or (
            t.state.no_commit_proven and not t.state.unverified)):
        flag("I9", mid, [pos], "source restored after a start that may have committed "
             "(no proof of no commit and no operator attestation)")
    if (e.restored_paused, e.restored_notes) != (t.state.pre_paused, t.state.pre_notes):
        flag("I11", mid, [t.created_at, pos], "restore does not give back the "
             "pre-migration pause and notes")


def _adopt(flag: Flag, mid: str, t: MigrationTrace, pos: int,
           e: Migration.LegacyMigrationAdopted) -> None:
    t.adopted_at = pos
    if t.state.phase != "legacy_pending" or t.state.request_id is not None:
        flag("I3", mid, [t.created_at, pos], "adoption of a migration that already "
             f"has a durable id ({t.state.request_id!r}, {t.state.phase})")


def _resolve(flag: Flag, mid: str, t: MigrationTrace, pos: int,
             e: Migration.MigrationResolved) -> None:
    inv = "I2" if e.resolution == "destination_owns" else "I9"
    if e.resolution == "destination_owns":
        t.receipt_at = pos  # the operator-attested receipt
    if t.state.phase != "parked" or not (e.actor and e.reason and e.attestation) or \
            (inv == "I2" and not e.destination_first_run_id):
        flag(inv, mid, [pos], f"operator resolution ({e.resolution}) of a "
             f"{t.state.phase} migration, or without actor, reason and attestation")


STEP_CHECKS: dict[type, Callable[[Flag, str, MigrationTrace, int, Any], None]] = {
    M.StartClaimConsumed: _claim,
    M.DestinationStartIssued: _start,
    M.DestinationAnswered: _answer,
    M.ChainVerified: _chain,
    M.MigrationParked: _park,
    M.OwnershipAccepted: _accept,
    M.SourceClosed: _close,
    M.StartClaimRearmed: _rearm,
    M.MigrationAborted: _abort,
    M.LegacyMigrationAdopted: _adopt,
    M.MigrationResolved: _resolve,
}


def _head_created_by(chain: Any, request_id: str | None) -> bool:
    return bool(request_id) and chain.verdict == "owned" and \
        chain.head_create_request_id == request_id
