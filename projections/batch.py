"""One batch of the operator views, staged in memory before its one transaction (view.py):
the migrations it folded, the aggregates it registered, its audit rows and its count changes;
how a batch's rows reach the tables (``RowWriter``); and how its rows are shaped: each audit
row's floor, a migration's row from its folded state, and back.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table, bindparam, update
from sqlalchemy.engine import Connection

from schedfence.domain.rollback.decide import due
from schedfence.domain.rollback.aggregate import MigrationState
from schedfence.domain.read_shape import read_shape


@dataclass
class FoldedMigration:
    state: MigrationState
    created_us: int
    created_position: int
    updated_us: int = 0
    last_position: int = 0
    version: int = 0


@dataclass
class Batch:
    application_name: str
    base: int  # the tracked position this batch builds on (0: nothing applied yet)
    position: int = 0
    applied: int = 0
    mono_us: int = 0  # running maximum of event times through ``position``
    top_floor_us: int | None = None  # the highest stored floor_us (the last row's), if any
    audit_rows: list[dict[str, Any]] = field(default_factory=list)
    aggregates: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    new_aggregates: dict[str, dict[str, Any]] = field(default_factory=dict)
    changed_aggregates: set[str] = field(default_factory=set)  # stored rows folded anew
    migrations: dict[str, FoldedMigration | None] = field(default_factory=dict)
    stored_migrations: set[str] = field(default_factory=set)
    dirty: set[str] = field(default_factory=set)
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (namespace, phase)
    start_lag: Counter[str] = field(default_factory=Counter)  # tables.start_lag's increments


class RowWriter:
    """How a batch's rows reach the tables, inside the batch's transaction: SQLAlchemy's
    executemany, on any dialect. A store may supply a faster one (COPY on PostgreSQL).
    ``rows``: dicts with the same keys, which are the columns written."""

    def insert(self, conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
        conn.execute(table.insert(), rows)

    def replace(self, conn: Connection, table: Table, key: str,
                rows: list[dict[str, Any]]) -> None:
        """Overwrite the stored rows that have these ``key`` values with ``rows``."""
        values: dict[str, Any] = {k: bindparam(k) for k in rows[0] if k != key}
        conn.execute(update(table).where(table.c[key] == bindparam("b_key")).values(values),
                     [{("b_key" if k == key else k): v for k, v in r.items()} for r in rows])


def set_floors(rows: list[dict[str, Any]]) -> None:
    """Each audit row's ``floor_us``: the least event time from it to the batch's end (see
    tables.py; earlier stored rows are lowered to the batch's least when they exceed it)."""
    if rows:
        floor = rows[-1]["ts_us"]
        for row in reversed(rows):
            floor = row["floor_us"] = min(floor, row["ts_us"])


def migration_state(row: Any) -> MigrationState:
    """The folded state a migration's row holds (``migration_row``'s ``folded``)."""
    return MigrationState(**json.loads(row["folded"]))


def folded_from_row(row: Any) -> FoldedMigration:
    return FoldedMigration(migration_state(row), row["created_us"], row["created_position"],
                           row["updated_us"], row["last_position"], row["version"])


def migration_row(migration_id: str, f: FoldedMigration | None) -> dict[str, Any]:
    """The migration's read shape, where and when it changed, and the whole folded state (and
    the domain's due class of it): no field is derived here."""
    assert f is not None, migration_id  # dirty: folded in this batch
    s = f.state
    row = read_shape(s)
    row.pop("migration_id")
    return dict(row, migration_id=migration_id, last_answer=(s.last_answer or {}).get("kind"),
                created_us=f.created_us, updated_us=f.updated_us,
                created_position=f.created_position, last_position=f.last_position,
                version=f.version, epoch=s.epoch, due=due(s), job_id=s.job_id,
                # Flat fields: no asdict copy. Keys in the state's own order (since v4): the
                # documents read from it (status_read.py) print as the log's do.
                folded=json.dumps(vars(s)))
