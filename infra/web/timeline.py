"""A schedule's timeline as the operator page shows it, built from the application service's
reads alone: the key's history (``service.history``) and each migration's forensic replay
(``service.replay``: the decision, inputs, comparisons and checks of every step).

Every line is the project's one narration (projections/narration.py), asked for whole ids: a
run id is never cut to its first 8 digits (Temporal's UUIDv7 run ids share prefixes). Ids are
found by their field names (``*run_id``, ``workflow_id(s)``, ``migration_id``), so an event
type added later is linked without a line here. Nothing is written.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator
from uuid import UUID

from schedfence.domain.errors import InvalidArgument, NotFound
from schedfence.projections.narration import actor_name, narrate, short_type
from schedfence.projections.queries import parse_time
from schedfence.projections.records import to_us

from schedfence.infra.application.service import MigrationService
from schedfence.infra.application.views import HistoryEntry

MAX_ROWS = 500  # rows on one page; narrow by migration or time for more
RUN, WORKFLOW, MIGRATION = "run", "workflow", "migration"
# An id found inside text stands whole: no id character touches it, nor a ``:``, ``.`` or ``/``
# that joins it to one (``run X: accept`` links X; ``X:1`` is another id).
_BEFORE = r"(?<![\w\-])(?<![\w\-][:./])"
_AFTER = r"(?![\w\-]|[:./][\w\-])"


def id_kind(key: str) -> str | None:
    """What an event field holds, by its name: a run, workflow or migration id, else None."""
    if key.endswith("run_id"):
        return RUN
    if key in ("workflow_id", "workflow_ids"):
        return WORKFLOW
    if key == "migration_id":
        return MIGRATION
    return None


def ids_in(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """(kind, id) for every run, workflow and migration id in an event's fields."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from ids_in(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from ids_in(v, key)
    elif isinstance(value, str) and value:
        kind = id_kind(key)
        if kind is not None:
            yield kind, value


@dataclass(frozen=True)
class Segment:
    """A piece of shown text; ``kind`` set: the text is that kind of id, linked to its view."""

    text: str
    kind: str | None = None


def whole_tokens(names: Iterable[str]) -> re.Pattern[str] | None:
    """Matches any of ``names`` where it stands whole (not inside a longer id or word)."""
    ordered = sorted(set(names), key=len, reverse=True)  # the longest of overlapping ids
    if not ordered:
        return None
    return re.compile(f"{_BEFORE}({'|'.join(map(re.escape, ordered))}){_AFTER}")


class Linker:
    """Splits text into segments, each known id (whole, not inside a longer token) its own."""

    def __init__(self, known: dict[str, str]) -> None:
        self.known = known
        self._pattern = whole_tokens(known)

    def __call__(self, text: str) -> list[Segment]:
        if self._pattern is None:
            return [Segment(text)]
        out, at = [], 0
        for m in self._pattern.finditer(text):
            if m.start() > at:
                out.append(Segment(text[at:m.start()]))
            out.append(Segment(m.group(1), self.known[m.group(1)]))
            at = m.end()
        if at < len(text):
            out.append(Segment(text[at:]))
        return out


def utc_parts(timestamp: str) -> tuple[str, str]:
    """An event's ISO timestamp as (date, time of day to the microsecond), in UTC."""
    moment = datetime.fromisoformat(timestamp).astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%d"), moment.strftime("%H:%M:%S.%f")


def shown(value: Any) -> str:
    """A field's value in full: text as it is, anything else as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Decision:
    """A migration step's decision, as ``replay`` derives it (infra/application/replay/explain.py)."""

    step: str | None
    next: str | None
    comparisons: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    diff: list[dict[str, Any]]
    error: str | None


@dataclass
class Row:
    position: int
    timestamp: str
    lane: str  # source | migration | action
    aggregate: str  # key | schedule | migration
    aggregate_id: str
    version: int
    type: str
    who: str  # the narration's actor: admin | operator | worker | dest | legacy | source
    text: list[Segment]  # the narration; empty only for a type of a later release
    fields: list[tuple[str, list[Segment]]]
    data: dict[str, Any]  # the event's fields as stored
    migration_id: str | None = None  # the migration whose replay holds this step
    decision: Decision | None = None
    actor: str | None = None  # who, by name: the operator's identity, or the worker's id


@dataclass
class ObservedRun:
    """A destination run as the migrations' events observed it."""

    run_id: str
    migration_id: str
    seen_as: list[str] = field(default_factory=list)  # the fields naming it
    statuses: list[str] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)


@dataclass
class ActionStart:
    """One action of the schedule: its workflow id, as its action events tell it."""

    workflow_id: str
    nominal: str = ""
    origin: str = ""
    run_ids: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    status: str = ""


@dataclass
class Timeline:
    namespace: str
    schedule_id: str
    rows: list[Row]
    matched: int  # rows matching the filters (more than shown when truncated)
    migrations: list[str]  # every migration of the key, in log order
    runs: list[ObservedRun]
    actions: list[ActionStart]
    replays: dict[str, dict[str, Any]]  # migration id → its replay document (those replayed)

    @property
    def truncated(self) -> bool:
        return self.matched > len(self.rows)

    @property
    def steps(self) -> list[Row]:
        """The migrations' steps, the source's fences and closes among them (the page leads
        with them), in log order."""
        return [r for r in self.rows if _is_step(r)]

    @property
    def others(self) -> list[Row]:
        """The rest: the source's own events and its actions', in log order."""
        return [r for r in self.rows if not _is_step(r)]


def _is_step(row: Row) -> bool:
    return row.lane == "migration" or row.migration_id is not None


@dataclass(frozen=True)
class Filters:
    migration: str | None = None
    since: str | None = None
    until: str | None = None
    mentions: str | None = None  # a run or workflow id the rows must name

    def window(self) -> tuple[int | None, int | None]:
        since = parse_time(self.since, "since") if self.since else None
        until = parse_time(self.until, "until") if self.until else None
        if since is not None and until is not None and since > until:
            raise InvalidArgument("since is after until")
        return since, until


def migration_id(value: str) -> str:
    try:
        return str(UUID(value))
    except ValueError:
        raise InvalidArgument(f"migration id {value!r} is not a UUID") from None


def lane(entry: HistoryEntry, event_type: str) -> str:
    """migration (a migration's step), action (the schedule's actions) or source."""
    if entry.aggregate == "migration":
        return "migration"
    return "action" if event_type.startswith("Action") else "source"


def row_of(entry: HistoryEntry, step: tuple[str, dict[str, Any]] | None,
         link: Linker) -> Row:
    kind = short_type(entry.type)
    line = narrate(entry.type, entry.data, full_ids=True)
    row = Row(entry.position, entry.timestamp, lane(entry, kind), entry.aggregate,
              entry.aggregate_id, entry.version, kind,
              line.actor if line is not None else "-",
              link(line.text) if line is not None else [],
              [(k, link(shown(v))) for k, v in entry.data.items()],
              entry.data, actor=actor_name(entry.data))
    if step is not None:
        mid, s = step
        row.migration_id = mid
        d = s["decision"]
        row.decision = Decision(d.get("step"), d.get("next"), d["comparisons"], s["checks"],
                                s["diff"], s.get("error"))
    return row


class _Builder:
    def __init__(self, service: MigrationService, namespace: str, schedule_id: str) -> None:
        self.service, self.namespace, self.schedule_id = service, namespace, schedule_id
        self.entries = service.history(namespace, schedule_id)
        self.migrations = list(dict.fromkeys(e.aggregate_id for e in self.entries
                                             if e.aggregate == "migration"))
        self.replays: dict[str, dict[str, Any]] = {}

    def steps(self, only: str | None) -> dict[int, tuple[str, dict[str, Any]]]:
        """Log position → (migration id, replay step) of each (or the one) migration."""
        out: dict[int, tuple[str, dict[str, Any]]] = {}
        for mid in [only] if only else self.migrations:
            doc = self.service.replay(self.namespace, self.schedule_id, migration_id=mid)
            self.replays[mid] = doc
            out.update((s["position"], (mid, s)) for s in doc["steps"])
        return out

    def matching(self, f: Filters, steps: dict[int, Any]) -> list[HistoryEntry]:
        since, until = f.window()
        keep = []
        for e in self.entries:
            if f.migration and e.position not in steps:
                continue
            moment = to_us(datetime.fromisoformat(e.timestamp))
            if (since is not None and moment < since) or (until is not None and moment > until):
                continue
            if f.mentions and not _mentions(e.data, f.mentions):
                continue
            keep.append(e)
        return keep


def _mentions(data: dict[str, Any], wanted: str) -> bool:
    """The event names ``wanted`` in an id field, or whole inside a text (a park's detail)."""
    if any(i == wanted for _, i in ids_in(data)):
        return True
    pattern = whole_tokens([wanted])
    return pattern is not None and pattern.search(shown(data)) is not None


def build(service: MigrationService, namespace: str, schedule_id: str,
          filters: Filters = Filters()) -> Timeline:
    """The key's timeline, filtered; bad filters raise InvalidArgument, an unknown schedule
    or migration NotFound."""
    f = filters
    if f.migration:
        f = Filters(migration_id(f.migration), f.since, f.until, f.mentions)
    f.window()  # bad times are refused before the log is read
    b = _Builder(service, namespace, schedule_id)
    if f.migration and f.migration not in b.migrations:
        raise NotFound(f"migration {f.migration} is not a migration of schedule "
                       f"{namespace}/{schedule_id}")
    steps = b.steps(f.migration)
    entries = b.matching(f, steps)
    shown_entries = entries[:MAX_ROWS]
    known = {i: kind for e in shown_entries for kind, i in ids_in(e.data)}
    known.update({m: MIGRATION for m in b.migrations})
    link = Linker(known)
    rows = [row_of(e, steps.get(e.position), link) for e in shown_entries]
    return Timeline(namespace, schedule_id, rows, len(entries), b.migrations,
                    observed_runs(rows), action_starts(shown_entries), b.replays)


# What a start carries to the destination (the handover's recent actions, say), not what the
# destination showed; and the status recorded beside each kind of run id.
_CARRIED = {"input", "handover"}
_STATUS = {"run_id": "status", "current_run_id": "current_status"}


def observed_runs(rows: Iterable[Row]) -> list[ObservedRun]:
    """Every run id a migration event observed at the destination, with the fields and
    statuses it was seen with."""
    runs: dict[str, ObservedRun] = {}
    for row in rows:
        if row.lane != "migration":
            continue
        for label, run_id, status in _run_fields(row.data):
            run = runs.setdefault(run_id, ObservedRun(run_id, row.aggregate_id))
            _add(run.seen_as, f"{row.type}.{label}")
            _add(run.positions, row.position)
            if status:
                _add(run.statuses, status)
    return list(runs.values())


def _add(items: list[Any], item: Any) -> None:
    if item not in items:
        items.append(item)


def _run_fields(data: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(field path, run id, status beside it) for each run id field, nested dicts included."""
    for name, value in data.items():
        if name in _CARRIED:
            continue
        if isinstance(value, dict):
            yield from ((f"{name}.{k}", r, st) for k, r, st in _run_fields(value))
        elif id_kind(name) == RUN and isinstance(value, str) and value:
            yield name, value, str(data.get(_STATUS.get(name, ""), "") or "")


def action_starts(entries: Iterable[HistoryEntry]) -> list[ActionStart]:
    """The schedule's actions, one per workflow id, from its ``Action*`` events."""
    out: dict[str, ActionStart] = {}
    for e in entries:
        kind = short_type(e.type)
        wid = e.data.get("workflow_id")
        if lane(e, kind) != "action" or not isinstance(wid, str):
            continue
        a = out.setdefault(wid, ActionStart(wid))
        a.nominal = e.data.get("nominal") or a.nominal
        a.origin = e.data.get("origin") or a.origin
        run = e.data.get("run_id")
        if run and run not in a.run_ids:
            a.run_ids.append(run)
        a.events.append(kind)
        a.positions.append(e.position)
        a.status = e.data.get("status") or a.status
    return list(out.values())
