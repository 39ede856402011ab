"""The ``schedfence`` command line: one group, every command registered on it in one place.

Every failure leaves through ``FenceGroup.invoke`` (infra/cli/base.py): one
``error: <code>: <message>`` line on stderr (or a JSON error object on stdout under ``--json``)
and a non-zero exit, never a traceback. Exit codes: 0 ok, 1 domain error or invariant
violations, 2 usage error. The commands live in their families' modules, which import
``base``, never this module.

Registered by name (``COMMANDS``): a command's module is imported when that command runs, or
when ``--help`` lists them all, so ``schedfence status`` imports the module of ``status`` and
not those of the worker, jobs, replication, the HTTP server or the destination worker
(benchmarks/cli_startup.py measures it; tests/infra/cli/test_cli_imports.py checks it).
"""
from __future__ import annotations

import importlib
import signal
from collections.abc import Iterator, MutableMapping

import click

from schedfence.infra.cli.base import CliState, FenceGroup, json_option
from schedfence.infra.adapters.observability import logs
from schedfence.infra.adapters.store.eventstore import DEFAULT_STORE

# name -> (module of schedfence.infra.cli, attribute): a command, or a tuple holding it by name.
COMMANDS: dict[str, tuple[str, str]] = {
    "schedule": ("schedules", "schedule"), "rollback": ("admin", "rollback"),
    "abort": ("admin", "abort"), "worker": ("admin", "worker"), "status": ("reads", "status"),
    "list": ("reads", "list_"), "history": ("reads", "history"), "verify": ("reads", "verify"),
    "recover": ("recovery", "recover"), "replay": ("replay", "replay"),
    "replicate": ("replicate", "replicate"), "promote": ("replicate", "promote"),
    "destination-worker": ("temporal", "destination_worker"),
    "scheduler": ("scheduler", "scheduler"), "serve": ("serve", "serve"),
    "metrics": ("metrics", "metrics"), "migrate": ("jobs", "migrate"), "job": ("jobs", "job"),
    "forward": ("forward", "forward"), "forward-status": ("forward", "forward_status"),
    "forward-abort": ("forward", "forward_abort"),
    "forward-take-over": ("forward", "forward_take_over"),
    "audit": ("reads", "audit"), "stats": ("projections", "COMMANDS"),
    "oncall": ("projections", "COMMANDS"), "migrations": ("reads", "migrations"),
    "projection": ("projections", "COMMANDS"),
}


def load_command(name: str, where: tuple[str, str]) -> click.Command:
    """Import the command ``name`` from its module (``where``)."""
    module, attribute = where
    found = getattr(importlib.import_module(f"schedfence.infra.cli.{module}"), attribute)
    if isinstance(found, tuple):
        found = next((c for c in found if c.name == name), None)
    if not isinstance(found, click.Command) or found.name != name:
        raise LookupError(f"schedfence.infra.cli.{module}.{attribute} holds no command {name!r}")
    return found


class LazyCommands(MutableMapping[str, click.Command]):
    """The group's ``commands``: a mapping whose entries are imported on first lookup (click
    lists them with ``sorted(commands)`` and finds one with ``commands.get(name)``); a command
    added with ``add_command`` replaces its lazy entry."""

    def __init__(self, lazy: dict[str, tuple[str, str]]) -> None:
        self._entries: dict[str, click.Command | tuple[str, str]] = dict(lazy)

    def __getitem__(self, name: str) -> click.Command:
        entry = self._entries[name]
        if isinstance(entry, tuple):
            entry = self._entries[name] = load_command(name, entry)
        return entry

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._entries[name] = command

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


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
    from schedfence.infra.cli import output as out
    from schedfence.infra.demo.run import run_demo  # the demo is the only user of its scenario code

    report = run_demo(demo_store, (lambda line: None) if as_json else click.echo)
    if as_json:
        out.emit_json(report)
    if not report["passed"]:
        ctx.exit(1)


cli.commands = LazyCommands(COMMANDS)
cli.add_command(demo)


def main(argv: list[str] | None = None) -> None:
    """Console entry point (standalone mode: click turns exits and usage errors into codes)."""
    from schedfence.infra.cli.temporal import leaving_cleanly

    # Ctrl-C (SIGINT) stops the long-running commands cleanly, also when the process began
    # with SIGINT ignored (a shell without job control starts `cmd &` so): `kill -INT` stops.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with leaving_cleanly():  # os._exit after a Temporal client was used (sdk-python#300)
        cli.main(args=argv, prog_name="schedfence", standalone_mode=True)
