"""``schedfence rollback | abort | worker``: the commands that move migrations (the schedule
group is infra/cli/schedules.py)."""
from __future__ import annotations

import itertools
import math
import signal
import threading
import time
from dataclasses import replace
from typing import Any

import click

from schedfence.domain.errors import InvalidArgument

from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import (cli_state, destination_label, emit, existing,
                                           json_option, service)
from schedfence.infra.application.service import MigrationService
from schedfence.infra.engines.attempt import CLAIM_GRACE_SECONDS
from schedfence.infra.cli.attention import attention_lines, worker_attention
from schedfence.infra.engines.drain import RETRY_FOR, NotDrained
from schedfence.infra.engines.drive import Drive
from schedfence.infra.engines.drive import unique_worker_id
from schedfence.infra.engines.pool import MAX_POLL_INTERVAL


# -- migration commands ------------------------------------------------------------------------
@click.command()
@click.argument("namespace")
@click.argument("schedule_id")
@click.option("--request-id", default=None, help="Idempotency id (derived if omitted).")
@click.option("--actor", default="", help="Who asks (default: SCHEDFENCE_ACTOR, else user@host).")
@json_option
def rollback(namespace: str, schedule_id: str, request_id: str | None, actor: str,
             as_json: bool) -> None:
    """Hand a schedule over to the workflow side.

    Idempotent per request id; an omitted id is derived from the source incarnation."""
    state = cli_state()
    result = state.service().rollback(namespace, schedule_id, request_id, actor).to_dict()
    result["destination"] = state.destination_label
    emit(as_json, result, out.rollback_lines(result))


@click.command()
@click.argument("namespace")
@click.argument("schedule_id")
@click.option("--reason", required=True, help="Why the migration is cancelled.")
@click.option("--actor", required=True, help="The operator cancelling it.")
@json_option
def abort(namespace: str, schedule_id: str, reason: str, actor: str, as_json: bool) -> None:
    """Cancel an open migration, restoring the source.

    Refused (failed_precondition) once a start may have committed."""
    view = existing().abort(namespace, schedule_id, reason, actor).to_dict()
    emit(as_json, view, out.migration_lines(view))


@click.command()
@click.option("--until-idle", is_flag=True, help="One run until nothing progresses, then exit.")
@click.option("--concurrency", type=click.IntRange(min=1, max=64), default=1, show_default=True,
              help="Worker threads in this process (any number of processes may run too).")
@click.option("--max-attempts", type=click.IntRange(min=1), default=None,
              help="With --until-idle: stop after this many attempts (default: drain).")
@click.option("--retry-for", type=click.FloatRange(min=0, max=3600), default=RETRY_FOR,
              show_default=True, help="With --until-idle: seconds a migration that backs off "
              "(destination unavailable, a start in flight) is retried before it counts as "
              "blocked.")
@click.option("--poll-interval", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Seconds between passes when nothing was due (at most 3600).")
@click.option("--claim-grace", type=click.FloatRange(min=0), default=CLAIM_GRACE_SECONDS,
              show_default=True, help="Seconds another worker's fresh claim counts as in "
              "flight before this one reconciles it (at most 3600).")
@json_option
def worker(until_idle: bool, concurrency: int, max_attempts: int | None, retry_for: float,
           poll_interval: float, claim_grace: float, as_json: bool) -> None:
    """Run migration tasks from the due-work index.

    Without --until-idle, poll until Ctrl-C or SIGTERM, printing one line per pass that made
    progress (with --json: JSON Lines, one object per line: ``"event": "started"``, then
    ``"pass"`` per such pass, then ``"stopped"`` with the summary). Several workers, in this process
    (--concurrency) or others, may share a store: the store decides every race. Events name
    each thread WORKER_ID#RANDOM[/THREAD], so processes sharing a --worker-id stay distinct.

    With --until-idle, drain: retry what backs off for --retry-for seconds, then exit 0 only
    if nothing is left that could progress; otherwise print what is open and exit 1
    (not_drained)."""
    if not until_idle and (max_attempts is not None or retry_for != RETRY_FOR):
        raise InvalidArgument("--max-attempts and --retry-for apply only with --until-idle")
    for name, value in (("--poll-interval", poll_interval), ("--claim-grace", claim_grace)):
        if not (math.isfinite(value) and value <= MAX_POLL_INTERVAL):  # nan, inf, 1e308
            raise InvalidArgument(f"{name} must be a number of seconds from 0 to "
                                  f"{MAX_POLL_INTERVAL:g}")
    stop = threading.Event()
    if not (until_idle and concurrency == 1):  # a pool: SIGTERM or SIGINT (Ctrl-C) stops it
        # between attempts, from the very start (one while the store opens or the pool starts
        # is a clean stop too, not click's "Aborted!").
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    svc = service()
    before = svc.event_count()
    # The drain's own identity (a pool's threads make theirs): WORKER_ID#RANDOM.
    drained = Drive(max_attempts=max_attempts, retry_for=retry_for, claim_grace=claim_grace,
                    worker_id=unique_worker_id(svc.worker_id))
    pool = None if until_idle and concurrency == 1 else Drive(
        threads=concurrency, until_idle=until_idle, then_drain=False, claim_grace=claim_grace,
        poll_interval=poll_interval, stop=stop)
    summary, report = _work(svc, pool, drained, as_json)
    doc = dict(summary, destination=destination_label(),
               events_written=svc.app.events_since(before),
               migrations=out.migration_states(svc))
    doc["attention"] = worker_attention(doc["migrations"], report)
    if not until_idle:  # the stream's last line
        if as_json:
            out.emit_json_line("stopped", doc)
        else:
            click.echo(f"worker stopped after {summary['passes']} passes, "
                       f"{summary['attempts']} attempts")
            for line in attention_lines(doc["attention"]):
                click.echo(line)
        return
    failure = NotDrained.of(report) if report is not None and not report.drained else None
    if failure is not None and as_json:  # one JSON document: the summary carries the error
        doc["error"] = {"code": failure.code, "message": failure.message}
    emit(as_json, doc, [f"destination: {doc['destination']}",
                         f"attempts: {summary['attempts']}",
                         f"events written: {doc['events_written']}",
                         f"migrations: {out.states_summary(doc['migrations'])}",
                         *attention_lines(doc["attention"])])
    if failure is not None:
        if as_json:
            raise click.exceptions.Exit(1)
        raise failure


def _work(svc: MigrationService, pool: Drive | None, drained: Drive,
          as_json: bool) -> tuple[dict[str, Any], Any]:
    """The pool (``pool``; None: none), then with ``until_idle`` the drain: the summary, and
    the drain's report (None without one)."""
    if pool is None:
        report = _drain(svc, drained)
        return report.to_dict(), report
    stats = _run_pool(svc, pool, as_json)
    summary = stats.to_dict()
    if not pool.until_idle:
        return summary, None
    # What the pool backed off from: drained here, its claims all returned.
    report = _drain(svc, replace(drained, own_prefix=stats.identity))
    summary.update(report.to_dict(), attempts=stats.attempts + int(report))
    return summary, report


def _drain(svc: MigrationService, how: Drive) -> Any:
    """The drain, with a bar (settled migrations, rate, ETA) on a terminal's stderr."""
    if not out.stderr_is_terminal():  # no bar to draw: the drain reports to no one
        return svc.drive(how).report
    with out.progress("draining", "migrations") as update:
        return svc.drive(replace(how, progress=update)).report


def _run_pool(service: MigrationService, how: Drive, as_json: bool) -> Any:
    concurrency, until_idle, interval = how.threads, how.until_idle, how.poll_interval
    passes = itertools.count(1)

    def on_pass(thread: int, progressed: int) -> None:
        n = next(passes)
        if progressed and not until_idle:
            line: dict[str, Any] = {"pass": n, "thread": thread, "progressed": progressed,
                    "log_position": service.event_count(),
                    "migrations": out.migration_states(service)}
            if as_json:
                out.emit_json_line("pass", line)
                return
            click.echo(f"{time.strftime('%H:%M:%S')} pass {n}: thread {thread} progressed "
                       f"{progressed} migration(s); log at {line['log_position']}; "
                       f"migrations: {out.states_summary(line['migrations'])}")

    if not until_idle and as_json:
        out.emit_json_line("started", {"worker": service.worker_id, "threads": concurrency,
                                       "destination": destination_label(),
                                       "poll_interval": interval})
    elif not until_idle:
        click.echo(f"worker {service.worker_id}: {concurrency} thread(s), destination "
                   f"{destination_label()}, polling every {interval:g}s (Ctrl-C stops)")
    return service.drive(replace(how, on_pass=on_pass)).stats  # errors: logged
