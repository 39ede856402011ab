"""How each event reads to a person: one line per event type, and who took the step.

The one narration of the project: ``history --narrate``, the demo, replay's step summaries and
the audit reader all show these lines; on-call advice and park narration share the domain's
``PARK_MEANING``. It reads an event's stored fields (its payload), so it narrates live events,
stored history entries and replayed events alike. An event type it does not know (one a later
release writes) returns None, and the caller shows the raw fields instead.
"""
from __future__ import annotations

import re
from contextvars import ContextVar
from typing import Any, Callable, NamedTuple

from schedfence.domain.rollback.phases import PARK_MEANING

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# Cleared by ``narrate(..., full_ids=False)`` while it narrates. Ids are whole by default, on
# the web page and the terminal alike: UUIDv7 run ids (Temporal's) share their first 8 digits,
# so a prefix can print a foreign run and ours alike.
_FULL_IDS: ContextVar[bool] = ContextVar("narrate_full_ids", default=True)


class Line(NamedTuple):
    actor: str  # admin | operator | worker | dest | legacy | source
    text: str


def _absence(seen: dict[str, Any] | None) -> str:
    """What a re-arm on absence saw (F16), or nothing."""
    if not seen:
        return ""
    return (f": no run at the workflow id {seen['claim_age']:g}s after the claim, inside "
            f"retention {seen['retention_seconds']:g}s less {seen['margin_seconds']:g}s; "
            f"the start's answer was {seen['answer']}")


def short(value: object) -> str:
    """Values whole (uuids cut to their first 8 hex digits only under ``narrate(...,
    full_ids=False)``); none as ``-``."""
    text = "-" if value in (None, "") else str(value)
    return text[:8] if _UUID.match(text) and not _FULL_IDS.get() else text


def _handover(start_input: dict[str, Any]) -> str:
    """What a start that hands over a whole schedule carries (docs/protocol.md)."""
    h = start_input.get("handover")
    if not h:
        return ""
    return (f", the whole schedule from its cursor {h['cursor']} ({len(h['buffered'])} buffered "
            f"start(s), {len(h['backfills'])} backfill(s) in progress)")


def _settled(d: dict[str, Any]) -> str:
    started = ", ".join(d["started"])
    if d.get("deleted_at"):
        what = f"the schedule was deleted at {d['deleted_at']}, before the settle; " + (
            f"started {started} as plain workflows" if started else "no owed time to start")
    else:
        what = f"asked the destination to start {started}" if started else \
            "no time fell between the handover and the destination's first"
    return "boundary settled: " + what + \
        (f"; the pin at {d['pin']} cleared" if d.get("pin") else "") + \
        (f"; the destination started {d['over_limit']} beyond the limit (its create came "
         "after the pin)" if d.get("over_limit") else "") + \
        (f" ({d['detail']})" if d.get("detail") else "")


def yes_no(value: object) -> str:
    return "yes" if value else "no"


def short_type(topic: str) -> str:
    """An event's type name: ``schedfence.migration.StartClaimConsumed`` (or
    ``module:Class.Event``, or the name itself) → ``StartClaimConsumed``."""
    return re.split(r"[.:]", topic)[-1]


def _boundary(boundary: dict[str, Any] | None) -> str:
    """How the forward boundary was proven (TemporalFenced v2): the times checked by id."""
    if not boundary:
        return ""
    dropped = sum(1 for _, found in boundary["probed"] if not found)
    return (f" (the last time the server started; {dropped} later time(s) it never started "
            f"are the source's)") if dropped else " (the last time the server started)"


def park_text(reason: str, detail: str = "") -> str:
    meaning = PARK_MEANING.get(reason, reason)
    return f"parked {reason}: {meaning}" + (f" ({detail})" if detail else "")


def _answer(d: dict[str, Any]) -> str:
    kind, run = d["kind"], short(d["run_id"])
    text = {
        "created": f"created run {run}: accept (start_created)",
        "deduplicated": f"returned run {run} ({d.get('status') or '-'}) that it did not create "
                        "for this id (the id may be attached): verify the chain head",
        "already_started": f"run {run} (chain head {short(d['first_execution_run_id'])}) was "
                           f"started by {short(d['start_request_id'])}",
        "unavailable": f"unavailable ({d['detail']}): outcome unknown, the claim stays "
                       "consumed, reconcile next",
        "not_sent": f"the start never left ({d['detail']}): nothing committed, the claim "
                    "re-arms",
        "rejected": f"rejected the start ({d['detail']}): nothing committed",
    }.get(kind, kind)
    proof = " (proves no commit)" if d.get("proves_no_commit") else ""
    return f"destination answered {kind}: {text}{proof}"


def _requested(d: dict[str, Any]) -> Line:
    if d.get("request_id") is None:
        return Line("legacy", "pending migration written by an older release (v1): no "
                              "request id, every worker attempt fails closed")
    return Line("admin", f"rollback accepted, request id {short(d['request_id'])} "
                         f"({d['origin']}); pre-migration paused={yes_no(d['pre_paused'])}; "
                         "source paused and fenced in the same append")


def _chain(d: dict[str, Any]) -> Line:
    creator = short(d.get("head_create_request_id")) if d.get("head_create_request_id") \
        else "- (not recorded)"
    detail = f"; {d['detail']}" if d.get("detail") else ""
    return Line("worker", f"chain verified (attempt {d['attempt']}): {d['verdict']}; current "
                          f"run {short(d['current_run_id'])} ({d.get('current_status') or '-'}"
                          f"), head {short(d['first_run_id'])} created by {creator}{detail}")


_NARRATE: dict[str, Callable[[dict[str, Any]], Line]] = {
    # the migration
    "RequestIdAssigned": _requested,
    "StartClaimConsumed": lambda d: Line(
        "worker", f"start claim consumed durably before the only start call (attempt "
                  f"{d['attempt']})"),
    "DestinationStartIssued": lambda d: Line(
        "worker", f"start issued at {d['workflow_id']}, request id {short(d['request_id'])}, "
                  f"{d['id_reuse_policy']}/{d['id_conflict_policy']}, input paused="
                  f"{yes_no(d['input'].get('paused'))}" + _handover(d['input'])),
    "DestinationAnswered": lambda d: Line("dest", _answer(d)),
    "BoundarySettled": lambda d: Line("worker", _settled(d)),
    "ChainVerified": _chain,
    "FailoverReconciled": lambda d: Line(
        "worker", f"accepted before failover {d['epoch']}: reconciling (only the chain head's "
                  "create id is proof) before anything else"),
    "OwnershipAccepted": lambda d: Line(
        "worker", f"ownership accepted ({d['evidence']}), receipt "
                  f"{short(d['destination_first_run_id'])}"),
    "MigrationParked": lambda d: Line("worker", park_text(d["reason"], d.get("detail", "")) +
                                      "; the source stays paused and fenced"),
    "LegacyMigrationAdopted": lambda d: Line(
        "operator", f"legacy migration adopted by {d['actor']} with request id "
                    f"{short(d['request_id'])} ({d['reason']}); parked until verified"),
    "MigrationResolved": lambda d: Line(
        "operator", f"resolved by {d['actor']}: {d['resolution']} ({d['reason']}); attested: "
                    f"{d['attestation']}"),
    "StartClaimRearmed": lambda d: Line(
        "worker" if d.get("actor") == "worker" else "operator",
        f"start claim re-armed by {d['actor']} ({d['reason']})" + _absence(d.get("absence"))),
    "SourceClosed": lambda d: Line(
        "worker", f"source closed; receipt {short(d['destination_first_run_id'])}"),
    "MigrationAborted": lambda d: Line(
        "admin", f"migration aborted by {d['actor']} ({d['reason']}); source restored to "
                 f"paused={yes_no(d['restored_paused'])}"),
    # the source
    "FencedForMigration": lambda d: Line(
        "source", f"source paused and fenced by request id {short(d['request_id'])}"),
    "ClosedByMigration": lambda d: Line(
        "source", f"source closed by the migration (destination chain "
                  f"{short(d['destination_first_run_id'])})"),
    "FenceAdopted": lambda d: Line(
        "source", f"fence now holds the adopted request id {short(d['request_id'])}"),
    "FenceReleased": lambda d: Line(
        "source", f"fence released; source restored to paused={yes_no(d['restored_paused'])}"),
    "Paused": lambda d: Line("source", f"paused={yes_no(d['paused'])}"),
    # the source scheduler's actions
    "TimesProcessed": lambda d: Line(
        "source", f"scheduler ticked to {d['cursor']}: {len(d['skipped'])} time(s) skipped, "
                  f"{len(d['buffer'])} buffered"),
    "ActionStartIssued": lambda d: Line(
        "source", f"action start issued for {d['nominal']} ({d['origin']}) as "
                  f"{d['workflow_id']}, request id {short(d['request_id'])}"),
    "ActionStarted": lambda d: Line(
        "source", f"action {d['workflow_id']} started, run {short(d['run_id'])}"),
    "ActionStartFailed": lambda d: Line(
        "source", f"action {d['workflow_id']} could not start: {d['detail']}"),
    "ActionClosed": lambda d: Line("source", f"action {d['workflow_id']} closed ({d['status']})"),
    "StopRequested": lambda d: Line(
        "source", f"overlap policy asked {len(d['workflow_ids'])} running action(s) to "
                  f"{d['kind']}"),
    "ActionStartRetrying": lambda d: Line(
        "source", f"action {d['workflow_id']}: outcome unknown after attempt {d['attempt']} "
                  f"({d['detail']}); asked again at {d['retry_at']} with the same request id"),
    "PausedOnFailure": lambda d: Line(
        "source", f"schedule paused on failure of {d['workflow_id']}: {d['detail']}"),
    "Triggered": lambda d: Line(
        "source", f"triggered by hand at {d['nominal']} (overlap {d['overlap']})"),
    "BackfillRequested": lambda d: Line(
        "source", f"{d['backfill_id']} requested: {d['start']} to {d['end']} "
                  f"(overlap {d['overlap']})"),
    "BackfillProcessed": lambda d: Line(
        "source", f"{d['backfill_id']} moved to {d['cursor']}: {len(d['due'])} time(s) "
                  f"buffered" + ("; done" if d.get("done") else "")),
    "ProgramUpdated": lambda d: Line("source", "schedule's spec, action, policies or limit "
                                               "updated"),
    "NotesUpdated": lambda d: Line("source", "notes updated"),
    "Deleted": lambda d: Line("source", "schedule deleted"),
    # a forward migration (a Temporal Schedule handed to the source) and its source
    "ForwardRequested": lambda d: Line(
        "admin", f"forward migration requested by {d['actor']} with request id "
                 f"{short(d['request_id'])} ({d['request_id_origin']})"),
    "TemporalFenceIssued": lambda d: Line(
        "worker", f"fence issued on the Temporal schedule (token {d['conflict_token']}; before "
                  f"it paused={yes_no(d['pre_paused'])})"),
    "TemporalFenced": lambda d: Line(
        "worker", f"Temporal schedule fenced and read; the source resumes after "
                  f"{d['handover'].get('cursor') or '-'}{_boundary(d.get('boundary'))}"),
    "SourceCreated": lambda d: Line(
        "worker", f"source incarnation {d['incarnation']} created, dormant"),
    "TemporalDeleteIssued": lambda d: Line("worker", "delete of the Temporal schedule issued"),
    "ForwardCompleted": lambda d: Line("worker", f"forward migration completed: {d['detail']}"),
    "ForwardParked": lambda d: Line("worker", f"forward migration parked: {d['reason']} "
                                              f"({d['detail']})"),
    "ForwardAborted": lambda d: Line(
        "admin", f"forward migration aborted by {d['actor']} ({d['reason']}); Temporal "
                 f"schedule restored={yes_no(d['temporal_restored'])}"),
    # an ownership audit of a namespace (domain/owners/audit.py)
    "AuditRecorded": lambda d: Line(
        "admin", f"ownership audit of {d['namespace']} by {d['actor']}: {len(d['rows'])} "
                 f"key(s); drift: " + (", ".join(
                     f"{k} {n}" for k, n in d["counts"].get("kind", {}).items()
                     if n and k not in ("none", "native")) or "none")),
    "CreatedByMigration": lambda d: Line(
        "source", f"created dormant from a Temporal schedule by request id "
                  f"{short(d['request_id'])}"),
    "OwnershipTaken": lambda d: Line(
        "source", f"took the schedule over; restored paused={yes_no(d['restored_paused'])}"),
    "TakeoverAbandoned": lambda d: Line("source", "closed without acting: its forward "
                                                  "migration was aborted"),
}


def narrate(event_type: str, fields: dict[str, Any], *, full_ids: bool = True) -> Line | None:
    """The event's line, or None for a type this release does not narrate (or whose fields
    do not fit: a record of a later release, say). ``event_type``: the type's name or its
    topic. ``full_ids=False``: uuids cut to 8 digits."""
    fn = _NARRATE.get(short_type(event_type))
    if fn is None:
        return None
    token = _FULL_IDS.set(full_ids)
    try:
        return fn(fields)
    except (KeyError, TypeError, AttributeError):
        return None
    finally:
        _FULL_IDS.reset(token)
