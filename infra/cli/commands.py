"""The ``schedfence`` command line: one group, every command registered on it in one place.

Every failure leaves through ``FenceGroup.invoke`` (infra/cli/base.py): one
``error: <code>: <message>`` line on stderr (or a JSON error object on stdout under ``--json``)
and a non-zero exit, never a traceback. Exit codes: 0 ok, 1 domain error or invariant
violations, 2 usage error. The commands live in their families' modules, which import
``base``, never this module.
"""
from __future__ import annotations

import click

from schedfence.infra.cli import admin, jobs, reads, schedules
from schedfence.infra.cli import output as out
from schedfence.infra.cli.base import CliState, FenceGroup, json_option
from schedfence.infra.cli.forward import COMMANDS as FORWARD_COMMANDS
from schedfence.infra.cli.projections import COMMANDS as PROJECTION_COMMANDS
from schedfence.infra.cli.recovery import recover
from schedfence.infra.cli.metrics import metrics
from schedfence.infra.cli.replay import replay
from schedfence.infra.cli.replicate import promote, replicate
from schedfence.infra.cli.scheduler import scheduler
from schedfence.infra.cli.serve import serve
from schedfence.infra.cli.temporal import destination_worker, leaving_cleanly
from schedfence.infra.observability import logs
from schedfence.infra.store.eventstore import DEFAULT_STORE


@click.group(cls=FenceGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", envvar="SCHEDFENCE_STORE", default=DEFAULT_STORE, show_default=True,
              help="Event store URL: sqlite:///PATH or postgresql://USER@HOST:PORT/DB"
                   "[?schema=S]; env SCHEDFENCE_STORE.")
@click.option("--worker-id", default=None, help="Identity recorded on worker/admin events.")
@click.option("--destination", envvar="SCHEDFENCE_DESTINATION", default=None,
              help="Where schedules go (no default: choose one): sim (the simulator kept "
                   "in the store, for trials), sim+STORE_URL (a simulator in a store of its "
                   "own, shared by an active and a standby) or temporal://HOST:PORT/NAMESPACE; "
                   "env SCHEDFENCE_DESTINATION.")
@click.option("--log-format", type=click.Choice(logs.FORMATS), envvar="SCHEDFENCE_LOG_FORMAT",
              default="text", show_default=True,
              help="Log records on stderr: text, or one JSON object per line; env "
                   "SCHEDFENCE_LOG_FORMAT.")
@click.option("--log-level", type=click.Choice(logs.LEVELS, case_sensitive=False),
              envvar="SCHEDFENCE_LOG_LEVEL", default="warning", show_default=True,
              help="The least severe record logged (info: every event a worker appends); "
                   "env SCHEDFENCE_LOG_LEVEL.")
@click.pass_context
def cli(ctx: click.Context, store: str, worker_id: str | None, destination: str | None,
        log_format: str, log_level: str) -> None:
    """schedfence: fenced handoff of schedules to a workflow-backed scheduler."""
    logs.configure(log_format, log_level)
    ctx.obj = CliState(store, worker_id, destination)


@click.command()
@click.option("--store", "demo_store", default=None,
              help="Store for the demo (must be empty); default: a new temporary file.")
@json_option
@click.pass_context
def demo(ctx: click.Context, demo_store: str | None, as_json: bool) -> None:
    """Play the rollback failure modes on a new store.

    Each failure mode of docs/protocol.md that applies to rollback runs on its own schedule;
    exits 1 if any outcome differs from the protocol or the invariant checker finds a violation."""
    from schedfence.infra.demo.run import run_demo  # the demo is the only user of its scenario code

    report = run_demo(demo_store, (lambda line: None) if as_json else click.echo)
    if as_json:
        out.emit_json(report)
    if not report["passed"]:
        ctx.exit(1)


COMMANDS = (schedules.schedule, admin.rollback, admin.abort, admin.worker, reads.status,
            reads.list_, reads.history, reads.verify, demo, recover, replay, replicate, promote,
            destination_worker, scheduler, serve, metrics, jobs.migrate, jobs.job,
            *FORWARD_COMMANDS, *PROJECTION_COMMANDS)
for _command in COMMANDS:
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    """Console entry point (standalone mode: click turns exits and usage errors into codes)."""
    with leaving_cleanly():  # os._exit after a Temporal client was used (sdk-python#300)
        cli.main(args=argv, prog_name="schedfence", standalone_mode=True)
