"""``schedfence audit | stats | oncall | migrations | projection``: the operator read models.

The commands are built from the CLI's shared helpers (infra/cli/base.py) and registered on the
group by ``infra/cli/commands.py``.
Every answer comes from the projection, caught up with the log first.
"""
from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Callable

import click

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import validate_id
from schedfence.projections import queries as q
from schedfence.projections.forward_oncall import oncall_doc
from schedfence.projections import service_views as pv
from schedfence.projections.records import EPOCH, MICROSECOND

from schedfence.infra.cli import output as out
from schedfence.infra.cli.base import emit, existing, json_option
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
MAX_STUCK_AFTER = 100 * 366 * 86400  # seconds: beyond that, microsecond arithmetic overflows


def _commands() -> tuple[click.Command, ...]:
    return tuple(build(json_option, existing, emit)
                 for build in (_audit, _stats, _oncall, _migrations, _projection))


# -- audit ---------------------------------------------------------------------------------------
def _audit(json_option: Decorator, service: Callable[[], Any], emit: Any) -> click.Command:
    @click.command("audit")
    @click.option("--schedule", default=None, metavar="NS/ID",
                  help="Events of a schedule key (all incarnations and their migrations).")
    @click.option("--request-id", default=None, help="Events carrying this request id.")
    @click.option("--migration", "migration_id", default=None, help="Events of one migration.")
    @click.option("--actor", default=None, help="Worker id or operator identity.")
    @click.option("--since", default=None, metavar="T",
                  help="ISO 8601 (naive = UTC) or a duration ago: 90s, 15m, 2h, 7d.")
    @click.option("--until", default=None, metavar="T", help="Same formats as --since.")
    @click.option("--newest-first", is_flag=True, help="Newest events first.")
    @click.option("--limit", type=int, default=100, show_default=True,
                  help="At most this many events.")
    @json_option
    def audit(schedule: str | None, request_id: str | None, migration_id: str | None,
              actor: str | None, since: str | None, until: str | None, newest_first: bool,
              limit: int, as_json: bool) -> None:
        """Who did what, when: events from the audit index, in log order.

        Filters combine (AND); the answer comes from the projection's indexes."""
        for label, value in (("request id", request_id), ("actor", actor)):
            if value is not None:
                validate_id(label, value)  # a filter value the store can compare at all
        page = service().audit(schedule=schedule, request_id=request_id,
                               migration_id=migration_id, actor=actor,
                               since=_moment(since, "since"), until=_moment(until, "until"),
                               newest_first=newest_first, limit=limit)
        emit(as_json, page.to_dict(), audit_lines(page))
    return audit


def _moment(text: str | None, name: str) -> datetime | None:
    """``--since``/``--until`` as a time the projection's integer microseconds can hold."""
    if text is None:
        return None
    try:
        return EPOCH + q.parse_time(text, name) * MICROSECOND
    except (OverflowError, ValueError):
        raise InvalidArgument(f"{name} is out of range (years 1 to 9999)") from None


def audit_lines(page: pv.AuditPage) -> list[str]:
    if not page.entries:
        return [f"no matching events (projected through position {page.projected_through})"]
    body = [[e.position, out.short_time(e.time),
             f"{e.namespace}/{e.schedule_id}" if e.namespace else "-", e.aggregate,
             e.type, e.actor, out.short(e.request_id), out.short(e.migration_id)]
            for e in page.entries]
    lines = out.table(["POS", "TIME", "SCHEDULE", "AGGREGATE", "TYPE", "ACTOR", "REQUEST",
                       "MIGRATION"], body)
    if page.truncated:
        lines.append(f"(first {len(page.entries)} shown; more match: narrow the filters or "
                     "raise --limit)")
    return lines


# -- stats -----------------------------------------------------------------------------------------
def _stats(json_option: Decorator, service: Callable[[], Any], emit: Any) -> click.Command:
    @click.command("stats")
    @json_option
    def stats(as_json: bool) -> None:
        """Migrations per namespace and state (for dashboards)."""
        doc = service().stats()
        emit(as_json, doc, stats_lines(doc))
    return stats


def stats_lines(doc: dict[str, Any]) -> list[str]:
    states = list(doc["by_state"])
    rows: list[list[object]] = [[ns] + [counts.get(s, 0) for s in states] + [sum(counts.values())]
                                for ns, counts in sorted(doc["by_namespace"].items())]
    rows.append(["(all)"] + [doc["by_state"][s] for s in states] + [doc["migrations"]])
    headers = ["NAMESPACE"] + [s.upper() for s in states] + ["TOTAL"]
    return out.table(headers, rows) + [
        f"open migrations: {doc['open']}; projected through log position "
        f"{doc['projected_through']}"]


# -- on-call ---------------------------------------------------------------------------------------
def _oncall(json_option: Decorator, service: Callable[[], Any], emit: Any) -> click.Command:
    @click.command("oncall")
    @click.option("--stuck-after", type=click.FloatRange(min=0), default=pv.STUCK_AFTER,
                  show_default=True, help="Seconds without an event before an open migration "
                  "counts as stuck.")
    @json_option
    def oncall(stuck_after: float, as_json: bool) -> None:
        """Migrations that need an operator: parked, legacy, stuck — and what may be done."""
        if not math.isfinite(stuck_after) or stuck_after > MAX_STUCK_AFTER:
            raise InvalidArgument(f"--stuck-after must be a number of seconds from 0 to "
                                  f"{MAX_STUCK_AFTER}")
        svc = service()
        items = svc.oncall(stuck_after_seconds=stuck_after)
        forward = svc.forward_oncall(stuck_after)
        emit(as_json, oncall_doc(stuck_after, items, forward), oncall_lines(items, forward))
    return oncall


def oncall_lines(items: list[Any], forward: list[Any] | None = None) -> list[str]:
    forward = forward or []
    if not items and not forward:
        return ["nothing needs an operator"]
    if not items:
        return forward_oncall_lines(forward)
    body = [[i.category, f"{i.migration.namespace}/{i.migration.schedule_id}",
             out.short(i.migration.migration_id), out.short(i.migration.request_id),
             i.migration.park_reason or i.migration.state, i.migration.attempts,
             i.migration.last_answer, f"{i.migration.idle_seconds:.0f}s",
             "allowed" if i.abort_allowed else "refused"] for i in items]
    lines = out.table(["KIND", "SCHEDULE", "MIGRATION", "REQUEST", "STATE/REASON", "ATTEMPTS",
                       "LAST ANSWER", "IDLE", "ABORT"], body)
    for i in items:
        lines.append("")
        lines.append(f"{i.migration.namespace}/{i.migration.schedule_id} ({i.category}):")
        lines += [f"  - {out.one_line(a)}" for a in i.actions]
        if not i.abort_allowed:
            lines.append(f"  - abort refused: {out.one_line(i.abort_refusal)}")
    return lines + (["", *forward_oncall_lines(forward)] if forward else [])


def forward_oncall_lines(items: list[Any]) -> list[str]:
    """Forward migrations (Temporal Schedule → source) that need an operator."""
    body = [[i.category, f"{i.migration['namespace']}/{i.migration['schedule_id']}",
             i.migration["migration_id"], i.migration["request_id"],
             i.migration["park_reason"] or i.migration["phase"],
             f"{i.migration['idle_seconds']:.0f}s"] for i in items]
    lines = ["forward migrations:", *out.table(["KIND", "SCHEDULE", "MIGRATION", "REQUEST",
                                                "PHASE/REASON", "IDLE"], body)]
    for i in items:
        lines += ["", f"{i.migration['namespace']}/{i.migration['schedule_id']} (forward, "
                      f"{i.category}):"]
        lines += [f"  - {out.one_line(a)}" for a in i.actions]
    return lines


# -- migrations by state ---------------------------------------------------------------------------
def _migrations(json_option: Decorator, service: Callable[[], Any], emit: Any) -> click.Command:
    @click.command("migrations")
    @click.option("--state", default=None, help="Only this state (pending, claimed, receipted, "
                  "completed, parked, legacy_pending, aborted).")
    @click.option("--limit", type=int, default=pv.MAX_ROWS, show_default=True)
    @json_option
    def migrations(state: str | None, limit: int, as_json: bool) -> None:
        """Migrations by state, most recently changed first."""
        rows = service().migrations_by_state(state, limit)
        body = [[r.state, f"{r.namespace}/{r.schedule_id}", out.short(r.migration_id),
                 out.short(r.request_id), r.park_reason, r.attempts, r.last_answer,
                 out.short_time(r.updated_at)] for r in rows]
        emit(as_json, {"migrations": [r.to_dict() for r in rows]},
             out.table(["STATE", "SCHEDULE", "MIGRATION", "REQUEST", "PARK REASON",
                        "ATTEMPTS", "LAST ANSWER", "UPDATED"], body) if rows
             else ["no migrations"])
    return migrations


# -- the projection itself -------------------------------------------------------------------------
def _projection(json_option: Decorator, service: Callable[[], Any], emit: Any) -> click.Group:
    @click.group("projection")
    def projection() -> None:
        """The operator projection: status, catch-up, rebuild from zero."""

    def _report(as_json: bool, applied: int | None) -> None:
        doc = service().views.status()
        if applied is not None:
            doc["applied"] = applied
        lines = [f"projection {doc['projection']}: through position "
                 f"{doc['projected_through']} of {doc['log_position']}"]
        if applied is not None:
            lines.append(f"applied {applied} events")
        lines += [f"  {name}: {n} rows" for name, n in doc["tables"].items()]
        emit(as_json, doc, lines)

    @projection.command("status")
    @json_option
    def status(as_json: bool) -> None:
        """How far the projection is, without catching up."""
        _report(as_json, None)

    @projection.command("catch-up")
    @json_option
    def catch_up(as_json: bool) -> None:
        """Apply every event not yet projected."""
        _report(as_json, service().catch_up())

    @projection.command("rebuild")
    @json_option
    def rebuild(as_json: bool) -> None:
        """Drop the projection's tables and project the whole log again."""
        _report(as_json, service().views.rebuild())

    return projection


COMMANDS = _commands()  # registered on the group by infra/cli/commands.py
