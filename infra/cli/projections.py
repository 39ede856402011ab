"""``schedfence stats | oncall | projection``: the operator read models (``audit`` and
``migrations`` page in infra/cli/reads.py).

The commands are built from the CLI's shared helpers and registered on the group by
``infra/cli/commands.py``.
Every answer comes from the projection, caught up with the log first.
"""
from __future__ import annotations

import math
import signal
import sys
import threading
import time
from typing import Any, Callable

import click

from schedfence.domain.errors import InvalidArgument
from schedfence.projections.follow import (MODES, POLL_INTERVAL, SAFETY_INTERVAL, Applied,
                                           ProjectionFollower)
from schedfence.projections.forward_oncall import oncall_doc
from schedfence.projections.oncall import STUCK_AFTER
from schedfence.projections.schedule_oncall import failing_lines

from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import emit, existing, json_option
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
MAX_STUCK_AFTER = 100 * 366 * 86400  # seconds: beyond that, microsecond arithmetic overflows


def _commands() -> tuple[click.Command, ...]:
    return tuple(build(json_option, existing, emit)
                 for build in (_stats, _oncall, _projection))


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
    @click.option("--stuck-after", type=click.FloatRange(min=0), default=STUCK_AFTER,
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
        drift = svc.ownership_drift()
        lines = oncall_lines(items, forward)
        lines += ownership_lines(drift)[0 if lines else 1:]
        failing = svc.failing_schedules()  # schedules whose scheduler step keeps failing
        lines += ([""] if lines and failing else []) + failing_lines(failing)
        jobs = svc.job_oncall(stuck_after)
        lines += job_lines(jobs)[0 if lines else 1:]
        doc = oncall_doc(stuck_after, items, forward, drift, failing)
        doc["jobs"] = jobs
        emit(as_json, doc, lines or ["nothing needs an operator"])
    return oncall


def oncall_lines(items: list[Any], forward: list[Any] | None = None) -> list[str]:
    forward = forward or []
    if not items and not forward:
        return []
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


def ownership_lines(drift: list[dict[str, Any]]) -> list[str]:
    """The drift of the last ownership audits, each with the commands that resolve it."""
    if not drift:
        return []
    lines = ["", "ownership drift (last audit of each namespace):"]
    for d in drift:
        lines.append(f"{d['namespace']}/{d['schedule_id']} ({d['kind']}, owner {d['owner']}, "
                     f"audited {d['audited_at']}):")
        lines += [f"  - {d['advice']}"] if d.get("advice") else []
        lines += [f"  - resolve: {c}" for c in d["resolve"]] or \
            ["  - informational: nothing to resolve"]
    return lines


def job_lines(jobs: list[dict[str, Any]]) -> list[str]:
    """Batch jobs whose ``migrate`` run stopped before their selection was decided."""
    if not jobs:
        return []
    lines = ["", "batch jobs:"]
    for j in jobs:
        lines.append(f"job {j['job_id']} ({j['namespace']}, to {j['direction']}, stuck):")
        lines += [f"  - {out.one_line(a)}" for a in j["actions"]]
    return lines


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


# -- the projection itself -------------------------------------------------------------------------
def _projection(json_option: Decorator, service: Callable[[], Any], emit: Any) -> click.Group:
    @click.group("projection")
    def projection() -> None:
        """The operator projection: status, catch-up, follow, rebuild from zero."""

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
        """Drop the projection's tables and project the whole log again (a bar with rate and
        ETA on stderr when it is a terminal)."""
        views = service().views
        total = views.status()["log_position"]
        with out.progress("rebuilding the projection", "events", total) as update:
            applied = views.rebuild(on_batch=lambda b: update(b.position))
        _report(as_json, applied)

    @projection.command("follow")
    @click.option("--mode", type=click.Choice(MODES), default="auto", show_default=True,
                  help="How new events are noticed: subscribe (the store's LISTEN/NOTIFY "
                  "subscription, PostgreSQL), poll, or auto (subscribe where the store has "
                  "one, else poll).")
    @click.option("--interval", type=click.FloatRange(min=0.05, max=86400), default=None,
                  help=f"Seconds between checks: default {POLL_INTERVAL:g} when polling; a "
                  f"safety re-check, default {SAFETY_INTERVAL:g}, under a subscription.")
    @json_option
    def follow(mode: str, interval: float | None, as_json: bool) -> None:
        """Keep the projection current until Ctrl-C or SIGTERM.

        A line per applied batch; with --json, JSON Lines: ``"event": "started"`` (mode),
        ``"batch"`` (position, events, lag_seconds: from the newest event's time to the
        batch's commit), ``"stopped"``. A gap or an undecodable event stops it with the
        projection's error, everything before it applied."""
        if interval is not None and not math.isfinite(interval):
            raise InvalidArgument("--interval must be a number of seconds")
        svc = service()
        follower = ProjectionFollower(lambda: svc.views.projector, svc.app.recorder, mode=mode,
                                      interval=interval, on_batch=lambda a: _batch_line(as_json, a))
        _run_until_signalled(follower, lambda: _started(as_json, follower))
        if as_json:
            out.emit_json_line("stopped", {"position": follower.applied_through})
        else:
            click.echo(f"stopped at position {follower.applied_through}")

    return projection


def _started(as_json: bool, follower: ProjectionFollower) -> None:
    mode = "subscribe" if follower.waker is not None else "poll"
    if as_json:
        out.emit_json_line("started", {"mode": mode, "interval": follower.interval})
    else:
        click.echo(f"following the log ({mode}, a check every {follower.interval:g}s; "
                   "Ctrl-C stops)")


def _batch_line(as_json: bool, applied: Applied) -> None:
    if as_json:
        out.emit_json_line("batch", applied.to_dict())
    else:
        click.echo(f"{time.strftime('%H:%M:%S')} applied {applied.events} events through "
                   f"position {applied.position} (lag {applied.lag_seconds:.3f}s)")
        sys.stdout.flush()


def _run_until_signalled(follower: ProjectionFollower, started: Callable[[], None]) -> None:
    """``follower.run`` in a thread; SIGINT and SIGTERM stop it after its batch in hand. The
    handlers only set the follower's events: this thread never holds their locks."""
    failed: list[BaseException] = []

    def body() -> None:
        try:
            follower.run(started)
        except BaseException as exc:  # noqa: BLE001  (raised again in this thread)
            failed.append(exc)

    previous = {s: signal.signal(s, lambda *_: follower.stop_now())
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        thread = threading.Thread(target=body, name="projection-follow")
        thread.start()
        while thread.is_alive():
            thread.join(0.2)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if failed:
        raise failed[0]


COMMANDS = _commands()  # registered on the group by infra/cli/commands.py
