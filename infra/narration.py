"""How events and verdicts read to a person: one narration, shared by the CLI and the demo.

The CLI's output module re-exports these, so its commands and the demo narrate alike, and the
demo needs no import of the CLI.
"""
from __future__ import annotations

import json
import re
from typing import Any

from schedfence.infra.service import MIGRATION_TOPICS, MigrationService

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def one_line(text: object) -> str:
    """Make any message safe for a single terminal line (escape newlines and control chars)."""
    s = str(text)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)


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
