"""``schedfence replicate --from URL --to URL``: copy the event log to a standby store.

Registered on the group by ``infra/cli/commands.py``. ``replicate`` never
opens ``--store``: both stores are named by ``--from`` and ``--to``. Errors follow the CLI's
contract (one ``error: <code>: <message>`` line, a JSON error object under ``--json``), and
URLs are shown without their password.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import emit, json_option, service
from schedfence.infra.adapters.replication import BATCH
from schedfence.infra.adapters.store.eventstore import parse_store_url

if TYPE_CHECKING:  # the follower imports the drivers: loaded when a copy runs, not for --help
    from schedfence.infra.adapters.replication.follower import ReplicationReport

PROGRESS_EVERY = 10_000  # events between progress lines on a long copy
def _summary(report: ReplicationReport) -> list[str]:
    state = "caught up" if report.caught_up else f"{report.source_head - report.position} " \
        "source ids behind"
    return [f"replicated {report.copied} events in {report.batches} batches "
            f"({report.seconds:.2f}s, {report.rate:.0f} events/s)",
            f"from {report.source}", f"to   {report.standby}",
            f"source position {report.from_position} -> {report.position} "
            f"(source head {report.source_head}, {state})",
            f"log: {report.source_log or '(source empty)'}"]


class _Progress:
    """A line every PROGRESS_EVERY events (text), or per polling pass (--follow --json)."""

    def __init__(self, as_json: bool, following: bool) -> None:
        self.as_json, self.following = as_json, following
        self.next_line = PROGRESS_EVERY
        self.printed_at = 0

    def batch(self, report: ReplicationReport) -> None:
        if self.as_json or report.copied < self.next_line:
            return
        self.next_line = (report.copied // PROGRESS_EVERY + 1) * PROGRESS_EVERY
        click.echo(f"{time.strftime('%H:%M:%S')} copied {report.copied} events, source "
                   f"position {report.position} of {report.source_head}")

    def pass_done(self, report: ReplicationReport) -> None:
        if not self.following or report.copied == self.printed_at:
            return
        self.printed_at = report.copied
        if self.as_json:
            out.emit_json_line("copied", report.to_dict())
            return
        click.echo(f"{time.strftime('%H:%M:%S')} standby at source position "
                   f"{report.position} ({report.copied} events copied so far)")


@click.command("replicate")
@click.option("--from", "primary", required=True, metavar="URL",
              help="The active store (sqlite:///PATH or postgresql://...).")
@click.option("--to", "standby", required=True, metavar="URL",
              help="The standby store: empty, or written only by this follower.")
@click.option("--follow", "keep_following", is_flag=True,
              help="Keep copying new events until Ctrl-C.")
@click.option("--poll-interval", type=click.FloatRange(min=0), default=1.0,
              show_default=True, help="Seconds between polls with --follow.")
@click.option("--batch-size", type=click.IntRange(1, 10_000), default=BATCH,
              show_default=True, help="Events per standby transaction.")
@json_option
def replicate(primary: str, standby: str, keep_following: bool, poll_interval: float,
              batch_size: int, as_json: bool) -> None:
    """Copy the event log to a standby store, in order, exactly once.

    Each batch of stored events is appended verbatim to the standby together with the
    follower's position, in one transaction, so a copy stopped at any point resumes where it
    stopped. Refused (failed_precondition) if the standby holds events not copied from this
    source, or if the source does not continue what was copied. Then
    `schedfence --store STANDBY --destination sim+... worker` (or the real destination) takes
    over from the replicated state alone; see docs/operators.md, "Failover". With --json,
    JSON Lines: one object per line, ``"event": "copied"`` (per pass with --follow),
    ``"stopped"`` last."""
    from schedfence.infra.adapters.replication.follower import replicate as copy_log
    progress = _Progress(as_json, keep_following)
    if not keep_following:
        with out.progress("copying", "events") as update:
            def on_batch(report: ReplicationReport) -> None:
                progress.batch(report)
                update(report.position - report.from_position,
                       max(report.source_head - report.from_position, 0))
            report = copy_log(primary, standby, batch_size=batch_size, on_batch=on_batch)
        if as_json:
            out.emit_json_line("copied", report.to_dict())
        else:
            for line in _summary(report):
                click.echo(line)
        return
    _follow(primary, standby, poll_interval, batch_size, progress, as_json)


def _follow(primary: str, standby: str, poll_interval: float, batch_size: int,
            progress: _Progress, as_json: bool) -> None:
    from schedfence.infra.adapters.replication.follower import follow
    state: dict[str, ReplicationReport] = {}

    def on_batch(report: ReplicationReport) -> None:
        state["report"] = report
        progress.batch(report)

    def should_stop() -> bool:
        if "report" in state:
            progress.pass_done(state["report"])
        return False  # until Ctrl-C

    def warn(message: str) -> None:
        click.echo(f"warning: {message} (retrying)", err=True)

    if not as_json:
        click.echo(f"following {parse_store_url(primary).redacted} every {poll_interval:g}s "
                   "(Ctrl-C stops)")
    try:
        follow(primary, standby, poll_interval=poll_interval, batch_size=batch_size,
               should_stop=should_stop, on_batch=on_batch, on_error=warn)
    except KeyboardInterrupt:
        # Every batch commits with its position, so stopping anywhere loses nothing.
        report = state.get("report")
        copied = report.copied if report else 0
        if as_json:
            out.emit_json_line("stopped", {"copied": copied})
        else:
            click.echo(f"follower stopped after copying {copied} events")




@click.command()
@click.option("--actor", required=True, help="The operator promoting this store.")
@click.option("--reason", required=True, help="Why (the incident).")
@json_option
def promote(actor: str, reason: str, as_json: bool) -> None:
    """Make this store (--store) the active one after a failover.

    Records a failover epoch. Replication into it stops (its log now has events no follower
    copied), and every migration accepted before the failover reconciles against the
    destination before it may act again: the lost tail of the old active may have started
    it. Only the chain head's create request id is accepted as proof; anything else parks
    it (failover_unverified) for an operator. Run it before any worker or admin command."""
    epoch = service().promote(actor, reason)
    emit(as_json, {"epoch": epoch, "actor": actor, "reason": reason},
          [f"promoted: this store is now the active one (failover epoch {epoch}); migrations "
           "accepted before it reconcile before they act"])
