"""How values and verdicts read to a person, shared by the CLI and the demo; events read as
``projections/narration.py`` narrates them (re-exported here).

The CLI's output module re-exports these, so its commands and the demo narrate alike, and the
demo needs no import of the CLI.
"""
from __future__ import annotations

import json
import re
from typing import Any

from schedfence.domain.errors import NotFound
from schedfence.domain.text import one_line
from schedfence.projections import narration
from schedfence.projections.narration import narrate  # noqa: F401 (re-exported)

from schedfence.infra.application.service import MIGRATION_TOPICS, MigrationService

def yes_no(value: object) -> str:
    return "yes" if value else "no"


def show(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return yes_no(value)
    if isinstance(value, (dict, list)):
        return one_line(json.dumps(value, separators=(",", ":"), default=str))
    return one_line(value)


def short_type(topic: str) -> str:
    """``schedfence.migration.StartClaimConsumed`` (or ``module:Class.Event``) → last part."""
    return re.split(r"[.:]", topic)[-1]


def verdict_lines(doc: dict[str, Any]) -> list[str]:
    if doc["ok"]:
        return [f"invariants: OK ({doc['events']} events, {doc['migrations']} migrations "
                "checked)"]
    lines = [f"invariants: {len(doc['violations'])} violation(s) "
             f"({doc['events']} events, {doc['migrations']} migrations checked)"]
    for v in doc["violations"]:
        positions = ",".join(str(p) for p in v["positions"])
        lines.append(f"  {v['invariant']}  migration {v['migration_id'] or '-'}  "
                     f"positions {positions}: {one_line(v['message'])}")
    return lines


def verdict(service: MigrationService, also: str | None = None,
            progress: Any = None) -> dict[str, Any]:
    """The invariant checker's verdict over the whole store, as a JSON-ready document
    (``progress(n)``: how many events were checked so far)."""
    violations = [v.to_dict() for v in service.verify(also, progress)]
    # Counted, not the last log position: PostgreSQL's sequence leaves a hole wherever a save
    # rolled back (a lost optimistic-concurrency race), so positions overstate the events.
    events = migrations = 0
    for note in service.app.notifications():
        events += 1
        migrations += note.topic in MIGRATION_TOPICS
    return {"ok": not violations, "events": events, "migrations": migrations,
            "violations": violations}


def short(value: object) -> str:
    """A value for one terminal line (``show``); ids whole (UUIDv7 ids share their first 8
    hex digits, so a prefix would print two runs alike)."""
    return narration.short(show(value))


# -- the documents `status`, `list` and `history` print with --json (and the HTTP API serves) --
def status_doc(service: MigrationService, namespace: str, schedule_id: str) -> dict[str, Any]:
    view = service.schedule(namespace, schedule_id).to_dict()
    try:
        migration: dict[str, Any] | None = service.migration(namespace, schedule_id).to_dict()
    except NotFound:
        migration = None
    return {"schedule": view, "migration": migration}


def list_doc(service: MigrationService) -> dict[str, Any]:
    rows = []
    for view in service.list_schedules():
        row = view.to_dict()
        try:
            row["migration_state"] = service.migration(view.namespace, view.schedule_id).state
        except NotFound:
            row["migration_state"] = None
        rows.append(row)
    return {"schedules": rows}


def history_doc(service: MigrationService, namespace: str, schedule_id: str) -> dict[str, Any]:
    events = []
    for entry in service.history(namespace, schedule_id):
        doc = entry.to_dict()
        doc["short_type"] = short_type(entry.type)
        line = narrate(doc["short_type"], entry.data)
        doc["summary"] = None if line is None else line.text
        events.append(doc)
    return {"namespace": namespace, "schedule_id": schedule_id, "events": events}
