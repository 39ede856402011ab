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
- the spec's times after the source's cursor up to ``until`` that one tick of a
  never-migrated source at ``until`` would start (``owed_spec_times``: none while paused, none
  older than the catch-up window, no more than the limit leaves) are one more backfill, under
  the schedule's overlap policy, because a Temporal backfill ignores pause, limit and window;
  the server's own processing begins after its create time with what the limit leaves
  (``PatchPlan.remaining``), and ``boundary_gap`` names the times between the two, which
  are started after the create (infra/adapters/destination/temporal_schedule.py);
- a limited handover pins its spec's start at ``pin_instant`` instead: the gap runs up to the
  pin (``pin_plan``), so the count the create sets is exact, and the settle clears the pin
  (``clear_pin``) before it sends the whole patch.

Starts are counted per origin, as both schedulers count them: a time two backfills cover is
two starts (they collide on the action workflow id while the first runs), and the handover
carries each (time, origin) once (``destination_slots``).

The destination's action workflows are named like the source's (``<prefix>-<nominal Z>``), so
a nominal time that both sides tried to start collides on its workflow id instead of running
twice. What a Temporal Schedule cannot carry is refused before the fence (``check_handover``,
``invalid_argument`` naming the field), never dropped.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from uuid import uuid5

from schedfence.domain.source.action import SchedulePolicies, StartWorkflowAction, check_action, parse_nominal
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import SCHEDFENCE_NAMESPACE
from schedfence.domain.model import Immutable
from schedfence.domain.source.program import program_of
from schedfence.domain.source.spec import (ScheduleSpec, check_same_on_temporal, check_spec, times_after,
                   times_between, times_within)

if TYPE_CHECKING:
    from schedfence.domain.source.state import ScheduleState

SECOND = timedelta(seconds=1)
# The gap backfill ends this long before the destination is created (more than the clock skew
# between us and the server), so it never overlaps the destination's own first times.
GAP_MARGIN = timedelta(seconds=2)


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
    until: datetime | None = None  # the gap backfill's end (whole seconds)
    remaining: int | None = None  # the server's own actions left after the patch (the limit)


def check_handover(h: Handover) -> None:
    """Refuse, before anything is written, what a Temporal Schedule cannot carry."""
    if h.action is None or h.spec is None:
        raise InvalidArgument("action: a Temporal Schedule runs an action on a spec; this "
                              "schedule has none (a pause-and-notes schedule)")
    # A program recorded under older rules meets today's (what the server takes) here,
    # before the fence, rather than at the create after it.
    check_spec(h.spec)
    check_action(h.action)
    triggers = [b for b in h.buffered if b["origin"] == "trigger"]
    if len(triggers) > 1:
        raise InvalidArgument(f"buffered: {len(triggers)} triggered starts wait; a handover "
                              "carries one (wait until they have started)")
    if h.cursor is None:
        raise InvalidArgument("cursor: the schedule has no last processed time")
    waiting = _waiting(h)
    if h.paused and waiting:
        raise InvalidArgument(f"buffered: {waiting} of the spec's starts wait for the unpause; "
                              "a paused Temporal Schedule cannot hold them (a backfill would "
                              "start them now): unpause, or let them start first")
    check_same_on_temporal(h.spec)


def _waiting(h: Handover) -> int:
    """The spec's starts buffered at the fence (not yet started)."""
    return sum(b["origin"] == "auto" for b in h.buffered)


def _left(h: Handover) -> int | None:
    """The limit left for the spec's times after the cursor: the buffered spec starts go
    first (the source counts them as it buffers them); None: unlimited."""
    if h.remaining_actions is None:
        return None
    return max(h.remaining_actions - _waiting(h), 0)


def _gap(h: Handover, until: datetime) -> tuple[Range | None, int | None]:
    """The gap backfill up to ``until`` and the limit it leaves the server's own processing
    (None: unlimited)."""
    assert h.cursor is not None
    left = _left(h)
    gap, used = _owed_range(h, parse_nominal(h.cursor), until.replace(microsecond=0), left)
    return gap, None if left is None else left - used


def owed_spec_times(h: Handover, after: datetime, until: datetime,
                    left: int | None) -> list[datetime]:
    """The spec's times in ``(after, until]`` that one tick of a never-migrated source at
    ``until`` starts (domain/source/generator.py): none while paused, none older than the catch-up
    window, the first ``left`` of the rest (None: no limit). Enumerates at most ``left``
    times; unlimited callers use ``_owed_range``."""
    assert h.spec is not None
    lo = _window_floor(h, after, until)
    if h.paused or until <= lo or left == 0:
        return []
    return times_between(h.spec, lo, until, limit=left)


def _window_floor(h: Handover, after: datetime, until: datetime) -> datetime:
    """The exclusive lower bound of what a tick at ``until`` may start: the cursor, or one
    second before the oldest time inside the catch-up window (times are whole seconds)."""
    window = timedelta(seconds=(h.policies or SchedulePolicies()).catchup_window)
    return max(after, until - window - SECOND)


def _owed_range(h: Handover, after: datetime, until: datetime,
                left: int | None) -> tuple[Range | None, int]:
    """``owed_spec_times`` as one backfill range (the owed times are consecutive spec times)
    and how many times it holds where a limit counts them (0 when unlimited: not counted)."""
    assert h.spec is not None
    overlap = (h.policies or SchedulePolicies()).overlap
    if left is not None:
        times = owed_spec_times(h, after, until, left)
        return (Range(times[0], times[-1], overlap) if times else None), len(times)
    lo = _window_floor(h, after, until)
    first = None if h.paused else next(times_after(h.spec, lo), None)
    if first is None or first > until:
        return None, 0
    return Range(first, until, overlap), 0


def patch_plan(h: Handover, until: datetime) -> PatchPlan:
    """How the destination continues exactly where the source stopped (see the module doc);
    ``until`` is the last time the source's side answers for (the server's own processing
    starts after it)."""
    check_handover(h)
    assert h.cursor is not None
    until = until.replace(microsecond=0)
    ranges = [Range(parse_nominal(b["cursor"]) + SECOND, parse_nominal(b["end"]), b["overlap"])
              for b in h.backfills]
    ranges += [Range(parse_nominal(b["nominal"]), parse_nominal(b["nominal"]), b["overlap"])
               for b in h.buffered if b["origin"] != "trigger"]
    gap, remaining = _gap(h, until)
    if gap is not None:
        ranges.append(gap)
    trigger = next(((parse_nominal(b["nominal"]), b["overlap"]) for b in h.buffered
                    if b["origin"] == "trigger"), None)
    return PatchPlan(tuple(ranges), trigger, until, remaining)


def boundary_gap(h: Handover, gap_end: datetime, created_at: datetime) -> list[datetime]:
    """The spec's times the handover's gap backfill did not cover and the destination's own
    processing will not either: in ``(gap_end, created_at]``, where ``created_at`` is the
    instant the server's scheduler began (its LastProcessedTime, exclusive), and after the
    source's cursor (a handover made just after a tick has no gap at all), as a tick at
    ``created_at`` owes them (pause, catch-up window, what the gap left of the limit). The
    patch's gap ends before the call on purpose, so the two ranges never overlap (an overlap
    could run a time twice: the server's scheduler starts actions with ALLOW_DUPLICATE); what
    falls between is started here, one time at a time, after the create."""
    assert h.spec is not None and h.cursor is not None
    after = max(gap_end, parse_nominal(h.cursor))  # never a time the source answered for
    if created_at <= after:
        return []
    return owed_spec_times(h, after, created_at, _gap(h, gap_end)[1])


@dataclass(frozen=True)
class LimitView:
    """What one describe shows of a limited destination's count: its remaining actions and
    whether any update has been applied since its create (its update time is set; the create
    and its patches never set it)."""

    remaining: int
    updated: bool


def limit_settle(boundary: int, view: LimitView) -> int | None:
    """The remaining actions the settle writes, under the conflict token of the describe that
    showed ``view``, once the ``boundary``'s times are backfills (which the server does not
    count); None: nothing to write.

    Until an update applies, only the server's own scheduled starts lower the count the
    create set, and each also moves the conflict token (measured on a dev server; backfills
    and triggers move neither). So the view's count less the boundary is exact for that token:
    the server applies the update only if no action of its own came between, and drops it
    otherwise (answering OK). Once an update applied, it is settled: every update the settle
    writes carries the token of a view that showed none applied, so at most one of them
    applies. A boundary larger than the count left is the one case this cannot make exact
    (the server's own starts used the limit first): it writes 0."""
    if view.updated or boundary == 0:
        return None
    return max(view.remaining - boundary, 0)


# How long after the create call the pin may stand: the create's latency, on top of the clock
# margin (the server's clock may run ahead of ours by up to GAP_MARGIN).
PIN_LEAD = timedelta(seconds=2)


def pinned(h: Handover) -> bool:
    """A limited handover pins its spec's start (``pin_instant``), so the count is exact at
    the create; an unlimited one keeps the gap, the create's patch and the boundary."""
    return h.remaining_actions is not None


def pin_instant(call: datetime) -> datetime:
    """The pin ``S`` for a create called at ``call`` (whole seconds, after the create's
    latency and the clock margin): the server's own processing begins at its create instant,
    before ``S``, and its spec starts no time before ``S`` while the pin stands, so every
    owed time before ``S`` is the settle's patch and the limit the create sets is what they
    leave (``pin_plan``)."""
    lead = call + GAP_MARGIN + PIN_LEAD
    return lead.replace(microsecond=0) + (SECOND if lead.microsecond else timedelta())


def pin_plan(h: Handover, pin: datetime) -> PatchPlan:
    """The whole patch of a pinned handover: every owed time before ``pin`` (the gap ends one
    second before it), the backfills in progress and the buffered starts; ``remaining`` is
    what the limit leaves the server's own starts, from ``pin`` on."""
    return patch_plan(h, pin - SECOND)


def pin_owed(h: Handover, pin: datetime) -> list[datetime]:
    """The spec's owed times before ``pin`` (``pin_plan``'s gap, enumerated: a limited
    handover owes no more than its limit)."""
    assert h.cursor is not None and h.remaining_actions is not None
    return owed_spec_times(h, parse_nominal(h.cursor), pin - SECOND, _left(h))


def pinned_start(h: Handover, pin: datetime) -> datetime:
    """The spec start time the create sets: the pin, or the user's own start if later (then
    nothing is pinned: no spec time falls before it)."""
    assert h.spec is not None
    return pin if h.spec.start_at is None else max(h.spec.start_at, pin)


def clear_pin(late: int, remaining: int, standing: bool) -> int | None:
    """The remaining actions the update that clears the pin writes, under the conflict token
    of the describe that showed ``remaining`` (the pin ``standing``: the spec's start time
    still the pin); None: cleared already (a settle repeated after a crash writes nothing).

    The count the create set is exact for the times from the pin on, and the server's own
    starts lower it (each moves the conflict token, so an update they overtook is dropped
    and written again from a fresh describe). ``late``: owed times from the pin up to the
    server's create instant, which its own processing (strictly after that instant) never
    starts, so the settle backfills them and takes them off here; none unless the create
    took longer than ``PIN_LEAD``, and only then can the count come out late (``max``)."""
    if not standing:
        return None
    return max(remaining - late, 0)


def limit_overrun(late: int, remaining: int) -> int:
    """How many actions beyond the limit a pinned handover's destination started, read from
    the describe under whose token the pin was cleared: the ``late`` times (owed, between the
    pin and a create slower than ``PIN_LEAD``) still to start, less what the server's own
    starts left of the count (``remaining``). Temporal cannot set a count and a boundary at
    one instant of its clock, so this cannot be prevented once the create is late; it is
    recorded (``BoundarySettled`` v4) and the checker reports it (I21)."""
    return max(late - remaining, 0)


def boundary_request_id(request_id: str) -> str:
    """The request id of the boundary's patch: one per migration, so the destination
    deduplicates a settle repeated after a crash or an unknown outcome."""
    return str(uuid5(SCHEDFENCE_NAMESPACE, json.dumps(["boundary", request_id])))


def carried_slots(h: Handover) -> list[tuple[datetime, str]]:
    """The starts the create's patch asks for whatever the create's time, each as (nominal
    time, origin): each backfill's rest under its id, each buffered start under its origin
    (a one-time backfill: its time if the spec names it), the buffered trigger. What the log
    proves a destination that took ``h`` starts (the gap's end is the server's clock)."""
    if h.spec is None:
        return []
    slots = [(t, b["backfill_id"]) for b in h.backfills
             for t in times_within(h.spec, parse_nominal(b["cursor"]) + SECOND,
                                   parse_nominal(b["end"]))]
    slots += [(t, b["origin"]) for b in h.buffered if b["origin"] != "trigger"
              for t in times_within(h.spec, parse_nominal(b["nominal"]),
                                    parse_nominal(b["nominal"]))]
    trigger = next((b for b in h.buffered if b["origin"] == "trigger"), None)
    return slots + ([(parse_nominal(trigger["nominal"]), "trigger")] if trigger else [])


def destination_slots(h: Handover, created_at: datetime, settled: list[datetime],
                      now: datetime) -> list[tuple[datetime, str]]:
    """The starts a destination that took ``h`` at ``created_at`` has made by ``now``, as
    Temporal's scheduler would, each as (nominal time, origin): the create's patch (each
    backfill's rest under its id, each buffered start under its origin, the gap as ``auto``,
    the trigger), the boundary's ``settled`` times (``auto``), and its own spec times after
    ``created_at`` (``auto``) unless paused, no more than the limit leaves (manual starts run
    while paused). The simulator's record; overlap policies are not applied (an upper bound
    of what runs, exact in the times it asks for)."""
    assert h.spec is not None
    plan = patch_plan(h, created_at - GAP_MARGIN)
    gap = _gap(h, plan.until or created_at)[0]
    slots = carried_slots(h) + [(t, "auto") for t in settled]
    if gap is not None:
        slots += [(t, "auto") for t in times_within(h.spec, gap.start, gap.end)]
    if not h.paused:
        own = times_between(h.spec, created_at, now)
        left = None if plan.remaining is None else max(plan.remaining - len(settled), 0)
        slots += [(t, "auto") for t in (own if left is None else own[:left])]
    return sorted(slots)


def destination_starts(h: Handover, created_at: datetime, settled: list[datetime],
                       now: datetime) -> list[datetime]:
    """The nominal times of ``destination_slots``, in order."""
    return [t for t, _ in destination_slots(h, created_at, settled, now)]
