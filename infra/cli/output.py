"""Output of the ``schedfence`` CLI: aligned text, JSON documents, one-line errors.

Kept apart from the command definitions so ``cli.py`` only wires commands to the service.
"""
from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Iterable, Sequence

import click

from schedfence.infra.service import MIGRATION_TOPICS, MigrationService

# Event fields that are noise in a one-line history summary (``--json`` still has them all).
_HISTORY_SKIP = {"worker", "input", "originator_topic", "migration_id", "source_id",
                 "schedule_aggregate_id", "namespace", "schedule_id"}
# request_id is on every migration event; in text show it only where it is first assigned.
_REQUEST_ID_SHOWN = {"RequestIdAssigned", "FencedForMigration", "ClosedByMigration",
                     "FenceAdopted", "LegacyMigrationAdopted"}
_MAX_VALUE = 60


def one_line(text: object) -> str:
    """Make any message safe for a single terminal line (escape newlines and control chars)."""
    s = str(text)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


def emit_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, default=str))


def emit_error(code: str, message: str, as_json: bool) -> None:
    """The error contract: JSON object on stdout under --json, else one stderr line."""
    if as_json:
        click.echo(json.dumps({"error": {"code": code, "message": message}}))
    else:
        click.echo(f"error: {code}: {one_line(message)}", err=True)


def emit_lines(lines: Iterable[str]) -> None:
    for line in lines:
        click.echo(line)


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


def kv_block(title: str, pairs: Sequence[tuple[str, object]], indent: str = "  ") -> list[str]:
    width = max((len(k) for k, _ in pairs), default=0)
    return [title] + [f"{indent}{k.ljust(width)}  {show(v)}" for k, v in pairs]


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    cells = [[show(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()

    # The last column is ragged, so its rule only spans its header.
    rule = ["-" * w for w in widths[:-1]] + ["-" * len(headers[-1])]
    return [line(headers), line(rule)] + [line(r) for r in cells]


def short_type(topic: str) -> str:
    """``schedfence.migration.StartClaimConsumed`` (or ``module:Class.Event``) → last part."""
    return re.split(r"[.:]", topic)[-1]


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
def schedule_lines(view: dict[str, Any]) -> list[str]:
    pairs = [("incarnation", view["incarnation"]), ("paused", view["paused"]),
             ("notes", view["notes"]), ("closed", view["closed"]),
             ("close reason", view["close_reason"]),
             ("migration pending", view["migration_pending"]),
             ("migration id", view["migration_id"])]
    return kv_block(f"schedule {view['namespace']}/{view['schedule_id']}", pairs)


def migration_lines(view: dict[str, Any] | None) -> list[str]:
    if view is None:
        return ["migration: none"]
    answer = view.get("last_answer") or {}
    pairs = [("state", view["state"]), ("request id", view["request_id"]),
             ("request id origin", view["request_id_origin"]),
             ("park reason", view["park_reason"]), ("park detail", view["park_detail"]),
             ("destination first run", view["destination_first_run_id"]),
             ("claim armed", view["claim_armed"]), ("starts issued", view["starts_issued"]),
             ("attempts", view["attempts"]), ("last answer", answer.get("kind")),
             ("version", view["version"])]
    return kv_block(f"migration {view['migration_id']}", pairs)


def rollback_lines(result: dict[str, Any]) -> list[str]:
    return kv_block(f"rollback {result['outcome']}", [
        ("request id", result["request_id"]), ("origin", result["request_id_origin"]),
        ("migration id", result["migration_id"]), ("destination", result["destination"])])


def list_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no schedules"]
    headers = ["NAMESPACE", "SCHEDULE", "INC", "PAUSED", "CLOSED", "MIGRATION PENDING",
               "MIGRATION"]
    body = [[r["namespace"], r["schedule_id"], r["incarnation"], r["paused"], r["closed"],
             r["migration_pending"], r["migration_state"]] for r in rows]
    return table(headers, body)


def history_lines(entries: list[dict[str, Any]]) -> list[str]:
    if not entries:
        return ["no events"]
    body = [[e["position"], short_time(e["timestamp"]), e["aggregate"], e["short_type"],
             key_fields(e["short_type"], e["data"])] for e in entries]
    return table(["POS", "TIME", "AGGREGATE", "TYPE", "FIELDS"], body)


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


def states_summary(counts: dict[str, int]) -> str:
    if not counts:
        return "none"
    return ", ".join(f"{state} {n}" for state, n in sorted(counts.items()))


# -- documents shared by several commands ------------------------------------------------------
def migration_states(service: MigrationService) -> dict[str, int]:
    """How many migrations of the whole store are in each state (from the projection)."""
    return {state: n for state, n in service.stats()["by_state"].items() if n}


def verdict(service: MigrationService, also: str | None = None) -> dict[str, Any]:
    """The invariant checker's verdict over the whole store, as a JSON-ready document."""
    violations = [v.to_dict() for v in service.verify(also)]
    # Counted, not the last log position: PostgreSQL's sequence leaves a hole wherever a save
    # rolled back (a lost optimistic-concurrency race), so positions overstate the events.
    events = migrations = 0
    for note in service.app.notifications():
        events += 1
        migrations += note.topic in MIGRATION_TOPICS
    return {"ok": not violations, "events": events, "migrations": migrations,
            "violations": violations}


# -- narrating a migration's events (the demo) -------------------------------------------------
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def short(value: object) -> str:
    """Shorten uuids to their first 8 hex digits; other ids are shown whole."""
    text = show(value)
    return text[:8] if _UUID.match(text) else text


def _answer(d: dict[str, Any]) -> str:
    kind, run = d["kind"], short(d["run_id"])
    if kind == "created":
        return f"created run {run}"
    if kind == "deduplicated":
        return f"deduplicated against run {run} ({d['status']})"
    if kind == "already_started":
        return (f"already_started: run {run} was started by {short(d['start_request_id'])} "
                f"(chain head {short(d['first_execution_run_id'])})")
    if kind == "unavailable":
        return f"unavailable ({d['detail']}): outcome unknown, claim stays consumed"
    return f"rejected the start ({d['detail']})"


def render_event(event_type: str, d: dict[str, Any]) -> tuple[str, str] | None:
    """(actor, one human line) for a migration event; None for events the narration skips."""
    rid = short(d.get("request_id"))
    if event_type == "RequestIdAssigned" and d.get("request_id") is None:
        return "legacy", "pending migration written by an older release (v1): no request id"
    if event_type == "RequestIdAssigned":
        return "admin", (f"rollback accepted, request id {rid} ({d['origin']}); source paused "
                         "and fenced in the same append")
    if event_type == "LegacyMigrationAdopted":
        return "operator", (f"legacy migration adopted by {d['actor']} with request id {rid} "
                            f"({d['reason']}); parked until verified")
    if event_type == "MigrationResolved":
        return "operator", (f"resolved by {d['actor']}: {d['resolution']} ({d['reason']}); "
                            f"attested: {d['attestation']}")
    if event_type == "StartClaimConsumed":
        return "worker", f"start claim consumed durably (attempt {d['attempt']})"
    if event_type == "DestinationStartIssued":
        return "worker", (f"start issued, request id {rid}, {d['id_reuse_policy']}/"
                          f"{d['id_conflict_policy']}, input paused="
                          f"{yes_no(d['input'].get('paused'))}")
    if event_type == "DestinationAnswered":
        return "dest", _answer(d)
    if event_type == "ChainVerified":
        creator = short(d.get("head_create_request_id")) or "-"
        return "worker", (f"chain verified (attempt {d['attempt']}): {d['verdict']}; current "
                          f"run {short(d['current_run_id'])}, head {short(d['first_run_id'])} "
                          f"created by {creator}")
    if event_type == "FailoverReconciled":
        return "worker", (f"accepted before failover {d['epoch']}: reconciling before any "
                          "start")
    if event_type == "OwnershipAccepted":
        return "worker", (f"ownership accepted ({d['evidence']}), receipt "
                          f"{short(d['destination_first_run_id'])}")
    if event_type == "MigrationParked":
        return "worker", f"parked: {d['reason']}"
    if event_type == "StartClaimRearmed":
        return "worker", f"start claim re-armed by {d['actor']} ({d['reason']})"
    if event_type == "SourceClosed":
        return "worker", "source closed"
    if event_type == "MigrationAborted":
        return "admin", f"migration aborted by {d['actor']} ({d['reason']}); source restored"
    return None
