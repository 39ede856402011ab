"""I21: the exactly-once oracle (domain/invariants/exactly_once.py) over what the log holds.

From each source incarnation's events this derives what the oracle needs: its spec and every
program update (from the cursor at the update on, ticks follow the new spec), the paused
stretches the log proves (from the cursor at a pause, or at a create that was paused, to the
cursor an unpause recorded: a v1 unpause recorded none, and its stretch is not counted), its
triggers, its backfills (a backfill an update cut is two pieces, each under the spec it was
processed with), what a forward's handover carried in, and its starts: each
``ActionStartIssued`` the runner did not refuse for good. A rollback that took ownership by
proof (``OwnershipAccepted``) adds what the log proves it asked the destination to start: the
create's patch apart from the gap (``carried_slots``: backfills' rests, buffered starts, the
trigger) and the boundary's settled times. The gap backfill's end and the destination's own
times depend on the server's clock and are not in the log.

A settle that recorded starts beyond the limit (``BoundarySettled.over_limit``: a limited
handover whose create came after its pin) is reported as it stands. A settle that found the
schedule deleted by hand (``deleted_at``) ends what the incarnation owes at the delete, and
the starts the server made at or after it (``after_delete``, read from its listing) are the
destination's: planned, and reported as starts a schedule deleted then would not make.

``OnceLedger`` is the checker's rule: per incarnation, the source's starts and the planned
ones together must start no (time, origin) twice and none the schedule never owed. The owed
side is an upper bound (no limit, no catch-up window, only proven pauses), and nothing is
judged missing: the log does not cover the destination's side. ``check_listing`` runs the same
oracle, per schedule key, over a server's listing of ``<action workflow id>-<RFC 3339 time>``
workflow ids (all runs), where missing times are judged too, up to the instant it can judge
(``judged_until``): listed times after it are cut, not judged.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable

from schedfence.domain.source.action import parse_nominal
from schedfence.domain.invariants.exactly_once import Backfill, Owed, Slot, Verdict, check_exactly_once
from schedfence.domain.rollback.handover import Handover, carried_slots
from schedfence.domain.rollback.aggregate import Migration, MigrationState, evolve_migration
from schedfence.domain.source.runs import (ActionStartFailed, ActionStartIssued, BackfillRequested, ProgramUpdated,
                   Triggered)
from schedfence.domain.source.schedule import Schedule, evolve_schedule
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.spec import ScheduleSpec

SECOND = timedelta(seconds=1)
Flag = Callable[[str, str, Iterable[int], str], None]


def _spec(doc: dict[str, Any] | None) -> ScheduleSpec | None:
    return None if not doc else ScheduleSpec.model_validate(doc)


@dataclass
class Life:
    """One source incarnation as the log holds it (see the module doc)."""

    key: tuple[str, str]
    incarnation: int
    first: datetime | None = None
    programs: list[tuple[datetime, ScheduleSpec | None]] = field(default_factory=list)
    paused: list[list[datetime | None]] = field(default_factory=list)
    triggers: list[datetime] = field(default_factory=list)
    backfills: list[Backfill] = field(default_factory=list)
    also: list[Slot] = field(default_factory=list)
    source: dict[Slot, list[int]] = field(default_factory=dict)  # slot -> positions
    planned: dict[Slot, list[tuple[int, str]]] = field(default_factory=dict)  # (pos, mid)
    ended: datetime | None = None  # deleted: the cursor it stopped at
    prefix: str | None = None  # the action's workflow id (its starts are <prefix>-<time>)
    cursor: datetime | None = None  # the source's last processed time
    handed: bool = False  # a rollback took ownership by proof: the destination carries on
    after_delete: set[datetime] = field(default_factory=set)  # the server's, after a delete

    def begin(self, cursor: str | None, spec: ScheduleSpec | None, paused: bool) -> None:
        if cursor is not None and self.first is None:
            self.first = parse_nominal(cursor)
            self.programs.append((self.first, spec))
            if paused:
                self.paused.append([self.first, None])

    def owed(self, until: datetime) -> Owed | None:
        if self.first is None:
            return None
        far = max(until, self.first) + timedelta(days=1)
        return Owed(self.programs[0][1], self.first, until, backfills=tuple(self.backfills),
                    paused=tuple((a, b or far) for a, b in self.paused if a is not None),
                    triggers=tuple(self.triggers), updates=tuple(self.programs[1:]) +
                    (((self.ended, None),) if self.ended else ()), also=tuple(self.also))

    def slots(self) -> tuple[list[Slot], list[Slot]]:
        """The source's starts and the planned ones, each slot as often as recorded."""
        return ([s for s, at in self.source.items() for _ in at],
                [s for s, by in self.planned.items() for _ in by])


class OnceLedger:
    """What the checker remembers for I21 (see the module doc)."""

    def __init__(self) -> None:
        self.lives: dict[str, Life] = {}  # aggregate id -> its life
        self.handed: dict[str, dict[str, Any]] = {}  # migration id -> what it planned
        self.unread: set[str] = set()  # incarnations whose documents did not read: not judged
        # Which start events count (None: all); ``once_across`` counts another copy's own.
        self.fresh: Callable[[Any], bool] | None = None

    # -- the source's events ----------------------------------------------------------------
    def schedule_event(self, pos: int, before: ScheduleState | None, after: ScheduleState,
                       e: Any) -> None:
        try:
            self._schedule_event(pos, before, after, e)
        except (ValueError, KeyError, TypeError):  # the checker is total: I0 reads documents
            self.unread.add(str(e.originator_id))

    def _schedule_event(self, pos: int, before: ScheduleState | None, after: ScheduleState,
                        e: Any) -> None:
        aid = str(e.originator_id)
        life: Life | None
        if isinstance(e, (Schedule.Created, Schedule.CreatedByMigration)):
            life = self.lives[aid] = Life((after.namespace, after.schedule_id),
                                          after.incarnation)
            life.begin(after.cursor, _spec(after.spec), after.paused and
                       isinstance(e, Schedule.Created))
            if isinstance(e, Schedule.CreatedByMigration):
                life.also += _carried(e.handover)
            life.prefix = (after.action or {}).get("workflow_id")
            life.cursor = parse_nominal(after.cursor) if after.cursor else None
            return
        life = self.lives.get(aid)
        if life is None or before is None:
            return
        life.prefix = (after.action or {}).get("workflow_id") or life.prefix
        if after.cursor:
            life.cursor = parse_nominal(after.cursor)
        if isinstance(e, (ActionStartIssued, ActionStartFailed)) and self.fresh is not None \
                and not self.fresh(e):
            return
        if isinstance(e, ProgramUpdated):
            self._updated(life, before, after)
        elif isinstance(e, Schedule.Paused):
            self._paused(life, e, after)
        elif isinstance(e, BackfillRequested) and after.spec:
            life.backfills.append(Backfill(parse_nominal(e.start), parse_nominal(e.end),
                                           e.backfill_id, _spec(after.spec)))
        elif isinstance(e, Triggered):
            life.triggers.append(parse_nominal(e.nominal))
        elif isinstance(e, ActionStartIssued):
            life.source.setdefault((parse_nominal(e.nominal), e.origin), []).append(pos)
        elif isinstance(e, ActionStartFailed):  # refused for good: it never started
            at = life.source.get((parse_nominal(e.nominal), e.origin))
            if at:
                at.pop()
        elif isinstance(e, Schedule.Deleted) and after.cursor:
            life.ended = parse_nominal(after.cursor)

    @staticmethod
    def _updated(life: Life, before: ScheduleState, after: ScheduleState) -> None:
        if life.first is None:
            life.begin(after.cursor, _spec(after.spec), after.paused)
            return
        if after.cursor is None:
            return
        at, new = parse_nominal(after.cursor), _spec(after.spec)
        life.programs.append((at, new))
        for b in before.backfills:  # in progress: the rest follows the new spec
            cursor, end = parse_nominal(b["cursor"]), parse_nominal(b["end"])
            last = max((i for i, p in enumerate(life.backfills)
                        if p.origin == b["backfill_id"]), default=None)
            if last is None or cursor >= end:
                continue
            piece = life.backfills[last]
            life.backfills[last] = Backfill(piece.start, min(cursor, piece.end), piece.origin,
                                            piece.spec)
            if new is not None:
                life.backfills.append(Backfill(cursor + SECOND, end, piece.origin, new))

    @staticmethod
    def _paused(life: Life, e: Any, after: ScheduleState) -> None:
        open_ = bool(life.paused) and life.paused[-1][1] is None
        if e.paused and not open_ and after.cursor:
            life.paused.append([parse_nominal(after.cursor), None])
        elif not e.paused and open_:
            if e.cursor:
                life.paused[-1][1] = parse_nominal(e.cursor)
            else:  # a v1 unpause: where the stretch ended is not recorded
                life.paused.pop()

    # -- the migrations' events -------------------------------------------------------------
    def migration_event(self, pos: int, mid: str, state: MigrationState, e: object) -> None:
        if isinstance(e, Migration.DestinationStartIssued) and \
                isinstance(e.input.get("handover"), dict):
            self.handed.setdefault(mid, {})["handover"] = e.input["handover"]
        elif isinstance(e, Migration.OwnershipAccepted):
            h = self.handed.setdefault(mid, {})
            h.update(accepted=pos, source_id=state.source_id)
            h.setdefault("handover", state.handover)
        elif isinstance(e, Migration.BoundarySettled):
            h = self.handed.setdefault(mid, {})
            h["settled"] = (pos, list(e.started))
            if e.over_limit:
                h["over_limit"] = (pos, e.over_limit)
            if e.deleted_at:
                h["deleted_at"] = e.deleted_at
                h["after_delete"] = list(e.after_delete)

    def _plan(self) -> None:
        """Each accepted rollback's planned starts, on the incarnation it handed over."""
        for mid, h in self.handed.items():
            life = self.lives.get(h.get("source_id", ""))
            if life is None or "accepted" not in h:
                continue
            life.handed = True
            for slot in _carried(h.get("handover")):
                life.planned.setdefault(slot, []).append((h["accepted"], mid))
            at, times = h.get("settled", (0, []))
            try:
                for t in [*times, *h.get("after_delete", ())]:
                    life.planned.setdefault((parse_nominal(t), "auto"), []).append((at, mid))
                if h.get("deleted_at"):
                    gone = parse_nominal(h["deleted_at"])
                    life.ended = min(life.ended or gone, gone)
                    life.after_delete = {parse_nominal(t) for t in h.get("after_delete", ())}
            except ValueError:
                self.unread.add(h["source_id"])

    def finish(self, flag: Flag) -> None:
        self._plan()
        for mid, h in self.handed.items():
            if "over_limit" in h:  # the settle saw it (domain.handover.limit_overrun)
                pos, n = h["over_limit"]
                flag("I21", mid, [pos], f"the destination started {n} action(s) beyond the "
                     "schedule's limit: its create came after the pin, and its own starts "
                     "used the count the late times needed")
            if h.get("after_delete") and h.get("settled"):
                times = sorted(h["after_delete"])
                flag("I21", mid, [h["settled"][0]], f"the destination started {len(times)} "
                     f"action(s) at or after its schedule was deleted at {h['deleted_at']} "
                     f"(first {times[0]}): a schedule deleted then starts nothing more")
        for aid, life in self.lives.items():
            if aid in self.unread:
                continue
            source, planned = life.slots()
            if not planned and not source:
                continue
            until = max(t for t, _ in source + planned)
            owed = life.owed(until)
            if owed is None:
                continue
            verdict = check_exactly_once(owed, source, planned)
            # A time the source alone started twice is I17's (per key, across incarnations).
            twice = tuple(t for t in verdict.twice if any(
                s[0] == t for s in life.planned))
            unexpected = tuple(t for t in verdict.unexpected if t not in life.after_delete)
            if twice or unexpected:  # (the starts after a delete are flagged above)
                _flag(flag, life, Verdict(twice=twice, unexpected=unexpected))


def _carried(doc: object) -> list[Slot]:
    """``carried_slots`` of a stored handover document (none if it does not read)."""
    if not isinstance(doc, dict):
        return []
    try:
        return carried_slots(Handover.model_validate(doc))
    except ValueError:
        return []


def _flag(flag: Flag, life: Life, verdict: Verdict) -> None:
    first = min([(t, "twice") for t in verdict.twice] +
                [(t, "unexpected") for t in verdict.unexpected])
    t, how = first
    slots = [s for s in {*life.source, *life.planned} if s[0] == t]
    where = [p for s in slots for p in life.source.get(s, [])] + \
        [p for s in slots for p, _ in life.planned.get(s, [])]
    mid = next((m for s in slots for _, m in life.planned.get(s, [])), "")
    origins = ", ".join(sorted(o for _, o in slots))
    what = "started twice (the source's starts and the handover's planned ones)" \
        if how == "twice" else "started or planned but never owed by the schedule"
    flag("I21", mid, where, f"{life.key[0]}/{life.key[1]} incarnation {life.incarnation}: "
         f"nominal time {t.isoformat()} ({origins}) {what}")


def check_listing(events: Iterable[tuple[int, Any]], listing: Iterable[str],
                  until: datetime, log_starts: bool = False,
                  keys: Callable[[tuple[str, str]], bool] | None = None
                  ) -> dict[tuple[str, str], Verdict]:
    """The oracle per schedule key over a server's listing of ``<action workflow id>-<RFC
    3339 time>`` workflow ids (every run; each id's time counts once per listed run), against
    what the log says the key owed up to ``judged_until`` (its incarnations in turn; the last
    one's spec carried on by the destination); a listed time after it is cut, not judged.
    ``log_starts``: add the source's starts from the log (when the listing holds the
    destination's runs alone; on one server it holds both). ``keys``: only the keys it
    accepts."""
    return {key: v for key, (v, _) in listing_verdicts(
        fold_ledger(events), listing, until, log_starts, keys).items()}


def listing_verdicts(ledger: OnceLedger, listing: Iterable[str], until: datetime,
                     log_starts: bool = False,
                     keys: Callable[[tuple[str, str]], bool] | None = None
                     ) -> dict[tuple[str, str], tuple[Verdict, datetime]]:
    """``check_listing`` over a folded ledger: each key's verdict and the instant it was
    judged up to."""
    by_key: dict[tuple[str, str], list[Life]] = {}
    for aid, life in ledger.lives.items():
        if aid not in ledger.unread and (keys is None or keys(life.key)):
            by_key.setdefault(life.key, []).append(life)
    times = _listed_times({lf.prefix for lfs in by_key.values() for lf in lfs if lf.prefix},
                          listing)
    verdicts: dict[tuple[str, str], tuple[Verdict, datetime]] = {}
    for key in sorted(by_key):
        lives = sorted(by_key[key], key=lambda lf: lf.incarnation)
        cut = judged_until(lives, until)
        owed = _key_owed(lives, cut)
        if owed is None:
            continue
        prefixes = {lf.prefix for lf in lives if lf.prefix}
        listed = [t for p in prefixes for t in times.get(p, ()) if t <= cut]
        source = [s for lf in lives for s in lf.slots()[0]] if log_starts else []
        verdicts[key] = (check_exactly_once(owed, [t for t, _ in source if t <= cut], listed),
                         cut)
    return verdicts


def judged_until(lives: list[Life], until: datetime) -> datetime:
    """How far a key's starts can be judged: ``until``, but a live incarnation the source
    still runs only up to its cursor (the times after it are not processed yet)."""
    last = lives[-1]
    if last.ended is not None or last.handed or last.cursor is None:
        return until
    return min(until, last.cursor)


def _key_owed(lives: list[Life], until: datetime) -> Owed | None:
    """One owed for a key: each incarnation's program from its first cursor on, nothing
    between a delete and the next create."""
    parts = [(lf, o) for lf in lives if (o := lf.owed(until)) is not None]
    if not parts:
        return None
    first = parts[0][1]
    updates = [u for i, (lf, o) in enumerate(parts)
               for u in ([] if i == 0 else [(o.first, o.spec)]) + list(o.updates)]
    return Owed(first.spec, first.first, until, updates=tuple(updates),
                backfills=tuple(b for _, o in parts for b in o.backfills),
                paused=tuple(p for _, o in parts for p in o.paused),
                triggers=tuple(t for _, o in parts for t in o.triggers),
                also=tuple(s for _, o in parts for s in o.also))


def _listed_times(prefixes: set[str], ids: Iterable[str]) -> dict[str, list[datetime]]:
    """Per prefix, the times of the ids ``<prefix>-<time>`` (an id counts under every prefix
    it reads as: the text after a ``-`` that is a time); in one pass over the listing."""
    out: dict[str, list[datetime]] = {}
    for wid in ids:
        dash = wid.find("-")
        while dash != -1:
            if wid[:dash] in prefixes:
                try:
                    out.setdefault(wid[:dash], []).append(parse_nominal(wid[dash + 1:]))
                except ValueError:
                    pass  # another schedule's id that shares the prefix
            dash = wid.find("-", dash + 1)
    return out


def fold_ledger(events: Iterable[tuple[int, Any]],
                fresh: Callable[[Any], bool] | None = None) -> OnceLedger:
    """The ledger folded over a log, with the same reducers the checker uses (``fresh``:
    which start events count; None: all)."""
    ledger = OnceLedger()
    ledger.fresh = fresh
    schedules: dict[str, ScheduleState] = {}
    migrations: dict[str, MigrationState] = {}
    for pos, e in events:
        topic = getattr(type(e), "TOPIC", "")
        aid = str(getattr(e, "originator_id", ""))
        if topic.startswith("schedfence.schedule."):
            before = schedules.get(aid)
            schedules[aid] = evolve_schedule(before, e)
            ledger.schedule_event(pos, before, schedules[aid], e)
        elif topic.startswith("schedfence.migration."):
            migrations[aid] = evolve_migration(migrations.get(aid), e)
            ledger.migration_event(pos, aid, migrations[aid], e)
    ledger._plan()
    return ledger
