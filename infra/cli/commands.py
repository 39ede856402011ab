"""The ``schedfence`` command line: admin commands, the worker, read views and the demo.

Every failure leaves through ``FenceGroup.invoke``: one ``error: <code>: <message>`` line on
stderr (or a JSON error object on stdout under ``--json``) and a non-zero exit, never a
traceback. Exit codes: 0 ok, 1 domain error or invariant violations, 2 usage error.
"""
from __future__ import annotations

import itertools
import json
import math
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import click

from schedfence.domain.errors import DomainError, InvalidArgument, NotFound
from schedfence.domain.text import validate_worker_id

from schedfence.infra.cli import output as out
from schedfence.infra.cli.recovery import recover
from schedfence.infra.service import MigrationService, open_service
from schedfence.infra.worker.drain import RETRY_FOR, NotDrained
from schedfence.infra.destination.choose import (NoDestination, OpenedDestination, check_spec,
                                                 open_destination)
from schedfence.infra.offline import open_offline
from schedfence.infra.store.eventstore import DEFAULT_STORE, parse_store_url
from schedfence.infra.worker.attempt import CLAIM_GRACE_SECONDS
from schedfence.infra.worker.pool import MAX_POLL_INTERVAL, one_line, unique_worker_id

JSON_KEY = "schedfence.json"


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
            self._service, self._destination = open_cli_service(self.store, self.worker_id,
                                                                self.destination)
        return self._service

    @property
    def destination_label(self) -> str:
        """The chosen destination as banners name it (no password)."""
        return self._destination.label if self._destination else "none"

    def existing(self) -> MigrationService:
        if self._service is None:
            if self.worker_id is not None:
                validate_worker_id(self.worker_id)
            if self.destination:  # not used here, but a typo in it is still named
                check_spec(self.destination)
            self._service = open_offline(self.store, self.worker_id, NoDestination())
        return self._service

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
            # Bounded: a driver error can carry kilobytes of SQL and values, over many lines.
            self._fail(ctx, "internal", one_line(f"{type(exc).__name__}: {exc}"))

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


def _service() -> MigrationService:
    """For commands that reach the destination: one must be chosen."""
    return click.get_current_context().find_object(CliState).service()


def _destination_label() -> str:
    return click.get_current_context().find_object(CliState).destination_label


def _existing() -> MigrationService:
    """For commands that read or change an existing store and never reach the destination."""
    return click.get_current_context().find_object(CliState).existing()


def _emit(as_json: bool, doc: Any, lines: list[str]) -> None:
    if as_json:
        out.emit_json(doc)
    else:
        out.emit_lines(lines)


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
@click.pass_context
def cli(ctx: click.Context, store: str, worker_id: str | None,
        destination: str | None) -> None:
    """schedfence: fenced handoff of schedules to a workflow-backed scheduler."""
    ctx.obj = CliState(store, worker_id, destination)


# -- schedule (the source) ---------------------------------------------------------------------
@cli.group()
def schedule() -> None:
    """Create and change source schedules.

    Every change is refused with migration_pending while a migration holds the fence."""


def _schedule_out(view: Any, as_json: bool) -> None:
    _emit(as_json, view.to_dict(), out.schedule_lines(view.to_dict()))


@schedule.command("create")
@click.argument("namespace")
@click.argument("schedule_id")
@click.option("--paused", is_flag=True, help="Create it paused.")
@click.option("--notes", default="", help="Free-text notes.")
@json_option
def schedule_create(namespace: str, schedule_id: str, paused: bool, notes: str,
                    as_json: bool) -> None:
    """Create a schedule (or a new incarnation)."""
    _schedule_out(_service().create_schedule(namespace, schedule_id, paused, notes), as_json)


def _updater(name: str, doc: str, **change: Any) -> None:
    @schedule.command(name, help=doc)
    @click.argument("namespace")
    @click.argument("schedule_id")
    @json_option
    def command(namespace: str, schedule_id: str, as_json: bool) -> None:
        _schedule_out(_existing().update_schedule(namespace, schedule_id, **change), as_json)


_updater("pause", "Pause a schedule.", paused=True)
_updater("unpause", "Unpause a schedule.", paused=False)
_updater("delete", "Delete (close) a schedule.", delete=True)


@schedule.command("notes")
@click.argument("namespace")
@click.argument("schedule_id")
@click.argument("text")
@json_option
def schedule_notes(namespace: str, schedule_id: str, text: str, as_json: bool) -> None:
    """Replace a schedule's notes."""
    _schedule_out(_existing().update_schedule(namespace, schedule_id, notes=text), as_json)


# -- migration commands ------------------------------------------------------------------------
@cli.command()
@click.argument("namespace")
@click.argument("schedule_id")
@click.option("--request-id", default=None, help="Idempotency id (derived if omitted).")
@click.option("--actor", default="", help="Who asks (defaults to the worker id).")
@json_option
def rollback(namespace: str, schedule_id: str, request_id: str | None, actor: str,
             as_json: bool) -> None:
    """Hand a schedule over to the workflow side.

    Idempotent per request id; an omitted id is derived from the source incarnation."""
    state = click.get_current_context().find_object(CliState)
    result = state.service().rollback(namespace, schedule_id, request_id, actor).to_dict()
    result["destination"] = state.destination_label
    _emit(as_json, result, out.rollback_lines(result))


@cli.command()
@click.argument("namespace")
@click.argument("schedule_id")
@click.option("--reason", required=True, help="Why the migration is cancelled.")
@click.option("--actor", required=True, help="The operator cancelling it.")
@json_option
def abort(namespace: str, schedule_id: str, reason: str, actor: str, as_json: bool) -> None:
    """Cancel an open migration, restoring the source.

    Refused (failed_precondition) once a start may have committed."""
    view = _existing().abort(namespace, schedule_id, reason, actor).to_dict()
    _emit(as_json, view, out.migration_lines(view))


@cli.command()
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
    progress (with --json: one JSON object per such line). Several workers, in this process
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
    service = _service()
    service.worker.claim_grace = claim_grace
    before = service.event_count()
    report = None
    if until_idle and concurrency == 1:
        service.worker.worker_id = unique_worker_id(service.worker_id)  # a pool does its own
        report = service.run_until_idle(max_attempts, retry_for)
        summary: dict[str, Any] = report.to_dict()
    else:
        stats = _run_pool(service, concurrency, until_idle, poll_interval, as_json)
        summary = stats.to_dict()
        if until_idle:  # what the pool backed off from: drained here, its claims all returned
            service.worker.worker_id = unique_worker_id(service.worker_id)
            service.worker.own_prefix = stats.identity
            report = service.run_until_idle(max_attempts, retry_for)
            summary.update(report.to_dict(), attempts=stats.attempts + int(report))
    doc = dict(summary, destination=_destination_label(),
               events_written=service.app.events_since(before),
               migrations=out.migration_states(service))
    if not until_idle and not as_json:
        click.echo(f"worker stopped after {summary['passes']} passes, "
                   f"{summary['attempts']} attempts")
        return
    failure = NotDrained.of(report) if report is not None and not report.drained else None
    if failure is not None and as_json:  # one JSON document: the summary carries the error
        doc["error"] = {"code": failure.code, "message": failure.message}
    _emit(as_json, doc, [f"destination: {doc['destination']}",
                         f"attempts: {summary['attempts']}",
                         f"events written: {doc['events_written']}",
                         f"migrations: {out.states_summary(doc['migrations'])}"])
    if failure is not None:
        if as_json:
            raise click.exceptions.Exit(1)
        raise failure


def _run_pool(service: MigrationService, concurrency: int, until_idle: bool,
              interval: float, as_json: bool) -> Any:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # a clean stop between attempts

    passes = itertools.count(1)

    def on_pass(thread: int, progressed: int) -> None:
        n = next(passes)
        if progressed and not until_idle:
            line = {"pass": n, "thread": thread, "progressed": progressed,
                    "log_position": service.event_count(),
                    "migrations": out.migration_states(service)}
            click.echo(json.dumps(line) if as_json else
                       f"{time.strftime('%H:%M:%S')} pass {n}: thread {thread} progressed "
                       f"{progressed} migration(s); log at {line['log_position']}; "
                       f"migrations: {out.states_summary(line['migrations'])}")

    def on_error(thread: int, message: str) -> None:
        click.echo(f"worker thread {thread}: error: {message} (retrying)", err=True)

    if not until_idle and not as_json:
        click.echo(f"worker {service.worker_id}: {concurrency} thread(s), destination "
                   f"{_destination_label()}, polling every {interval:g}s (Ctrl-C stops)")
    return service.run_workers(stop, concurrency, until_idle=until_idle,
                               poll_interval=interval, on_pass=on_pass, on_error=on_error)


# -- read views --------------------------------------------------------------------------------
@cli.command()
@click.argument("namespace")
@click.argument("schedule_id")
@json_option
def status(namespace: str, schedule_id: str, as_json: bool) -> None:
    """Show a schedule and its latest migration."""
    service = _existing()
    view = service.schedule(namespace, schedule_id).to_dict()
    try:
        mig: dict[str, Any] | None = service.migration(namespace, schedule_id).to_dict()
    except NotFound:
        mig = None
    _emit(as_json, {"schedule": view, "migration": mig},
          out.schedule_lines(view) + out.migration_lines(mig))


@cli.command("list")
@json_option
def list_(as_json: bool) -> None:
    """One row per schedule key (its current incarnation)."""
    service = _existing()
    rows = []
    for view in service.list_schedules():
        row = view.to_dict()
        try:
            row["migration_state"] = service.migration(view.namespace, view.schedule_id).state
        except NotFound:
            row["migration_state"] = None
        rows.append(row)
    _emit(as_json, {"schedules": rows}, out.list_lines(rows))


@cli.command()
@click.argument("namespace")
@click.argument("schedule_id")
@click.option("--narrate", is_flag=True,
              help="One sentence per event (what happened, who did it) instead of its fields.")
@json_option
def history(namespace: str, schedule_id: str, narrate: bool, as_json: bool) -> None:
    """Events of a schedule and its migrations, in order (JSON: each with its summary)."""
    entries = []
    for entry in _existing().history(namespace, schedule_id):
        doc = entry.to_dict()
        doc["short_type"] = out.short_type(entry.type)
        line = out.narrate(doc["short_type"], entry.data)
        doc["summary"] = None if line is None else line.text
        entries.append(doc)
    _emit(as_json, {"namespace": namespace, "schedule_id": schedule_id, "events": entries},
          out.history_lines(entries, narrate))


@cli.command()
@click.option("--also", default=None, metavar="STORE_URL",
              help="Another copy of this store (the old active after a failover): check "
                   "both, and one destination chain per migration across them.")
@json_option
@click.pass_context
def verify(ctx: click.Context, also: str | None, as_json: bool) -> None:
    """Check the log against the protocol invariants.

    Exits 1 if any invariant is violated."""
    doc = out.verdict(_existing(), also)
    _emit(as_json, doc, out.verdict_lines(doc))
    if not doc["ok"]:
        ctx.exit(1)


@cli.command()
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


# Registers `replay` (that module imports this one, so it comes after the group).
from schedfence.infra.cli import replay as cli_replay  # noqa: E402,F401
from schedfence.infra.cli.projections import register as _projections  # noqa: E402
_projections(cli, json_option, _existing, _emit)  # audit, stats, oncall, migrations, projection


cli.add_command(recover)


from schedfence.infra.cli.temporal import destination_worker, leaving_cleanly  # noqa: E402
cli.add_command(destination_worker)
# Registers `replicate` and `promote` (that module imports this one, too).
from schedfence.infra.cli import replicate as cli_replicate  # noqa: E402,F401


def main(argv: list[str] | None = None) -> None:
    """Console entry point (standalone mode: click turns exits and usage errors into codes)."""
    with leaving_cleanly():  # os._exit after a Temporal client was used (sdk-python#300)
        cli.main(args=argv, prog_name="schedfence", standalone_mode=True)

