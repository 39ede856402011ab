"""What a rollback hands to the destination: the whole schedule as the fence froze it.

``handover_of`` takes the source's state at the fence (the phase gate guarantees no start in
flight and no stop pending, so nothing moves while fenced) with the pause and notes from
*before* the fence (I11), and returns a ``Handover``: spec, action, policies, limit, counts,
the exclusive cursor, buffered starts not yet started, backfills with their cursors, recent and
running actions. ``patch_plan`` says how a Temporal Schedule is told to carry on exactly there:

- each backfill in progress continues as a backfill ``[cursor + 1 s, end]`` (Temporal's
  backfill ranges are inclusive at both ends, as ours);
- each buffered start of the spec or of a backfill is a one-time backfill ``[t, t]`` under its
  overlap policy (its nominal time is a spec time, so the server names it the same);
- a buffered trigger is the patch's trigger, at its nominal time (at most one: a patch has
  one trigger);
- the times after the source's cursor up to ``until`` (where the server's own processing
  begins) are one more backfill ``[cursor + 1 s, until]``, under the schedule's overlap policy.

The destination's action workflows are named like the source's (``<prefix>-<nominal Z>``), so
a nominal time that both sides tried to start collides on its workflow id instead of running
twice. What a Temporal Schedule cannot carry is refused before the fence (``check_handover``,
``invalid_argument`` naming the field), never dropped.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from .action import SchedulePolicies, StartWorkflowAction, parse_nominal
from .errors import InvalidArgument
from .model import Immutable
from .program import program_of
from .spec import ScheduleSpec

if TYPE_CHECKING:
    from .schedule import ScheduleState

SECOND = timedelta(seconds=1)


class Handover(Immutable):
    """The schedule as the destination must continue it (JSON documents as in the state)."""

    namespace: str
    schedule_id: str
    incarnation: int
    paused: bool  # before the fence (I11)
    notes: str  # before the fence (I11)
    spec: ScheduleSpec | None = None
    action: StartWorkflowAction | None = None
    policies: SchedulePolicies | None = None
    remaining_actions: int | None = None
    action_count: int = 0
    cursor: str | None = None  # the last processed time, exclusive
    buffered: tuple[dict[str, Any], ...] = ()  # {nominal, origin, overlap}, in order
    backfills: tuple[dict[str, Any], ...] = ()  # {backfill_id, start, end, overlap, cursor}
    recent_actions: tuple[dict[str, Any], ...] = ()
    running: tuple[str, ...] = ()


def handover_of(state: ScheduleState, paused: bool, notes: str) -> Handover:
    """The handover of ``state`` (the source at its fence), with the pre-fence pause and
    notes."""
    program = program_of(state)
    return Handover(
        namespace=state.namespace, schedule_id=state.schedule_id,
        incarnation=state.incarnation, paused=paused, notes=notes, spec=program.spec,
        action=program.action, policies=program.policies,
        remaining_actions=state.remaining_actions, action_count=state.action_count,
        cursor=state.cursor, buffered=tuple(state.buffered), backfills=tuple(state.backfills),
        recent_actions=tuple(state.recent_actions), running=tuple(state.running))


@dataclass(frozen=True)
class Range:
    """One backfill request: every spec time in ``[start, end]``, under ``overlap``."""

    start: datetime
    end: datetime
    overlap: str


@dataclass(frozen=True)
class PatchPlan:
    backfills: tuple[Range, ...] = ()
    trigger: tuple[datetime, str] | None = None  # (nominal time, overlap)


def check_handover(h: Handover) -> None:
    """Refuse, before anything is written, what a Temporal Schedule cannot carry."""
    if h.action is None or h.spec is None:
        raise InvalidArgument("action: a Temporal Schedule runs an action on a spec; this "
                              "schedule has none (a pause-and-notes schedule)")
    triggers = [b for b in h.buffered if b["origin"] == "trigger"]
    if len(triggers) > 1:
        raise InvalidArgument(f"buffered: {len(triggers)} triggered starts wait; a handover "
                              "carries one (wait until they have started)")
    if h.cursor is None:
        raise InvalidArgument("cursor: the schedule has no last processed time")


def patch_plan(h: Handover, until: datetime) -> PatchPlan:
    """How the destination continues exactly where the source stopped (see the module doc);
    ``until`` is the last time the source's side answers for (the server's own processing
    starts after it)."""
    check_handover(h)
    assert h.cursor is not None
    overlap = (h.policies or SchedulePolicies()).overlap
    ranges = [Range(parse_nominal(b["cursor"]) + SECOND, parse_nominal(b["end"]), b["overlap"])
              for b in h.backfills]
    ranges += [Range(parse_nominal(b["nominal"]), parse_nominal(b["nominal"]), b["overlap"])
               for b in h.buffered if b["origin"] != "trigger"]
    gap = Range(parse_nominal(h.cursor) + SECOND, until, overlap)
    if gap.start <= gap.end:
        ranges.append(gap)
    trigger = next(((parse_nominal(b["nominal"]), b["overlap"]) for b in h.buffered
                    if b["origin"] == "trigger"), None)
    return PatchPlan(tuple(ranges), trigger)


def boundary(h: Handover) -> datetime:
    """The first instant the destination answers for: just after the source's cursor."""
    assert h.cursor is not None
    return parse_nominal(h.cursor) + SECOND
