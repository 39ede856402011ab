"""The ``schedfence`` command line: one group, every command registered on it in one place,
and what every command shares: the group's state (store, destination, the service opened on
first use), the error contract, ``--json`` and the emitter.

Every failure leaves through ``FenceGroup.invoke``: one ``error: <code>: <message>`` line on
stderr (or a JSON error object on stdout under ``--json``) and a non-zero exit, never a
traceback. Exit codes: 0 ok, 1 domain error or invariant violations, 2 usage error. The
commands live in their families' modules, which import this one for what they share
(``python -m schedfence.infra.cli`` runs ``__main__.py``, which imports it: one group).

Registered by name (``COMMANDS``): a command's module is imported when that command runs, or
when ``--help`` lists them all, so ``schedfence status`` imports the module of ``status`` and
not those of the worker, jobs, replication, the HTTP server or the destination worker
(benchmarks/cli_startup.py measures it; tests/infra/cli/test_cli_imports.py checks it).
"""
from __future__ import annotations

import importlib
import signal
import sys
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, cast

import click
from click.utils import _make_default_short_help

from schedfence.domain.errors import DomainError, InvalidArgument
from schedfence.domain.text import validate_worker_id

from schedfence.infra.cli import emitting as out
from schedfence.infra.adapters.observability import logs
from schedfence.infra.adapters.observability.logs import get_logger

if TYPE_CHECKING:  # the store, the service and the destinations: imported when first opened
    from schedfence.infra.adapters.destination.choose import OpenedDestination
    from schedfence.infra.application.service import MigrationService

# What --store defaults to. The CLI's own: the store adapter (eventstore, and with it
# eventsourcing's persistence) is imported only when a command opens a store, never for --help.
DEFAULT_STORE = "sqlite:///schedfence.db"
JSON_KEY = "schedfence.json"
DISTRIBUTION = "schedule-fence"  # --version reads this distribution's installed metadata
LOG = get_logger("cli")


@dataclass
class CliState:
    """Group options, and the service opened on first use (so --help never opens a store).

    ``service()`` is for commands that reach the destination (and may create the store);
    ``existing()`` for commands that read or change what is already there: the store must exist
    (nothing is created) and no destination is needed."""

    store: str
    worker_id: str | None
    destination: str | None = None
    _service: MigrationService | None = None
    _destination: OpenedDestination | None = None

    def service(self) -> MigrationService:
        if self._service is None:
            self._log_opening()
            self._service, self._destination = open_cli_service(self.store, self.worker_id,
                                                                self.destination)
        return self._service

    @property
    def destination_label(self) -> str:
        """The chosen destination as banners name it (no password)."""
        return self._destination.label if self._destination else "none"

    def existing(self) -> MigrationService:
        if self._service is None:
            from schedfence.infra.adapters.destination.choose import NoDestination, check_spec
            from schedfence.infra.application.offline import open_offline
            if self.worker_id is not None:
                validate_worker_id(self.worker_id)
            if self.destination:  # not used here, but a typo in it is still named
                check_spec(self.destination)
            self._log_opening()
            self._service = open_offline(self.store, self.worker_id, NoDestination())
        return self._service

    def _log_opening(self) -> None:
        from schedfence.infra.adapters.store.eventstore import parse_store_url
        try:
            shown = parse_store_url(self.store).redacted
        except DomainError:
            return  # opening it names the problem
        LOG.debug("opening store %s", shown, extra={"worker": self.worker_id})

    def store_error(self, exc: BaseException) -> DomainError | None:
        return self._service.app.store_error(exc) if self._service is not None else None

    def close(self) -> None:
        if self._service is not None:
            self._service.close()
            self._service = None
        if self._destination is not None:
            self._destination.close()  # the simulator's engine, a Temporal client
            self._destination = None


def open_cli_service(store: str, worker_id: str | None,
                     destination: str | None) -> tuple[MigrationService, OpenedDestination]:
    """The service on ``store`` with the destination the user chose (there is no default).

    Any failure to open is the caller's store/URL problem, so it is reported as invalid_argument.
    """
    from schedfence.infra.adapters.destination.choose import open_destination
    from schedfence.infra.adapters.store.eventstore import parse_store_url
    from schedfence.infra.application.service import open_service

    url = parse_store_url(store)
    if url.kind == "sqlite-memory":
        raise InvalidArgument("store sqlite:///:memory: ends with this command, so every "
                              "write would vanish: use sqlite:///PATH or postgresql://")
    if worker_id is not None:
        validate_worker_id(worker_id)
    opened = open_destination(destination, url)  # no destination: CHOOSE, how to pick one
    try:
        service = open_service(store, opened.destination, worker_id=worker_id)
        service.event_count()  # read now, so a file that is not a store fails here, clearly
    except DomainError:
        opened.close()
        raise
    except Exception as exc:
        opened.close()
        raise InvalidArgument(f"cannot open store {url.redacted!r}: {type(exc).__name__}: "
                              f"{exc}") from exc
    return service, opened


class FenceGroup(click.Group):
    """Catches every error of every subcommand centrally and applies the error contract."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            try:
                return super().invoke(ctx)
            except Exception as exc:  # a store failure anywhere (projections too): named
                state = ctx.obj if isinstance(ctx.obj, CliState) else None
                named = state.store_error(exc) if state else None
                if named is None or named is exc:
                    raise
                raise named from exc
            finally:
                if isinstance(ctx.obj, CliState):
                    ctx.obj.close()
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort,
                BrokenPipeError):  # a reader gone (`| head`): click's main exits 1, quietly
            raise  # usage errors (exit 2) and deliberate exits keep click's handling
        except DomainError as exc:
            self._fail(ctx, exc.code, exc.message)
        except Exception as exc:  # anything unexpected: still one line, never a traceback
            from schedfence.domain.text import one_line
            from schedfence.infra.engines.pool import MAX_MESSAGE
            # Bounded: a driver error can carry kilobytes of SQL and values, over many lines.
            self._fail(ctx, "internal", one_line(f"{type(exc).__name__}: {exc}", MAX_MESSAGE))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's list of commands, each shortened from its registered summary while its
        module is not imported (so ``--help`` imports none of them), else from its help."""
        lazy = self.commands if isinstance(self.commands, LazyCommands) else None
        names = self.list_commands(ctx)
        summaries = {name: lazy.summary(name) for name in names} if lazy else {}
        shown = [name for name in names if summaries.get(name) is not None
                 or not cast(click.Command, self.get_command(ctx, name)).hidden]
        if not shown:
            return
        limit = formatter.width - 6 - max(len(name) for name in shown)
        rows = []
        for name in shown:
            summary = summaries.get(name)
            rows.append((name, _make_default_short_help(summary, limit).strip() if summary
                         is not None else cast(click.Command, self.get_command(ctx, name))
                         .get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    @staticmethod
    def _fail(ctx: click.Context, code: str, message: str) -> None:
        out.emit_error(code, message, bool(ctx.meta.get(JSON_KEY)))
        ctx.exit(1)


def _remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    # ctx.meta is shared by the whole context chain, so the group's handler can see it.
    if value:
        ctx.meta[JSON_KEY] = True
    return value


def json_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, callback=_remember_json,
                        help="Print one JSON document instead of text.")(fn)


def cli_state() -> CliState:
    """The root group's state: it puts one on the context before any command runs."""
    return cast(CliState, click.get_current_context().find_object(CliState))


def service() -> MigrationService:
    """For commands that reach the destination: one must be chosen."""
    return cli_state().service()


def destination_label() -> str:
    return cli_state().destination_label


def existing() -> MigrationService:
    """For commands that read or change an existing store and never reach the destination."""
    return cli_state().existing()


def emit(as_json: bool, doc: Any, lines: list[str]) -> None:
    if as_json:
        out.emit_json(doc)
    else:
        out.emit_lines(lines)


# name -> (module of schedfence.infra.cli, attribute, summary): the attribute is the command,
# or a tuple holding it by name; the summary is the first sentence of its help, what
# ``schedfence --help`` lists without importing the module (test_cli_help.py holds them equal).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "schedule": ("schedules", "schedule", "Create and change source schedules."),
    "rollback": ("admin", "rollback", "Hand a schedule over to the workflow side."),
    "abort": ("admin", "abort", "Cancel an open migration, restoring the source."),
    "worker": ("admin", "worker", "Run migration tasks from the due-work index."),
    "status": ("status", "status", "Show a schedule and its latest migration."),
    "list": ("listing", "list_", "One row per schedule key (its current incarnation), in the "
             "order keys were created."),
    "history": ("reads", "history", "Events of a schedule and its migrations, in order (JSON: "
                "each with its summary)."),
    "verify": ("reads", "verify", "Check the log against the protocol invariants."),
    "recover": ("recovery", "recover", "Operator recovery of a parked, stuck or legacy "
                "migration."),
    "replay": ("replay", "replay", "Replay a migration step by step from the stored events "
               "alone."),
    "replicate": ("replicate", "replicate", "Copy the event log to a standby store, in order, "
                  "exactly once."),
    "promote": ("replicate", "promote", "Make this store (--store) the active one after a "
                "failover."),
    "destination-worker": ("temporal", "destination_worker", "Run the sentinel workflow "
                           "(recovery holds an id with it) on a Temporal server until "
                           "SIGINT/SIGTERM, in every namespace of the destination URL (``/*``: "
                           "every namespace the server lists when the worker starts); the "
                           "server runs the Temporal Schedules a rollback creates itself."),
    "scheduler": ("scheduler", "scheduler", "Run the source scheduler: tick schedules, start "
                  "due actions, watch them close."),
    "serve": ("serve", "serve", "Serve the HTTP admin API (and the web page at /ui/) over this "
              "store."),
    "metrics": ("metrics", "metrics", "Print the Prometheus metrics of a store (the text GET "
                "/metrics serves)."),
    "migrate": ("jobs", "migrate", "Migrate many schedules as one durable, resumable job."),
    "job": ("jobs", "job", "Batch jobs: their status, cancelling one, listing them."),
    "forward": ("forward", "forward", "Take a Temporal Schedule back into the source, fenced: "
                "the Temporal schedule is paused and marked, read, the source created dormant, the "
                "Temporal schedule deleted, and only then the source runs it."),
    "forward-status": ("forward", "forward_status", "One forward migration: its phase, the "
                       "pre-fence pause and notes, a park's reason."),
    "forward-abort": ("forward", "forward_abort", "End a forward migration without a handover: "
                      "the Temporal schedule gets its pre-fence pause and notes back; a dormant "
                      "source closes without acting."),
    "forward-take-over": ("forward", "forward_take_over", "Confirm a delete that raced the "
                          "handoff (parked deleted_elsewhere): the source runs the schedule."),
    "owners": ("owners", "owners", "Who owns each schedule now, across the store and the "
               "Temporal namespace; recorded."),
    "audit": ("reads", "audit", "Who did what, when, and why: events from the audit index, in "
              "log order, each with the reason its event gives (an operator's --reason, a "
              "park's)."),
    "stats": ("projections", "COMMANDS", "Migrations per namespace and state (for "
              "dashboards)."),
    "oncall": ("projections", "COMMANDS", "Migrations that need an operator: parked, legacy, "
               "stuck — and what may be done."),
    "migrations": ("reads", "migrations", "Migrations by state, most recently changed first "
                   "(all states: grouped by state)."),
    "projection": ("projections", "COMMANDS", "The operator projection: status, catch-up, "
                   "follow, rebuild from zero."),
}


def load_command(name: str, where: tuple[str, str, str]) -> click.Command:
    """Import the command ``name`` from its module (``where``)."""
    module, attribute, _ = where
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

    def __init__(self, lazy: dict[str, tuple[str, str, str]]) -> None:
        self._entries: dict[str, click.Command | tuple[str, str, str]] = dict(lazy)

    def summary(self, name: str) -> str | None:
        """The registered summary of a command not imported yet (None once it is)."""
        entry = self._entries.get(name)
        return entry[2] if isinstance(entry, tuple) else None

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
@click.version_option(package_name=DISTRIBUTION, prog_name="schedfence",
                      message="%(prog)s %(version)s",
                      help="Show the installed version (package metadata) and exit.")
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
    # Ctrl-C (SIGINT) stops the long-running commands cleanly, also when the process began
    # with SIGINT ignored (a shell without job control starts `cmd &` so): `kill -INT` stops.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        cli.main(args=argv, prog_name="schedfence", standalone_mode=True)
    except SystemExit:
        if _CHOOSER not in sys.modules:
            raise  # no Temporal client without the chooser: nothing to leave cleanly
        from schedfence.infra.cli.temporal import leaving_cleanly
        with leaving_cleanly():  # os._exit after a Temporal client was used (sdk-python#300)
            raise


# Every Temporal client is made through it (temporal.py imports it too): while it is not
# imported, no client was used and ``main`` exits as usual (--help never imports temporal.py).
_CHOOSER = "schedfence.infra.adapters.destination.choose"
