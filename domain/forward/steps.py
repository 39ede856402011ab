"""The forward migration's decisions (domain/forward/aggregate.py): pure functions of the migration's
state and what the Temporal side showed, returning facts or the one call to make next.

The worker (infra/engines/forward.py) reads the Temporal schedule, asks ``next_step`` what to
do, records the facts *before* making the call the step names, and makes it. So every call to
the Temporal side is preceded by its durable record, as the rollback's start is.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from schedfence.domain.errors import AlreadyExists, MigrationPending, RecoveryRefused
from schedfence.domain.forward.aggregate import ForwardMigration as F
from schedfence.domain.forward.aggregate import ForwardState, forward_marker
from schedfence.domain.forward.boundary import boundary_cursor
from schedfence.domain.rollback.handover import Handover
from schedfence.domain.model import Fact, Facts
from schedfence.domain.ports import ScheduleSnapshot
from schedfence.domain.process import FORWARD_CALLS, Step
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.key import KeyState, check_not_forwarding

MAX_FENCE_ISSUES = 5  # re-readings after the token moved before the migration parks


@dataclass(frozen=True)
class Decision:
    """What to record, then which step of the shared vocabulary (domain/process.py) to take:
    ``fence``, ``create_source``, ``delete``, or None (no call: look again after a record,
    else nothing now); and whether to back off before looking again."""

    facts: Facts = field(default_factory=list)
    call: Step | None = None
    wait: bool = False

    def __post_init__(self) -> None:
        if self.call is not None and self.call not in FORWARD_CALLS:
            raise ValueError(f"{self.call} is not a forward migration's step")


def request_check(key: KeyState | None, current: ScheduleState | None) -> None:
    """A forward migration may begin only on a key no migration holds (no ping-pong, I19)
    and that no live source runs."""
    check_not_forwarding(key)
    if current is not None and not current.closed:
        name = f"{current.namespace}/{current.schedule_id}"
        if current.migration_pending:
            raise MigrationPending(f"schedule {name} has an open rollback; it must close its "
                                   "source before a migration the other way may begin")
        raise AlreadyExists(f"schedule {name} runs on the source already (incarnation "
                            f"{current.incarnation})")


def fenced_by_us(st: ForwardState, snap: ScheduleSnapshot) -> bool:
    return snap.paused and snap.notes == forward_marker(st.request_id)


def park(st: ForwardState, reason: str, detail: str = "") -> Decision:
    return Decision([Fact(F.ForwardParked, {"request_id": st.request_id, "reason": reason,
                                        "detail": detail[:1000]})])


SNAPSHOT_PHASES = ("requested", "fence_issued", "source_created")


def needs_snapshot(st: ForwardState) -> bool:
    """Whether ``next_step`` decides on a fresh reading of the Temporal schedule: while it
    fences (is the fence ours, applied, the token still the one read?) and before the delete
    (still fenced by us, untouched since?). The other phases decide on the log alone."""
    return st.phase in SNAPSHOT_PHASES


def next_step(st: ForwardState, snap: ScheduleSnapshot | None) -> Decision:
    """The step of an open migration, given the Temporal schedule (None: not found)."""
    if st.phase in ("requested", "fence_issued"):
        return _fence_step(st, snap)
    if st.phase == "fenced":
        return Decision(call=Step.CREATE_SOURCE)
    if st.phase == "source_created":
        if snap is None:
            return park(st, "deleted_elsewhere", "the Temporal schedule was deleted by someone "
                        "else during the handoff; the source stays dormant")
        if not fenced_by_us(st, snap) or snap.conflict_token != st.conflict_token:
            return park(st, "fence_broken", "the Temporal schedule changed after the fence "
                        f"(paused={snap.paused}, notes={snap.notes[:200]!r})")
        return Decision([Fact(F.TemporalDeleteIssued, {"request_id": st.request_id,
                                                   "worker": ""})], call=Step.DELETE)
    if st.phase == "delete_issued":
        return Decision(call=Step.DELETE)
    return Decision()


def _fence_step(st: ForwardState, snap: ScheduleSnapshot | None) -> Decision:
    if snap is None:
        return park(st, "schedule_not_found", "no Temporal schedule at the key")
    if snap.program.get("unsupported") and st.phase == "requested":
        return park(st, *_unsupported(snap))
    if fenced_by_us(st, snap):
        if st.phase == "requested":  # our marker, but no record of the reading before it
            return park(st, "marker_without_issue", "the schedule carries this request's "
                        "marker, but its pre-fence pause and notes were never recorded")
        if snap.buffered:
            return park(st, *_buffered(snap))
        return Decision([Fact(F.TemporalFenced, {"request_id": st.request_id,
                                             "conflict_token": snap.conflict_token,
                                             "handover": handover_doc(st, snap),
                                             "boundary": snap.boundary})])
    if st.phase == "fence_issued" and snap.conflict_token == st.conflict_token:
        return Decision(call=Step.FENCE, wait=True)  # not applied yet: ask again (same token)
    if st.fence_issues >= MAX_FENCE_ISSUES:
        return park(st, "fence_contended", f"the schedule changed under {st.fence_issues} "
                    "fences in a row")
    return Decision([Fact(F.TemporalFenceIssued, {
        "request_id": st.request_id, "conflict_token": snap.conflict_token,
        "pre_paused": snap.paused, "pre_notes": snap.notes, "worker": ""})], call=Step.FENCE)


def _unsupported(snap: ScheduleSnapshot) -> tuple[str, str]:
    return "unsupported_schedule", str(snap.program["unsupported"])


def _buffered(snap: ScheduleSnapshot) -> tuple[str, str]:
    return "buffered_starts", (f"{snap.buffered} buffered start(s) on the Temporal side "
                               "cannot be read back; abort, let them run, retry")


def predicted_park(snap: ScheduleSnapshot) -> tuple[str, str] | None:
    """(reason, detail) a forward migration asked now would park on, as far as the schedule
    shows now (a dry run's prediction: the worker decides again on what it reads then)."""
    if snap.program.get("unsupported"):
        return _unsupported(snap)
    if snap.buffered:
        return _buffered(snap)
    return None


def handover_doc(st: ForwardState, snap: ScheduleSnapshot) -> dict[str, Any]:
    """The schedule as the source continues it, read after the fence applied: the pause and
    notes from before the fence (I11), and the cursor it resumes strictly after: the last
    time the server was seen to have started (``boundary_cursor``), never the pause's time."""
    program = snap.program
    cursor = None
    if program.get("spec"):
        cursor = boundary_cursor(snap.boundary, bool(st.pre_paused)) if snap.boundary \
            else snap.responsible_until
    h = Handover(namespace=st.namespace, schedule_id=st.schedule_id, incarnation=0,
                 paused=bool(st.pre_paused), notes=st.pre_notes or "", spec=program.get("spec"),
                 action=program.get("action"), policies=program.get("policies"),
                 remaining_actions=program.get("remaining_actions"),
                 action_count=snap.action_count,
                 cursor=cursor,
                 recent_actions=snap.recent_actions, running=snap.running)
    return h.model_dump(mode="json")


def create_source_facts(st: ForwardState, key: KeyState, current: ScheduleState | None,
                        source_id: str, incarnation: int, epoch: int) -> tuple[Facts, Facts]:
    """The source incarnation, dormant under this migration: (migration facts, source
    facts), saved in one append with the key's new incarnation. Anything else live at the
    key parks it; never success."""
    if key.forward_migration_id != st.migration_id:
        return park(st, "key_not_held", f"the key is held by {key.forward_migration_id}").facts, []
    if current is not None and not current.closed:
        return park(st, "source_exists", f"incarnation {current.incarnation} of the source "
                    "appeared at the key during the handoff").facts, []
    return ([Fact(F.SourceCreated, {"request_id": st.request_id, "source_id": source_id,
                                    "incarnation": incarnation})],
            [Fact(Schedule.CreatedByMigration, {
                "namespace": st.namespace, "schedule_id": st.schedule_id,
                "incarnation": incarnation, "request_id": st.request_id,
                "migration_id": st.migration_id, "epoch": epoch,
                "handover": dict(st.handover or {}, incarnation=incarnation),
                "backfill_count": current.backfill_count if current else 0,
                "last_trigger": current.last_trigger if current else None})])


def complete_facts(st: ForwardState, detail: str = "") -> tuple[Facts, Facts]:
    """The Temporal schedule is gone: the migration completes and the source is released
    with the pre-fence pause and notes, in one append."""
    return ([Fact(F.ForwardCompleted, {"request_id": st.request_id, "detail": detail})],
            [Fact(Schedule.OwnershipTaken, {
                "request_id": st.request_id, "migration_id": st.migration_id,
                "restored_paused": bool(st.pre_paused), "restored_notes": st.pre_notes or ""})])


def check_abortable(st: ForwardState) -> None:
    if not (st.is_open or st.phase == "parked"):
        raise RecoveryRefused(f"forward migration {st.migration_id} is {st.phase}")
    if st.source_id is not None and st.phase != "parked":
        raise RecoveryRefused("the source was created; the migration finishes by deleting the "
                              "Temporal schedule (abort only once it parks)")


def check_takeover(st: ForwardState, snap: ScheduleSnapshot | None) -> None:
    """An operator confirms a delete that raced the handoff: the source may run it."""
    if st.phase != "parked" or st.park_reason != "deleted_elsewhere":
        raise RecoveryRefused("take over only a migration parked deleted_elsewhere")
    if snap is not None:
        raise RecoveryRefused("the Temporal schedule exists again; abort instead")


def abort_facts(st: ForwardState, reason: str, actor: str,
                restored: bool) -> tuple[Facts, Facts]:
    """(migration facts, source facts): a dormant source closes without ever acting."""
    source = [Fact(Schedule.TakeoverAbandoned, {"request_id": st.request_id,
                                                "migration_id": st.migration_id})] \
        if st.source_id is not None else []
    return ([Fact(F.ForwardAborted, {"request_id": st.request_id, "reason": reason[:1000],
                                     "actor": actor, "temporal_restored": restored})], source)
