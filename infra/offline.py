"""The offline service: an existing store opened with no destination and nothing created.

Replay and the CLI's commands that only read or change what is in the store use it: a missing
SQLite file or PostgreSQL schema is refused (``invalid_argument``) instead of created, and the
destination refuses every call, so such a command can never reach one.
"""
from __future__ import annotations

import os
from typing import Any

from schedfence.domain.errors import InvalidArgument, Unavailable

from schedfence.infra.service import MigrationService
from schedfence.infra.store.eventstore import FenceApplication, open_application, parse_store_url
from schedfence.infra.store.pg import PgTarget, StoreUnavailable


class OfflineDestination:
    """A destination that refuses every call: replay must never need one."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise Unavailable("no destination is configured for replay (offline)")

    start_workflow = describe = _refuse


def open_offline(store: str, worker_id: str | None = None, destination: Any = None) -> Any:
    """A service over an existing ``store`` that never reaches a destination and never creates
    the store: replay, and the CLI's commands that only read or change what is there."""
    url = parse_store_url(store)
    if url.kind == "sqlite-file" and not os.path.isfile(url.path):
        raise InvalidArgument(f"store {store!r}: no such file (this command never creates "
                              "one; a store is created by `schedule create` or a worker)")
    if url.pg is not None:
        _require_pg_store(url.pg)  # opening would create the schema and the events table
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


def _require_pg_store(target: PgTarget) -> None:
    """The schema must exist and hold the event table: replay creates neither."""
    table = f"{FenceApplication.name.lower()}_events"  # eventsourcing.postgres's table name
    with target.connect() as conn:
        found = conn.execute("SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                             "AND table_name = %s", (target.schema, table)).fetchone()
    if found is None:
        raise InvalidArgument(f"store {target.redacted!r}: no such schema or no event table "
                              f"{target.schema}.{table} (this command never creates one)")


def _redact(text: str, url: Any) -> str:
    password = url.pg.password if url.pg is not None else ""
    return text.replace(password, "***") if password else text
