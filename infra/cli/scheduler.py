"""``schedfence scheduler``: the source scheduler, taking the actions of every schedule with a
program (infra/engines/scheduler.py), until Ctrl-C or SIGTERM, or ``--once``."""
from __future__ import annotations

import math
import signal
import threading
import time

import click

from schedfence.domain.errors import InvalidArgument

from schedfence.infra.cli.commands import destination_label, emit, json_option, service
from schedfence.infra.engines.scheduler import MIN_PAUSE, SchedulerReport, run_until_stopped


@click.command()
@click.option("--once", is_flag=True, help="One pass, then print what it did and exit.")
@click.option("--poll-interval", type=click.FloatRange(min=MIN_PAUSE, max=3600), default=1.0,
              show_default=True,
              help="Seconds between passes at most: a pass also runs when the next schedule "
                   "is due, and this bounds how late a command's change is seen.")
@json_option
def scheduler(once: bool, poll_interval: float, as_json: bool) -> None:
    """Run the source scheduler: tick schedules, start due actions, watch them close.

    Until stopped it prints a line per pass that did something; with --json, JSON Lines: one
    object per line: ``"event": "started"``, ``"pass"`` (the pass's counts), ``"stopped"``.

    Needs --destination (the action runner: the simulator or Temporal). A schedule held by a
    migration's fence takes no action (I1); a rollback waits while a start is in flight."""
    from schedfence.infra.cli import output as out
    if not math.isfinite(poll_interval):
        raise InvalidArgument("--poll-interval must be a number of seconds")
    svc = service()
    if once:
        report = svc.run_scheduler().to_dict()
        doc = dict(report, destination=destination_label())
        emit(as_json, doc, [f"destination: {doc['destination']}"] +
             [f"{k}: {v}" for k, v in report.items() if k != "errors"] +
             [f"error: {e}" for e in report["errors"]])
        return
    stop = threading.Event()
    # SIGINT too, as the worker does: a KeyboardInterrupt raised wherever the main thread is
    # can land in a finalizer or a library's catch-all and be lost (the scheduler then ran on
    # after a benchmark's SIGINT); the stop event ends the loop after the pass in hand.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if as_json:
        out.emit_json_line("started", {"destination": destination_label(),
                                       "poll_interval": poll_interval})
    else:
        click.echo(f"scheduler: destination {destination_label()}, a pass at each due time "
                   f"and at least every {poll_interval:g}s (Ctrl-C stops)")
    def busy(pass_report: SchedulerReport) -> None:
        report = pass_report.to_dict()
        if as_json:
            out.emit_json_line("pass", report)
        else:
            click.echo(f"{time.strftime('%H:%M:%S')} started {report['started']}, "
                       f"failed {report['failed']}, retrying {report['retrying']}, "
                       f"closed {report['closed']}, stops {report['stops']}, "
                       f"ticks {report['ticks']}, unavailable "
                       f"{report['unavailable']}, errors {len(report['errors'])}")

    try:
        run_until_stopped(svc.run_scheduler, stop, poll_interval, busy, svc.worker_id)
    except KeyboardInterrupt:
        pass
    if as_json:
        out.emit_json_line("stopped", {"destination": destination_label()})
