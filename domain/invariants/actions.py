"""The checker's rules over the source scheduler's actions (domain/source/runs.py), per schedule:

- I1 (actions): no action event while a migration holds the fence or after the source closed
  (seeing a running action close is an observation, not an action, and is allowed);
- I17: each nominal time, per origin ("auto", a trigger, a backfill), is started at most once
  on a schedule key, across its incarnations;
- I18: every time a tick passed over while the source was unpaused is accounted for: it
  became due (went to the overlap policy) or was skipped with a reason, and nothing else;
  and every time a backfill's cursor passed over is due, in the backfill's range.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from schedfence.domain.source.action import parse_nominal
from schedfence.domain.source.program import program_of
from schedfence.domain.source.runs import (OBSERVATIONS, RUN_EVENTS, ActionStartIssued, BackfillProcessed,
                   TimesProcessed)
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.spec import times_between

Flag = Callable[[str, str, Iterable[int], str], None]


class ActionLedger:
    """What the checker remembers of every key's actions."""

    def __init__(self, flag: Flag) -> None:
        self.flag = flag
        self.started: dict[tuple[str, str, str, str], int] = {}  # (ns, id, time, origin) -> pos

    def check(self, pos: int, before: ScheduleState, e: Any, fenced_at: int | None) -> None:
        if not isinstance(e, RUN_EVENTS):
            return
        key = f"{before.namespace}/{before.schedule_id}"
        if isinstance(e, OBSERVATIONS):
            pass
        elif before.fence_migration_id:
            self.flag("I1", before.fence_migration_id, [fenced_at or pos, pos],
                      f"source action ({type(e).__name__}) on {key} while a migration held "
                      "the fence")
        elif before.closed:
            self.flag("I1", before.completed_migration_id or "", [pos],
                      f"source action ({type(e).__name__}) on {key} after it closed "
                      f"({before.close_reason})")
        if isinstance(e, ActionStartIssued):
            self._once(pos, before, e)
        if isinstance(e, TimesProcessed):
            self._accounted(pos, before, e)
        if isinstance(e, BackfillProcessed):
            self._backfilled(pos, before, e)

    def _once(self, pos: int, before: ScheduleState, e: ActionStartIssued) -> None:
        slot = (before.namespace, before.schedule_id, e.nominal, e.origin)
        if slot in self.started:
            self.flag("I17", "", [self.started[slot], pos],
                      f"{before.namespace}/{before.schedule_id}: nominal time {e.nominal} "
                      f"({e.origin}) started twice")
        else:
            self.started[slot] = pos

    def _accounted(self, pos: int, before: ScheduleState, e: TimesProcessed) -> None:
        spec = program_of(before).spec
        if spec is None or before.cursor is None or before.paused:
            return
        expected = {t for t in times_between(spec, parse_nominal(before.cursor), parse_nominal(e.cursor))}
        seen = [parse_nominal(t) for t in e.due] + [parse_nominal(s["nominal"]) for s in e.skipped
                                          if s.get("reason") != "overlap"]
        if sorted(seen) != sorted(expected):
            missing = sorted(expected - set(seen))
            extra = sorted(set(seen) - expected)
            self.flag("I18", "", [pos], f"{before.namespace}/{before.schedule_id}: the tick to "
                      f"{e.cursor} did not account for its due times (missing "
                      f"{[t.isoformat() for t in missing[:3]]}, unexpected "
                      f"{[t.isoformat() for t in extra[:3]]})")

    def _backfilled(self, pos: int, before: ScheduleState, e: BackfillProcessed) -> None:
        spec = program_of(before).spec
        found = [b for b in before.backfills if b["backfill_id"] == e.backfill_id]
        if spec is None or not found:
            self.flag("I18", "", [pos], f"{before.namespace}/{before.schedule_id}: "
                      f"{e.backfill_id} processed without a backfill in progress")
            return
        bf = found[0]
        end = min(parse_nominal(e.cursor), parse_nominal(bf["end"]))
        expected = times_between(spec, parse_nominal(bf["cursor"]), end)
        if [parse_nominal(t) for t in e.due] != expected:
            self.flag("I18", "", [pos], f"{before.namespace}/{before.schedule_id}: "
                      f"{e.backfill_id} to {e.cursor} did not start exactly its times")
