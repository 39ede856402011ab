"""How values and verdicts read on a terminal, shared by the CLI and the demo.

Events read as the project's one narration, ``projections/narration.py``: its ``narrate``,
``short_type`` and ``yes_no`` are re-exported here with ``one_line`` (domain/text.py), so the
CLI's output module and the demo format alike and the demo needs no import of the CLI. The
documents ``status``, ``list`` and ``history`` print (and the HTTP API serves) are the read
shape's: infra/application/views.py.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from schedfence.domain.text import counted, one_line
from schedfence.projections import narration
from schedfence.projections.narration import narrate, short_type, yes_no

if TYPE_CHECKING:  # imported by ``verdict`` only: ``status`` formats without the service
    from schedfence.infra.application.service import MigrationService

__all__ = ["narrate", "one_line", "short", "short_type", "show", "verdict", "verdict_lines",
           "yes_no"]


def show(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return yes_no(value)
    if isinstance(value, (dict, list)):
        return one_line(json.dumps(value, separators=(",", ":"), default=str))
    return one_line(value)


def verdict_lines(doc: dict[str, Any]) -> list[str]:
    if doc["ok"]:
        return [f"invariants: OK ({counted(doc['events'], 'event')}, "
                f"{counted(doc['migrations'], 'migration')} checked)"]
    lines = [f"invariants: {counted(len(doc['violations']), 'violation')} "
             f"({counted(doc['events'], 'event')}, "
             f"{counted(doc['migrations'], 'migration')} checked)"]
    for v in doc["violations"]:
        positions = ",".join(str(p) for p in v["positions"])
        lines.append(f"  {v['invariant']}  migration {v['migration_id'] or '-'}  "
                     f"positions {positions}: {one_line(v['message'])}")
    return lines


def verdict(service: MigrationService, also: str | None = None,
            progress: Any = None) -> dict[str, Any]:
    """The invariant checker's verdict over the whole store, as a JSON-ready document
    (``progress(n)``: how many events were checked so far)."""
    from schedfence.infra.application.service import MIGRATION_TOPICS

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
