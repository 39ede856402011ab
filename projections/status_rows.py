"""The operator projection's folded rows, read through a plain DB-API connection (sqlite3 or
psycopg; no SQLAlchemy, no event class): what ``status`` answers from when the projection has
applied the whole log (infra/application/status_read.py).

Every read runs inside the caller's one read transaction, so the position checked and the rows
read are one snapshot of the store: rows and position commit together (view.py)."""
from __future__ import annotations

import json
from typing import Any

from .names import PREFIX, PROJECTION, SCHEMA_VERSION


class StatusRows:
    """``conn``: a DB-API connection in a read transaction; ``marker``: its parameter marker
    (``?`` or ``%s``); ``schema``: the tables' schema (PostgreSQL), else None;
    ``max_position``: the SQL of the log's highest notification id."""

    def __init__(self, conn: Any, marker: str, schema: str | None, max_position: str) -> None:
        self.conn, self.marker, self.max_position = conn, marker, max_position
        self.prefix = f'"{schema}".{PREFIX}' if schema else PREFIX

    def _one(self, sql: str, *params: Any) -> Any:
        cursor = self.conn.cursor()
        try:
            cursor.execute(sql.replace("?", self.marker), params)
            return cursor.fetchall()
        finally:
            cursor.close()

    def caught_up(self) -> bool:
        """The projection, in this code's table layout, has applied every event of the log
        (a store holds one application: exactly one tracking row of the projection)."""
        tracked = self._one(f"SELECT notification_id, schema_version FROM {self.prefix}tracking "
                            "WHERE projection = ?", PROJECTION)
        if len(tracked) != 1 or tracked[0][1] != SCHEMA_VERSION:
            return False
        (top,), = self._one(self.max_position)
        return bool(tracked[0][0] >= (top or 0))

    def folded(self, aggregate_id: str) -> tuple[int, dict[str, Any]] | None:
        """A key's or schedule's version and folded state (None: no such row)."""
        found = self._one(f"SELECT version, folded FROM {self.prefix}aggregates WHERE "
                          "aggregate_id = ? AND folded IS NOT NULL", aggregate_id)
        return (found[0][0], json.loads(found[0][1])) if found else None

    def migration(self, migration_id: str) -> tuple[int, dict[str, Any]] | None:
        """A rollback migration's version and folded state (None: no such row)."""
        found = self._one(f"SELECT version, folded FROM {self.prefix}migrations WHERE "
                          "migration_id = ?", migration_id)
        return (found[0][0], json.loads(found[0][1])) if found else None
