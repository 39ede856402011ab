"""The operator projection's folded rows, read through a plain DB-API connection (sqlite3 or
psycopg; no SQLAlchemy, no event class): what ``status`` answers from when every row it reads
is at its aggregate's latest version in the log (infra/application/status_read.py checks it,
in the same read transaction)."""
from __future__ import annotations

import json
from typing import Any

from .names import PREFIX, PROJECTION, SCHEMA_VERSION

# ScheduleKey.Created's stored topic (domain/topics.py), named here so that no event class is
# imported; tests/projections hold them equal.
KEY_CREATED = "schedfence.schedule_key.Created"
CHUNK = 500  # ids per IN list


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

    def tracked_position(self) -> int:
        """The last position of the log the projection applied (its tracking row's)."""
        return int(self._one(f"SELECT notification_id FROM {self.prefix}tracking WHERE "
                             "projection = ?", PROJECTION)[0][0])

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

    def key_page(self, namespace: str | None, after_position: int | None,
                 limit: int) -> list[tuple[int, str, str]]:
        """Up to ``limit`` keys' creations (position, namespace, schedule id) in log order,
        after ``after_position``, in ``namespace`` if given (queries.schedule_keys' rows)."""
        sql = f"SELECT position, namespace, schedule_id FROM {self.prefix}audit WHERE topic = ?"
        params: list[Any] = [KEY_CREATED]
        if namespace is not None:
            sql, params = sql + " AND namespace = ?", params + [namespace]
        if after_position is not None:
            sql, params = sql + " AND position > ?", params + [after_position]
        rows = self._one(sql + " ORDER BY position LIMIT ?", *params, limit)
        return [(int(p), ns, sid) for p, ns, sid in rows]

    def folded_many(self, aggregate_ids: list[str]) -> dict[str, tuple[int, dict[str, Any]]]:
        """``folded`` for many rows at once: each found id's version and folded state."""
        return {aid: (version, json.loads(folded)) for aid, version, folded in self._many(
            f"SELECT aggregate_id, version, folded FROM {self.prefix}aggregates "
            "WHERE folded IS NOT NULL AND aggregate_id IN ", aggregate_ids)}

    def migration_states(self, migration_ids: list[str]) -> dict[str, tuple[int, str]]:
        """Many rollback migrations at once: each found id's version and state."""
        return {mid: (version, state) for mid, version, state in self._many(
            f"SELECT migration_id, version, state FROM {self.prefix}migrations "
            "WHERE migration_id IN ", migration_ids)}

    def _many(self, sql: str, ids: list[str]) -> list[tuple[Any, ...]]:
        found: list[tuple[Any, ...]] = []
        for at in range(0, len(ids), CHUNK):
            chunk = ids[at:at + CHUNK]
            found += self._one(sql + f"({','.join('?' * len(chunk))})", *chunk)
        return found
