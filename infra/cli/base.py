"""What every ``schedfence`` command shares: the group's state (store, destination, the service
opened on first use), the error contract, ``--json`` and the emitter.

Command modules import this, never the module that assembles the group (``commands``): under
``python -m schedfence.infra.cli`` that one is ``__main__``, and importing it again would build a
second, unrelated group.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, cast

import click

from schedfence.domain.errors import DomainError, InvalidArgument
from schedfence.domain.text import validate_worker_id

from schedfence.infra.cli import output as out
from schedfence.infra.adapters.destination.choose import (NoDestination, OpenedDestination, check_spec,
                                                 open_destination)
from schedfence.infra.adapters.observability.logs import get_logger
from schedfence.infra.application.offline import open_offline
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.store.eventstore import parse_store_url

JSON_KEY = "schedfence.json"
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
            if self.worker_id is not None:
                validate_worker_id(self.worker_id)
            if self.destination:  # not used here, but a typo in it is still named
                check_spec(self.destination)
            self._log_opening()
            self._service = open_offline(self.store, self.worker_id, NoDestination())
        return self._service

    def _log_opening(self) -> None:
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
