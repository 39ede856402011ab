"""The offline service: an existing store opened with no destination and nothing created.

Replay and the CLI's commands that only read or change what is in the store use it: a missing
SQLite file or PostgreSQL schema is refused (``invalid_argument``) instead of created, and the
destination refuses every call, so such a command can never reach one.
"""
from __future__ import annotations

from typing import Any

from schedfence.domain.errors import InvalidArgument, Unavailable

from schedfence.infra.adapters.destination.choose import NoDestination
from schedfence.infra.application.service import MigrationService
from schedfence.infra.adapters.store.eventstore import (event_table, holds_event_log, open_application,
                                               parse_store_url)
from schedfence.infra.adapters.store.pg import StoreUnavailable


class OfflineDestination(NoDestination):
    """Replay's destination: every call is refused as ``unavailable`` (replay never needs one)."""

    def __init__(self) -> None:
        super().__init__("no destination is configured for replay (offline)", Unavailable)


def open_offline(store: str, worker_id: str | None = None, destination: Any = None) -> Any:
    """A service over an existing ``store`` that never reaches a destination and never creates
    the store: replay, and the CLI's commands that only read or change what is there."""
    url = parse_store_url(store)
    if not holds_event_log(url):  # opening would create the file, or the schema and tables
        if url.pg is None:
            raise InvalidArgument(f"store {store!r}: no such file (this command never creates "
                                  "one; a store is created by `schedule create` or a worker)")
        raise InvalidArgument(f"store {url.redacted!r}: no such schema or no event table "
                              f"{url.pg.schema}.{event_table()} (this command never creates "
                              "one)")
    try:
        service = MigrationService(open_application(url), destination or OfflineDestination(),
                                   worker_id=worker_id or "replay")
        service.event_count()  # a file that is not a store fails here, clearly
    except StoreUnavailable:
        raise  # its own code and a message without the password
    except Exception as exc:
        raise InvalidArgument(f"cannot open store {url.redacted!r}: {type(exc).__name__}: "
                              f"{_redact(str(exc), url)}") from exc
    return service


def _redact(text: str, url: Any) -> str:
    password = url.pg.password if url.pg is not None else ""
    return text.replace(password, "***") if password else text
