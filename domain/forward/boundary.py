"""The forward migration's boundary (docs/protocol.md, "Forward migration", step 3): the last
nominal time the Temporal side answers for, proven from what its server *started*, never from
when it applied our pause.

Temporal's scheduler workflow, on each wake-up, first buffers every spec time that came due
(not paused yet), then applies the signals it received (our fence's update: paused), then
starts its buffer, and a paused schedule drops what it buffered. So a fence that lands after
a nominal time T but in the same workflow task that would have started T means nobody starts
T, although T is before the update's time. Once a describe shows the fence applied, that task
is over: every time the server will ever start has started, and none after the pause will.

So the boundary is read then, as an observation recorded on ``TemporalFenced``:

- ``created``: when the server's scheduler began (times up to it are the rollback's gap,
  settled before it closed); ``applied``: when the server applied the fence;
- the floor: the latest of ``created`` and every spec time the describe lists as started
  (recent actions, running workflows ``<prefix>-<time>``);
- ``probed``: the spec times after the floor up to ``applied`` (and a second's slack), newest
  first, each checked by its action workflow's deterministic id until one exists.

The cursor is the last time proven started (the floor when none was). The times after it were
dropped or never reached: the source's. A schedule paused before our fence started nothing
while paused; its cursor is at least when the fence applied (the source inherits the pause).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from schedfence.domain.source.action import nominal_text, parse_nominal
from schedfence.domain.source.spec import ScheduleSpec, times_between

SLACK = timedelta(seconds=1)  # the workflow task's time and the update's may differ by this
PROBE_LIMIT = 30  # spec times checked by workflow id, newest first; older ones: the server's


def instant_text(t: datetime) -> str:
    """RFC 3339 UTC with microseconds (an observation, not a nominal time)."""
    return t.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def is_spec_time(spec: ScheduleSpec, t: datetime) -> bool:
    return t in times_between(spec, t - timedelta(seconds=1), t)


def started_times(spec: ScheduleSpec, prefix: str, recent: list[str],
                  running: list[str]) -> list[datetime]:
    """Spec times a describe shows started: recent actions (a manual start at another time is
    not a spec time) and running workflows named ``<prefix>-<nominal>``."""
    out = [parse_nominal(n) for n in recent]
    for wid in running:
        suffix = wid.removeprefix(f"{prefix}-")
        if suffix != wid:
            try:
                out.append(parse_nominal(suffix))
            except ValueError:
                continue
    return [t for t in out if is_spec_time(spec, t)]


def probe_plan(spec: ScheduleSpec, prefix: str, created: datetime, applied: datetime,
               recent: list[str], running: list[str]) -> tuple[datetime, list[datetime]]:
    """(floor, the spec times to check by workflow id, newest first). More than
    ``PROBE_LIMIT`` candidates: the newest are checked and the floor rises to the newest
    left unchecked (older times are the server's, as they were before the fence)."""
    floor = max([created, *started_times(spec, prefix, recent, running)])
    candidates = _newest(spec, floor, applied + SLACK)[::-1]
    if len(candidates) > PROBE_LIMIT:
        floor = candidates[PROBE_LIMIT]
        candidates = candidates[:PROBE_LIMIT]
    return floor, candidates


def _newest(spec: ScheduleSpec, floor: datetime, until: datetime) -> list[datetime]:
    """The newest ``PROBE_LIMIT`` + 1 spec times in ``(floor, until]``, oldest first, from a
    window widening back from ``until``: a floor long ago never walks every time since."""
    span = timedelta(minutes=1)
    while True:
        after = floor if span >= until - floor else until - span
        times = times_between(spec, after, until)
        if len(times) > PROBE_LIMIT or after == floor:
            return times[-(PROBE_LIMIT + 1):]
        span *= 2


def observation(created: datetime, applied: datetime, floor: datetime,
                probed: list[tuple[datetime, bool]]) -> dict[str, Any]:
    """The boundary as read, recorded on ``TemporalFenced`` (v2) with the handover."""
    return {"created": instant_text(created), "applied": instant_text(applied),
            "floor": nominal_text(floor) if floor.microsecond == 0 else instant_text(floor),
            "probed": [[nominal_text(t), found] for t, found in probed]}


def boundary_cursor(boundary: dict[str, Any], pre_paused: bool) -> str:
    """The last nominal time the Temporal side answers for (the source resumes strictly after
    it): the newest probed time that was started, else the floor; never before the fence
    applied if the schedule was paused already (it skipped those times while paused)."""
    found = [parse_nominal(t) for t, ok in boundary["probed"] if ok]
    cursor = max([parse_nominal(boundary["floor"]), *found])
    if pre_paused:
        cursor = max(cursor, parse_nominal(boundary["applied"]).replace(microsecond=0))
    return nominal_text(cursor)
