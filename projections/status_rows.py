"""The operator projection's folded rows, read through a plain DB-API connection (sqlite3 or
psycopg; no SQLAlchemy, no event class): what ``status`` answers from when every row it reads
is at its aggregate's latest version in the log (infra/application/status_read.py checks it,
in the same read transaction)."""
from __future__ import annotations

import json
from typing import Any

from .names import PREFIX, PROJECTION, SCHEMA_VERSION


class StatusRows:
    """``conn``: a DB-API connection in a read transaction; ``marker``: its parameter marker
    (``?`` or ``%s``); ``schema``: the tables' schema (PostgreSQL), else None."""

    def __init__(self, conn: Any, marker: str, schema: str | None) -> None:
        self.conn, self.marker = conn, marker
        self.prefix = f'"{schema}".{PREFIX}' if schema else PREFIX

    def _one(self, sql: str, *params: Any) -> Any:
        cursor = self.conn.cursor()
        try:
            cursor.execute(sql.replace("?", self.marker), params)
            return cursor.fetchall()
        finally:
            cursor.close()

    def current_layout(self) -> bool:
        """The projection's tables are in this code's layout (a store holds one application:
        exactly one tracking row of the projection)."""
        tracked = self._one(f"SELECT schema_version FROM {self.prefix}tracking WHERE "
                            "projection = ?", PROJECTION)
        return len(tracked) == 1 and tracked[0][0] == SCHEMA_VERSION

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
