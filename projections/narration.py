"""How each event reads to a person: one line per event type, and who took the step.

The one narration of the project: ``history --narrate``, the demo, replay's step summaries and
the audit reader all show these lines; on-call advice and park narration share the domain's
``PARK_MEANING``. It reads an event's stored fields (its payload), so it narrates live events,
stored history entries and replayed events alike. Every stored type (domain/topics.py) has a
line (tests/projections/test_narration_coverage.py); one it does not know (a later release's)
returns None, and the caller shows the raw fields instead.
"""
from __future__ import annotations

import re
from collections import Counter
from contextvars import ContextVar
from typing import Any, Callable, NamedTuple

from schedfence.domain.destination_id import describe_binding
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
    return Line("admin", f"rollback accepted{_by(d)}{_job(d)}, request id "
                         f"{short(d['request_id'])} "
                         f"({d['origin']}); pre-migration paused={yes_no(d['pre_paused'])}; "
                         "source paused and fenced in the same append" + _dest(d))


def _by(d: dict[str, Any]) -> str:
    """`` by ACTOR`` where the event names who asked (older records did not: nothing)."""
    return f" by {d['actor']}" if d.get("actor") else ""


def _dest(d: dict[str, Any]) -> str:
    """``; accepted against DESTINATION`` where the event names what it was accepted against
    (older records did not: nothing, so their lines read as they always did)."""
    return f"; accepted against {describe_binding(d['destination'])}" \
        if d.get("destination") else ""


def _job(d: dict[str, Any]) -> str:
    """`` for job ID`` where a batch job requested the migration."""
    return f" for job {d['job_id']}" if d.get("job_id") else ""


def _operator(text: Callable[[dict[str, Any]], str]) -> Callable[[dict[str, Any]], Line]:
    """A change an operator's command made to the source, naming who asked when recorded."""
    return lambda d: Line("operator" if d.get("actor") else "source", text(d) + _by(d))


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
    "DestinationBound": lambda d: Line(
        "operator", f"destination bound by {d['actor']} to {describe_binding(d['destination'])} "
                    f"({d['reason']}): recorded by no older release, attested"),
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
    "Paused": _operator(lambda d: f"paused={yes_no(d['paused'])}"),
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
    "Triggered": _operator(
        lambda d: f"triggered by hand at {d['nominal']} (overlap {d['overlap']})"),
    "BackfillRequested": _operator(
        lambda d: f"{d['backfill_id']} requested: {d['start']} to {d['end']} "
                  f"(overlap {d['overlap']})"),
    "BackfillProcessed": lambda d: Line(
        "source", f"{d['backfill_id']} moved to {d['cursor']}: {len(d['due'])} time(s) "
                  f"buffered" + ("; done" if d.get("done") else "")),
    "ProgramUpdated": _operator(lambda d: "schedule's spec, action, policies or limit updated"),
    "NotesUpdated": _operator(lambda d: "notes updated"),
    "Deleted": _operator(lambda d: "schedule deleted"),
    # a forward migration (a Temporal Schedule handed to the source) and its source
    "ForwardRequested": lambda d: Line(
        "admin", f"forward migration requested by {d['actor']}{_job(d)} with request id "
                 f"{short(d['request_id'])} ({d['request_id_origin']})" + _dest(d)),
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


def _job_defined(d: dict[str, Any]) -> Line:
    ids = d.get("schedule_ids")
    which = f"{len(ids)} named schedule(s)" if ids is not None else "every schedule"
    match = f" matching {d['match']!r}" if d.get("match") else ""
    return Line("admin", f"job {d['job_id']} defined by {d.get('actor') or '-'}: --to "
                         f"{d['direction']} in {d['namespace']}, {which}{match}{_dest(d)}")


def _decision_counts(decisions: list[dict[str, Any]]) -> str:
    """A job's decisions counted by kind, ``N kind`` in kind order ("" for none)."""
    counts = Counter(x["decision"] for x in decisions)
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


def _page_decided(d: dict[str, Any]) -> Line:
    shown_counts = _decision_counts(d["decisions"]) or "nothing new"
    return Line("worker", f"job page {d['page']} decided: {shown_counts}" +
                ("; the selection is exhausted" if d.get("exhausted") else ""))


def _blocked_asked(d: dict[str, Any]) -> Line:
    return Line("worker", f"job round {d['round']} asked {len(d['decisions'])} blocked "
                          f"schedule(s) again: {_decision_counts(d['decisions'])}")


# Types whose short name another type shares (``Created``): narrated by their topic.
_BY_TOPIC: dict[str, Callable[[dict[str, Any]], Line]] = {
    "schedfence.schedule.Created": lambda d: Line(
        "admin", f"schedule created, incarnation {d['incarnation']}, paused="
                 f"{yes_no(d.get('paused'))}"),
    "schedfence.schedule_key.Created": lambda d: Line(
        "admin", f"key {d['namespace']}/{d['schedule_id']} first used"),
    "schedfence.migration.Created": lambda d: Line("admin", "migration created"),
    "schedfence.forward.Created": lambda d: Line("admin", "forward migration created"),
    "schedfence.job.Created": lambda d: Line("admin", "job created"),
    "schedfence.store_epoch.Created": lambda d: Line("admin", "store epoch record created"),
    "schedfence.ownership.Created": lambda d: Line(
        "admin", f"ownership audits of {d['namespace']} begun"),
}
_NARRATE.update({
    # a schedule key: its incarnations and the forward migration holding it
    "IncarnationStarted": lambda d: Line("admin", f"key moved to incarnation "
                                                  f"{d['incarnation']}"),
    "ForwardOpened": lambda d: Line(
        "admin", f"key held by forward migration {short(d['migration_id'])}: no new "
                 "incarnation until it ends"),
    "ForwardClosed": lambda d: Line(
        "worker", f"forward migration {short(d['migration_id'])} released the key"),
    # a batch job
    "Defined": _job_defined,
    "PageDecided": _page_decided,
    "BlockedAsked": _blocked_asked,
    "CancelRequested": lambda d: Line(
        "operator", f"job cancel requested by {d['actor']}" +
                    (f" ({d['reason']})" if d.get("reason") else "") +
                    "; the migrations it requested finish"),
    # the store's failover epoch
    "FailoverRecorded": lambda d: Line(
        "admin", f"store promoted to epoch {d['epoch']} by {d['actor']} ({d['reason']})"),
})


def narration_of(event_type: str) -> Callable[[dict[str, Any]], Line] | None:
    """The narration of a type (its topic, or its name where no other type shares it)."""
    return _BY_TOPIC.get(event_type) or _NARRATE.get(short_type(event_type))


def actor_name(fields: dict[str, Any]) -> str | None:
    """Who took a step, by name: an operator's identity where the event names one, else the
    worker id. A worker's own re-arm says ``actor="worker"``; its ``worker`` names which."""
    actor = fields.get("actor") or ""
    if actor and actor != "worker":
        return str(actor)
    return fields.get("worker") or actor or None


def narrate(event_type: str, fields: dict[str, Any], *, full_ids: bool = True) -> Line | None:
    """The event's line, or None for a type this release does not narrate (or whose fields
    do not fit: a record of a later release, say). ``event_type``: the type's topic, or its
    name where no other type shares it. ``full_ids=False``: uuids cut to 8 digits."""
    fn = narration_of(event_type)
    if fn is None:
        return None
    token = _FULL_IDS.set(full_ids)
    try:
        return fn(fields)
    except (KeyError, TypeError, AttributeError):
        return None
    finally:
        _FULL_IDS.reset(token)
