"""The invariant checker: the safety properties of docs/protocol.md, 'Invariants', over a
whole event history.

It folds every aggregate with the same reducers the service uses and checks each event against
what the protocol allows at that point; every violation names the migration and the log
positions of the events involved. It reads events only, so it runs on any copy of a store.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from schedfence.domain.rollback.decide import sentinel_running
from schedfence.domain.invariants.exactly_once_log import OnceLedger
from schedfence.domain.failover import StoreEpoch
from schedfence.domain.invariants.actions import ActionLedger
from schedfence.domain.invariants.forward import ForwardLedger
from schedfence.domain.forward.aggregate import FORWARD_TOPIC_PREFIX
from schedfence.domain.rollback.aggregate import Migration, MigrationState, evolve_migration
from schedfence.domain.rollback.phases import CLOSED_PHASES, RECEIPTED_PARKS
from schedfence.domain.rollback.recover import confirmed_no_run
from schedfence.domain.rollback.evidence import ClaimRecord, rearm_refusal
from schedfence.domain.source.incarnation import destination_running
from schedfence.domain.source.schedule import Schedule, ScheduleState, evolve_schedule
from schedfence.domain.invariants.violation import Violation as Violation  # re-exported: its home before

M, S = Migration, Schedule
# Steps that may start the destination, or restore the source, on the strength of the claim.
_CLAIM_STEPS = (M.StartClaimConsumed, M.DestinationStartIssued, M.StartClaimRearmed)


@dataclass
class _Trace:
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


def _receipted_park(st: MigrationState, e: object) -> bool:
    """After the receipt, instead of a settle: a park ``deleted_unsettled`` (a settle that
    could not read the deleted schedule), and then the operator's ``destination_owns``."""
    if isinstance(e, M.MigrationParked):
        return e.reason in RECEIPTED_PARKS and st.phase == "receipted"
    return isinstance(e, M.MigrationResolved) and e.resolution == "destination_owns" and \
        st.phase == "parked" and st.park_reason in RECEIPTED_PARKS


class Checker:
    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.migrations: dict[str, _Trace] = {}
        self.schedules: dict[str, ScheduleState] = {}
        self.fenced_at: dict[str, int] = {}  # schedule id -> position of its current fence
        self.closes: dict[str, int] = {}  # migration id -> position of ClosedByMigration
        self.releases: dict[str, int] = {}  # migration id -> position of FenceReleased
        self.adoptions: dict[str, int] = {}  # migration id -> position of FenceAdopted
        self.epoch, self.failover_at = 0, 0  # the latest FailoverRecorded, and where
        self.handed_over: dict[tuple[str, str], int] = {}  # key -> its ClosedByMigration
        self.versions: dict[str, tuple[int, int]] = {}  # aggregate -> (last version, where)
        self.actions = ActionLedger(self.flag)  # the scheduler's actions (I1, I17, I18)
        self.forwards = ForwardLedger(self.flag)  # forward migrations (I19, I20)
        self.once = OnceLedger()  # the exactly-once oracle over the log (I21)

    def _continuity(self, pos: int, e: Any) -> None:
        """I0: every aggregate's versions run 1, 2, 3, ... in log order: a deleted or lost
        event shows as a gap, named with the versions that are missing."""
        aid, version = str(getattr(e, "originator_id", "")), getattr(e, "originator_version", 0)
        last, at = self.versions.get(aid, (0, 0))
        if version != last + 1:
            missing = f"versions {last + 1}..{version - 1} missing" if version > last + 1 \
                else f"version {version} after version {last}"
            self.flag("I0", aid if _is_migration(e) else "", [p for p in (at, pos) if p],
                      f"aggregate {aid} ({type(e).__name__}): {missing}")
        self.versions[aid] = (max(version, last), pos)

    def flag(self, inv: str, mid: str, positions: Iterable[int], message: str) -> None:
        self.violations.append(Violation(inv, mid, tuple(sorted(set(positions))), message))

    # -- dispatch ---------------------------------------------------------------------------
    def add(self, pos: int, event: Any) -> None:
        self._continuity(pos, event)
        topic = getattr(type(event), "TOPIC", "")
        if topic.startswith("schedfence.migration."):
            self._migration_event(pos, event)
        elif topic.startswith("schedfence.schedule."):
            self._schedule_event(pos, event)
        elif topic.startswith(FORWARD_TOPIC_PREFIX):
            self.forwards.forward_event(pos, event)
        elif isinstance(event, StoreEpoch.FailoverRecorded):
            self.epoch, self.failover_at = event.epoch, pos

    # -- migrations -------------------------------------------------------------------------
    def _migration_event(self, pos: int, e: Any) -> None:
        mid = str(e.originator_id)
        trace = self.migrations.get(mid)
        try:
            new_state = evolve_migration(trace.state if trace else None, e)
        except Exception as exc:  # the reducer must be total over stored histories
            self.flag("I0", mid, [pos], f"reducer refused {type(e).__name__}: {exc}")
            return
        self.once.migration_event(pos, mid, new_state, e)
        if trace is None:
            self.migrations[mid] = _Trace(new_state, pos)
            if isinstance(e, M.RequestIdAssigned) and sentinel_running(e.sentinel_check):
                self.flag("I12", mid, [pos], "rollback accepted although its sentinel check "
                          "saw a running dummy at the destination workflow id")
            return
        self._check_step(mid, trace, pos, e)
        trace.state, trace.prev, trace.prev_pos = new_state, e, pos

    def _check_step(self, mid: str, t: _Trace, pos: int, e: Any) -> None:
        st = t.state
        rid = getattr(e, "request_id", st.request_id)
        if rid != st.request_id and not isinstance(e, M.LegacyMigrationAdopted):
            self.flag("I3", mid, [t.created_at, pos], f"{type(e).__name__} carries request id "
                      f"{rid!r}, the migration's is {st.request_id!r}")
        if st.request_id is None and isinstance(
                e, (M.StartClaimConsumed, M.DestinationStartIssued, M.OwnershipAccepted,
                    M.SourceClosed, M.StartClaimRearmed, M.MigrationAborted,
                    M.MigrationResolved)):
            self.flag("I6", mid, [t.created_at, pos],
                      f"identity-less migration acted: {type(e).__name__}")
        if st.phase in CLOSED_PHASES:
            self.flag("I8", mid, [pos], f"{type(e).__name__} after the migration was {st.phase}")
        settle = isinstance(e, M.BoundarySettled) or _receipted_park(st, e)
        if (st.receipt is not None and not settle and not isinstance(e, M.SourceClosed)) or (
                settle and (st.receipt is None or st.boundary_settled)):
            self.flag("I8", mid, [t.receipt_at or pos, pos], f"{type(e).__name__} after the "
                      "receipt, or a second settle (only one settle, then SourceClosed; or a "
                      "park deleted_unsettled, then an operator's destination_owns)")
        if st.epoch < self.epoch and st.is_open and st.receipt is None:
            self._failover_step(mid, t, pos, e)
        self._resurrection(mid, t, pos, e)
        handler = _STEP_CHECKS.get(type(e))
        if handler:
            handler(self, mid, t, pos, e)

    def _failover_step(self, mid: str, t: _Trace, pos: int, e: Any) -> None:
        """I16: a migration accepted before the latest failover acts on nothing its claim
        allowed (the lost tail may have used it) until it has reconciled."""
        attested = isinstance(e, M.StartClaimRearmed) and confirmed_no_run(e) or \
            isinstance(e, M.MigrationAborted) and isinstance(t.prev, M.MigrationResolved)
        if isinstance(e, _CLAIM_STEPS + (M.MigrationAborted,)) and not attested:
            self.flag("I16", mid, [self.failover_at, pos], f"{type(e).__name__} of a migration "
                      f"accepted before failover {self.epoch}, without reconciling first")

    def _resurrection(self, mid: str, t: _Trace, pos: int, e: Any) -> None:
        """I5: once our own chain was observed, nothing starts it again or restores the
        source on the claim's strength (only an operator's attested resolution may)."""
        if t.chain_seen_at is None:
            return
        created = isinstance(e, M.DestinationAnswered) and e.kind == "created"
        restore = isinstance(e, M.MigrationAborted) and not isinstance(t.prev,
                                                                       M.MigrationResolved)
        if isinstance(e, _CLAIM_STEPS) or created or restore:
            self.flag("I5", mid, [t.chain_seen_at, pos], f"{type(e).__name__} after this "
                      "migration's own chain was observed")

    def _claim(self, mid: str, t: _Trace, pos: int, e: Migration.StartClaimConsumed) -> None:
        t.claim = ClaimRecord(e.timestamp)
        if not t.state.claim_armed:
            self.flag("I4", mid, [pos], "start claim consumed while not armed")

    def _start(self, mid: str, t: _Trace, pos: int, e: Migration.DestinationStartIssued) -> None:
        if not isinstance(t.prev, M.StartClaimConsumed):
            self.flag("I4", mid, [t.prev_pos, pos], "start issued without a claim consumed "
                      "directly before it")
        handover = e.input.get("handover") or {}
        if (e.input.get("paused"), e.input.get("notes")) != (t.state.pre_paused,
                                                             t.state.pre_notes) or \
                handover.get("paused", t.state.pre_paused) != t.state.pre_paused or \
                handover.get("notes", t.state.pre_notes) != t.state.pre_notes:
            self.flag("I11", mid, [t.created_at, pos],
                      "start input does not carry the pre-migration pause and notes")

    def _answer(self, mid: str, t: _Trace, pos: int, e: Migration.DestinationAnswered) -> None:
        t.answer, t.claim = (pos, e), t.claim and ClaimRecord(t.claim.at, e.kind)
        if e.kind == "created" or (e.kind == "already_started" and
                                   e.start_request_id == t.state.request_id):
            t.chain_seen_at = t.chain_seen_at or pos
        if e.kind == "created":
            t.chains.add(e.first_execution_run_id or e.run_id)
            t.created_answers.append(pos)
            if len(t.created_answers) > 1:
                self.flag("I4", mid, t.created_answers, "more than one destination chain "
                          "created by this migration")

    def _park(self, mid: str, t: _Trace, pos: int, e: Migration.MigrationParked) -> None:
        """L1 (liveness): no park on what a destination read showed while the one start
        could still land (its recorded age inside its recorded grace): a false park."""
        c = t.prev
        if isinstance(c, M.ChainVerified) and c.claim_age is not None and \
                c.claim_grace is not None and c.claim_age < c.claim_grace:
            self.flag("L1", mid, [t.prev_pos, pos], f"parked {e.reason} on a read "
                      f"{c.claim_age:.3f}s after the claim's last step, inside its "
                      f"{c.claim_grace:g}s grace: the start could still land")

    def _chain(self, mid: str, t: _Trace, pos: int, e: Migration.ChainVerified) -> None:
        t.chain = (pos, e)
        if _head_created_by(e, t.state.request_id):
            t.chain_seen_at = t.chain_seen_at or pos

    def _accept(self, mid: str, t: _Trace, pos: int, e: Migration.OwnershipAccepted) -> None:
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
            self.flag(inv, mid, [pos] + ([proof[0]] if proof else []),
                      f"ownership accepted ({e.evidence}) without matching proof")

    def _close(self, mid: str, t: _Trace, pos: int, e: Migration.SourceClosed) -> None:
        t.source_closed_at = pos
        if t.state.receipt is None or e.destination_first_run_id != t.state.receipt:
            self.flag("I2", mid, [pos], "source closed without an ownership receipt")

    def _rearm(self, mid: str, t: _Trace, pos: int, e: Migration.StartClaimRearmed) -> None:
        if e.absence is not None:  # F16: is absence inside retention the proof it claims?
            why = rearm_refusal(e.absence, t.state, t.claim, getattr(t.prev, "timestamp", None))
            if why:
                self.flag("I9", mid, [t.prev_pos, pos], f"re-armed on an absence: {why}")
        elif not t.state.no_commit_proven:
            self.flag("I9", mid, [pos], "claim re-armed while a start may have committed")
        elif t.state.unverified and not confirmed_no_run(e):  # starts outside this log may exist
            self.flag("I9", mid, [pos], "adopted legacy migration re-armed without the "
                      "operator-attested, live-checked absence of a destination run")

    def _abort(self, mid: str, t: _Trace, pos: int, e: Migration.MigrationAborted) -> None:
        t.aborted_at = pos
        # An operator's source_kept resolution directly before it attests what no answer proves.
        attested = isinstance(t.prev, M.MigrationResolved) and \
            t.prev.resolution == "source_kept"
        if t.state.receipt is not None or not (attested or (
                t.state.no_commit_proven and not t.state.unverified)):
            self.flag("I9", mid, [pos], "source restored after a start that may have committed "
                      "(no proof of no commit and no operator attestation)")
        if (e.restored_paused, e.restored_notes) != (t.state.pre_paused, t.state.pre_notes):
            self.flag("I11", mid, [t.created_at, pos], "restore does not give back the "
                      "pre-migration pause and notes")

    def _adopt(self, mid: str, t: _Trace, pos: int, e: Migration.LegacyMigrationAdopted) -> None:
        t.adopted_at = pos
        if t.state.phase != "legacy_pending" or t.state.request_id is not None:
            self.flag("I3", mid, [t.created_at, pos], "adoption of a migration that already "
                      f"has a durable id ({t.state.request_id!r}, {t.state.phase})")

    def _resolve(self, mid: str, t: _Trace, pos: int, e: Migration.MigrationResolved) -> None:
        inv = "I2" if e.resolution == "destination_owns" else "I9"
        if e.resolution == "destination_owns":
            t.receipt_at = pos  # the operator-attested receipt
        if t.state.phase != "parked" or not (e.actor and e.reason and e.attestation) or \
                (inv == "I2" and not e.destination_first_run_id):
            self.flag(inv, mid, [pos], f"operator resolution ({e.resolution}) of a "
                      f"{t.state.phase} migration, or without actor, reason and attestation")

    # -- schedules --------------------------------------------------------------------------
    def _schedule_event(self, pos: int, e: Any) -> None:
        sid = str(e.originator_id)
        before = self.schedules.get(sid)
        try:
            self.schedules[sid] = evolve_schedule(before, e)
        except Exception as exc:
            self.flag("I0", "", [pos], f"schedule reducer refused {type(e).__name__}: {exc}")
            return
        now = self.schedules[sid]
        self.once.schedule_event(pos, before, now, e)
        self.forwards.source_event(pos, (now.namespace, now.schedule_id), e)
        if before is None:
            if isinstance(e, S.Created):
                self._created(sid, pos, e)
            elif now.fence_migration_id:  # dormant, under a forward migration
                self.fenced_at[sid] = pos
            return
        fence = before.fence_migration_id
        self.actions.check(pos, before, e, self.fenced_at.get(sid))
        if isinstance(e, (S.Paused, S.NotesUpdated, S.Deleted)) and fence:
            self.flag("I1", fence, [self.fenced_at.get(sid, pos), pos],
                      f"source mutated ({type(e).__name__}) while a migration held the fence")
        if isinstance(e, S.FencedForMigration):
            if fence:
                self.flag("I7", e.migration_id, [self.fenced_at.get(sid, pos), pos],
                          f"second migration fenced the source while {fence} was open")
            self.fenced_at[sid] = pos
        if isinstance(e, S.FenceAdopted):
            if fence != e.migration_id or before.fence_request_id is not None:
                self.flag("I10", e.migration_id, [pos], "FenceAdopted by a migration that does "
                          "not hold an identity-less fence")
            self.adoptions[e.migration_id] = pos
        if isinstance(e, (S.ClosedByMigration, S.FenceReleased)):
            if fence != e.migration_id or before.fence_request_id != e.request_id:
                self.flag("I10", e.migration_id, [pos], f"{type(e).__name__} by a migration "
                          "that does not hold the fence")
            target = self.closes if isinstance(e, S.ClosedByMigration) else self.releases
            target[e.migration_id] = pos
        if isinstance(e, S.ClosedByMigration):
            self.handed_over[(before.namespace, before.schedule_id)] = pos

    def _created(self, sid: str, pos: int, e: Any) -> None:
        """I1: a source incarnation never begins while a chain runs at the destination."""
        key = (e.namespace, e.schedule_id)
        running = destination_running(e.destination_check)
        if running is not None:
            self.flag("I1", "", [pos], f"schedule {e.namespace}/{e.schedule_id} created while "
                      f"run {running.get('run_id')} was running at the destination")
        elif e.destination_check is None and key in self.handed_over:
            self.flag("I1", "", [self.handed_over[key], pos], f"schedule {e.namespace}/"
                      f"{e.schedule_id} re-created after its handover to the destination "
                      "without checking that the destination chain had ended")

    def finish(self) -> list[Violation]:
        """Cross-aggregate pairs that must land together in one append, and fences that
        point at a migration the log does not hold."""
        for sid, st in self.schedules.items():
            fence = st.fence_migration_id
            if fence and fence not in self.migrations and fence not in self.forwards.states:
                self.flag("I0", fence, [self.fenced_at.get(sid, 0)] if sid in self.fenced_at
                          else [], f"schedule {st.namespace}/{st.schedule_id} is fenced by "
                          f"migration {fence}, which the log does not hold")
        for mid, t in self.migrations.items():
            pairs = (("SourceClosed", t.source_closed_at, self.closes.get(mid)),
                     ("MigrationAborted", t.aborted_at, self.releases.get(mid)),
                     ("LegacyMigrationAdopted", t.adopted_at, self.adoptions.get(mid)))
            for name, at_migration, at_source in pairs:
                if (at_migration is None) != (at_source is None):
                    where = [p for p in (at_migration, at_source) if p is not None]
                    self.flag("I10", mid, where, f"{name} recorded on one side only "
                              "(migration and source disagree)")
        self.forwards.finish()
        self.once.finish(self.flag)
        return self.violations


_STEP_CHECKS: dict[type, Callable[[Checker, str, _Trace, int, Any], None]] = {
    M.StartClaimConsumed: Checker._claim,
    M.DestinationStartIssued: Checker._start,
    M.DestinationAnswered: Checker._answer,
    M.ChainVerified: Checker._chain,
    M.MigrationParked: Checker._park,
    M.OwnershipAccepted: Checker._accept,
    M.SourceClosed: Checker._close,
    M.StartClaimRearmed: Checker._rearm,
    M.MigrationAborted: Checker._abort,
    M.LegacyMigrationAdopted: Checker._adopt,
    M.MigrationResolved: Checker._resolve,
}


def _is_migration(e: object) -> bool:
    return getattr(type(e), "TOPIC", "").startswith("schedfence.migration.")


def _head_created_by(chain: Any, request_id: str | None) -> bool:
    return bool(request_id) and chain.verdict == "owned" and \
        chain.head_create_request_id == request_id


def check_history(events: Iterable[tuple[int, Any]]) -> list[Violation]:
    """Check a whole log given as (position, decoded event) pairs in log order."""
    return _checked(events).finish()


def _checked(events: Iterable[tuple[int, Any]]) -> Checker:
    checker = Checker()
    for pos, event in events:
        checker.add(pos, event)
    return checker


def check_histories(logs: Iterable[Iterable[tuple[int, Any]]]) -> list[list[Violation]]:
    """Check several copies of one store (an old active and the standby promoted in its
    place): each alone, and together for I4: a migration creates one chain across all of
    them. A lost tail is invisible to either log alone; the union shows a second chain."""
    checkers = [_checked(log) for log in logs]
    results = [c.finish() for c in checkers]
    chains: dict[str, set[str]] = {}
    for c in checkers:
        for mid, t in c.migrations.items():
            chains.setdefault(mid, set()).update(t.chains)
    for mid, firsts in sorted(chains.items()):
        if len(firsts) > 1:
            results[-1].append(Violation("I4", mid, (), f"{len(firsts)} destination chains "
                                         f"created across the stores: {sorted(firsts)}"))
    return results
