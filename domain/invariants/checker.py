"""The invariant checker: the safety properties of docs/protocol.md, 'Invariants', over a
whole event history.

It folds every aggregate with the same reducers the service uses and checks each event against
what the protocol allows at that point; every violation names the migration and the log
positions of the events involved. It reads events only, so it runs on any copy of a store.
The rules of each migration step are migration_steps.py's; the scheduler's actions, forward
migrations and the exactly-once oracle have ledgers of their own (actions.py, forward.py,
exactly_once_log.py).
"""
from __future__ import annotations

from typing import Any, Iterable

from schedfence.domain.rollback.decide import sentinel_running
from schedfence.domain.invariants.exactly_once_log import OnceLedger
from schedfence.domain.failover import StoreEpoch
from schedfence.domain.invariants.actions import ActionLedger
from schedfence.domain.invariants.forward import ForwardLedger
from schedfence.domain.invariants.migration_steps import STEP_CHECKS, MigrationTrace
from schedfence.domain.forward.aggregate import FORWARD_TOPIC_PREFIX
from schedfence.domain.rollback.aggregate import Migration, MigrationState, evolve_migration
from schedfence.domain.rollback.phases import CLOSED_PHASES, RECEIPTED_PARKS
from schedfence.domain.rollback.recover import confirmed_no_run
from schedfence.domain.source.incarnation import destination_running
from schedfence.domain.source.schedule import Schedule, evolve_schedule
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.invariants.violation import Violation as Violation  # re-exported: its home before

M, S = Migration, Schedule
# Steps that may start the destination, or restore the source, on the strength of the claim.
_CLAIM_STEPS = (M.StartClaimConsumed, M.DestinationStartIssued, M.StartClaimRearmed)


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
        self.migrations: dict[str, MigrationTrace] = {}
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
            self.migrations[mid] = MigrationTrace(new_state, pos)
            if isinstance(e, M.RequestIdAssigned) and sentinel_running(e.sentinel_check):
                self.flag("I12", mid, [pos], "rollback accepted although its sentinel check "
                          "saw a running dummy at the destination workflow id")
            return
        self._check_step(mid, trace, pos, e)
        trace.state, trace.prev, trace.prev_pos = new_state, e, pos

    def _check_step(self, mid: str, t: MigrationTrace, pos: int, e: Any) -> None:
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
        handler = STEP_CHECKS.get(type(e))
        if handler:
            handler(self.flag, mid, t, pos, e)

    def _failover_step(self, mid: str, t: MigrationTrace, pos: int, e: Any) -> None:
        """I16: a migration accepted before the latest failover acts on nothing its claim
        allowed (the lost tail may have used it) until it has reconciled."""
        attested = isinstance(e, M.StartClaimRearmed) and confirmed_no_run(e) or \
            isinstance(e, M.MigrationAborted) and isinstance(t.prev, M.MigrationResolved)
        if isinstance(e, _CLAIM_STEPS + (M.MigrationAborted,)) and not attested:
            self.flag("I16", mid, [self.failover_at, pos], f"{type(e).__name__} of a migration "
                      f"accepted before failover {self.epoch}, without reconciling first")

    def _resurrection(self, mid: str, t: MigrationTrace, pos: int, e: Any) -> None:
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


def _is_migration(e: object) -> bool:
    return getattr(type(e), "TOPIC", "").startswith("schedfence.migration.")


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
