"""Output of the ``schedfence`` CLI: aligned text, JSON documents, JSON Lines, one-line errors.

Ids (run, request, migration) are printed whole: UUIDv7 ids share their first 8 characters.

Kept apart from the command definitions so ``cli.py`` only wires commands to the service.
"""
from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterator, Protocol, Sequence

# Re-exported: the CLI's commands and the demo narrate with the same functions.
from schedfence.domain.source.action import SchedulePolicies
from schedfence.infra.application.display import (narrate, one_line, short, short_type,  # noqa: F401
                                                  show, verdict, verdict_lines, yes_no)
from schedfence.infra.application.service import MigrationService
from schedfence.infra.cli.blocks import kv_block, migration_lines, schedule_lines  # noqa: F401
from schedfence.infra.cli.emitting import (emit_error, emit_json, emit_json_line,  # noqa: F401
                                           emit_lines)
from schedfence.infra.cli.table import more_hint, rich_table, table  # noqa: F401
from schedfence.infra.cli.listing import list_lines  # noqa: F401

# Event fields that are noise in a one-line history summary (``--json`` still has them all).
_HISTORY_SKIP = {"worker", "input", "originator_topic", "migration_id", "source_id",
                 "schedule_aggregate_id", "namespace", "schedule_id"}
# request_id is on every migration event; in text show it only where it is first assigned.
_REQUEST_ID_SHOWN = {"RequestIdAssigned", "FencedForMigration", "ClosedByMigration",
                     "FenceAdopted", "LegacyMigrationAdopted"}
_MAX_VALUE = 60


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


class ProgressUpdate(Protocol):
    def __call__(self, done: int, total: int | None = None, detail: str | None = None) -> None:
        ...


def _no_progress(done: int, total: int | None = None, detail: str | None = None) -> None:
    return None


def rate_and_eta(done: int, total: int | None, elapsed: float, unit: str) -> tuple[str, str]:
    """The rate over the whole run so far and the time left at it: figures from the first
    update on (a windowed speed stays unknown while updates come tens of seconds apart)."""
    if done <= 0 or elapsed <= 0:
        return f"- {unit}/s", "-:--:--"
    speed = done / elapsed
    shown = f"{speed:,.0f}" if speed >= 10 else f"{speed:.2g}"
    if total is None or total < done:
        return f"{shown} {unit}/s", "-:--:--"
    left = round((total - done) / speed)
    return f"{shown} {unit}/s", f"{left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}"


@contextmanager
def progress(description: str, unit: str,
             total: int | None = None) -> Iterator[ProgressUpdate]:
    """The CLI's one progress style. ``update(done, total, detail)`` draws a bar with rate and
    ETA (and ``detail``, e.g. a job's counts, beside them) on stderr, only when stderr is a
    terminal (so --json and piped output stay clean); otherwise it does nothing. A total of
    None draws a pulsing bar. The bar is erased when the block ends."""
    if not stderr_is_terminal():
        yield _no_progress
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    # A short bar, no spinner and no elapsed column: the counts beside it fit 80 columns.
    bar = Progress(TextColumn("{task.description}"), BarColumn(bar_width=6),
                   MofNCompleteColumn(), TextColumn("{task.fields[rate]} ETA {task.fields[eta]}"),
                   TextColumn("{task.fields[detail]}"),
                   console=Console(stderr=True), transient=True,
                   redirect_stdout=False, redirect_stderr=False)
    started = time.monotonic()
    with bar:
        task = bar.add_task(description, total=total, rate=f"- {unit}/s", eta="-:--:--",
                            detail="")

        def update(done: int, total: int | None = None, detail: str | None = None) -> None:
            whole = total if total is not None else bar.tasks[0].total
            rate, eta = rate_and_eta(done, None if whole is None else int(whole),
                                     time.monotonic() - started, unit)
            bar.update(task, completed=done, total=whole, rate=rate, eta=eta,
                       detail=bar.tasks[0].fields["detail"] if detail is None else detail)
        yield update


def short_time(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except ValueError:
        return iso


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 3] + "..."


def key_fields(event_type: str, data: dict[str, Any]) -> str:
    parts = []
    for key, value in data.items():
        if key in _HISTORY_SKIP or value in ("", None, [], {}):
            continue
        if key == "request_id" and event_type not in _REQUEST_ID_SHOWN:
            continue
        if key == "attempt" and value == 0:
            continue
        parts.append(f"{key}={_clip(short(value))}")
    return " ".join(parts)


# -- views -----------------------------------------------------------------------------------
def _input_text(shown: dict[str, Any]) -> str:
    """One decoded input (domain/source/payload.shown): its JSON, or its encoding and size."""
    if "value" in shown:
        return json.dumps(shown["value"], separators=(",", ":"), sort_keys=True)
    return f"<{shown['encoding'] or 'no encoding'}, {shown['bytes']} bytes>"


def program_lines(view: dict[str, Any]) -> list[str]:
    """What a schedule runs and when (``schedule describe``)."""
    spec, policies = view.get("spec"), view.get("policies")
    action: Any = view.get("action")  # a schedule with a spec has one
    policies = policies or SchedulePolicies().model_dump()  # none recorded: Temporal's defaults
    if spec is None:
        return ["runs: nothing (no spec and no action)"]
    every = [f"every {i['every']}s" + (f" +{i['offset']}s" if i["offset"] else "")
             for i in spec["intervals"]]
    pairs = [("spec", ", ".join(every + [f"cron {c!r}" for c in spec["cron_expressions"]])),
             ("time zone", spec["time_zone"]), ("start", spec["start_at"]),
             ("end", spec["end_at"]), ("jitter", f"{spec['jitter']}s"),
             ("action", f"start {action['workflow_type']} on {action['task_queue']} as "
                        f"{action['workflow_id']}-<time>"),
             ("input", ", ".join(_input_text(i) for i in view.get("inputs") or []) or "none"),
             ("overlap", policies["overlap"]),
             ("catch-up window", f"{policies['catchup_window']}s"),
             ("pause on failure", policies["pause_on_failure"]),
             ("remaining actions", "unlimited" if view["remaining_actions"] is None
              else view["remaining_actions"]),
             ("next action times", ", ".join(view.get("next_action_times") or []) or "none")]
    return kv_block("runs", pairs)


def activity_lines(view: dict[str, Any]) -> list[str]:
    """What a schedule did and does (``schedule describe``): full ids, oldest first."""
    def listed(items: list[str]) -> str:
        return ", ".join(items) or "none"
    pairs = [("last processed time", view["cursor"]), ("actions taken", view["action_count"]),
             ("recent actions", listed([f"{a['workflow_id']} ({a['origin']}, run "
                                        f"{a['run_id']})" for a in view["recent_actions"]])),
             ("running", listed(view["running"])),
             ("starts in flight", listed([f"{i['workflow_id']} (attempt "
                                          f"{i.get('attempt', 0) + 1})" for i in view["issued"]])),
             ("buffered starts", listed([f"{b['nominal']} ({b['origin']}, {b['overlap']})"
                                         for b in view["buffered"]])),
             ("stopping", listed(view["stopping"])),
             ("backfills", listed([f"{b['backfill_id']} {b['start']}..{b['end']} at "
                                   f"{b['cursor']}" for b in view["backfills"]]))]
    return kv_block("actions", pairs)


def rollback_lines(result: dict[str, Any]) -> list[str]:
    return kv_block(f"rollback {result['outcome']}", [
        ("request id", result["request_id"]), ("origin", result["request_id_origin"]),
        ("migration id", result["migration_id"]), ("destination", result["destination"])])


def audit_lines(page: Any) -> list[str]:
    """``audit``: one row per event, with the reason its event gives."""
    body = [[e.position, short_time(e.time),
             f"{e.namespace}/{e.schedule_id}" if e.namespace else "-", e.aggregate, e.type,
             e.actor, short(e.request_id), short(e.migration_id), one_line(e.reason or "")]
            for e in page.entries]
    return rich_table(["POS", "TIME", "SCHEDULE", "AGGREGATE", "TYPE", "ACTOR", "REQUEST",
                       "MIGRATION", "REASON"], body,
                      f"no matching events (projected through position "
                      f"{page.projected_through})")


def migrations_table(rows: list[Any]) -> list[str]:
    body = [[r.state, f"{r.namespace}/{r.schedule_id}", short(r.migration_id),
             short(r.request_id), r.park_reason, r.attempts, r.last_answer,
             short_time(r.updated_at)] for r in rows]
    return rich_table(["STATE", "SCHEDULE", "MIGRATION", "REQUEST", "PARK REASON", "ATTEMPTS",
                       "LAST ANSWER", "UPDATED"], body, "no migrations")


def history_lines(entries: list[dict[str, Any]], sentences: bool = False) -> list[str]:
    """One row per event: its key fields, or (``sentences``) its narration."""
    if not entries:
        return ["no events"]
    body = [[e["position"], short_time(e["timestamp"]), e["aggregate"], e["short_type"],
             one_line(e["summary"]) if sentences and e.get("summary")
             else key_fields(e["short_type"], e["data"])] for e in entries]
    return table(["POS", "TIME", "AGGREGATE", "TYPE", "WHAT" if sentences else "FIELDS"], body)


def states_summary(counts: dict[str, int]) -> str:
    if not counts:
        return "none"
    return ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))


# -- documents shared by several commands ------------------------------------------------------
def migration_states(service: MigrationService) -> dict[str, int]:
    """How many migrations of the whole store are in each state (from the projection)."""
    return {state: n for state, n in service.stats()["by_state"].items() if n}


