"""Leases on due migrations, so workers in different processes do not load or start the same
migration at once (``schedfence worker`` pools; docs/protocol.md, "Leases").

A lease row (migration, holder, expiry) is taken for a whole batch in **one** statement: an
insert that, on a row already there, takes it over only if it expired or is the taker's own
(``INSERT ... ON CONFLICT DO UPDATE ... WHERE ... RETURNING`` on PostgreSQL and SQLite; on
PostgreSQL a concurrent taker waits for the row and then sees it held). Only the returned
ids are the taker's. The holder deletes its rows when the batch ends; a holder that died
leaves rows that expire after ``LEASE_SECONDS`` and are then taken over.

A lease is an efficiency device, never a safety one: every attempt still reloads and the
store's optimistic concurrency decides every race, and the claim grace still keeps a
reconcile away from another worker's start in flight. A lease that expires under a slow
batch costs a wasted attempt, never a second start.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any
from uuid import UUID

from sqlalchemy import BigInteger, Column, MetaData, String, Table, and_, delete, text

from schedfence.domain.errors import InvalidArgument
from schedfence.infra.adapters.store.sql import SideTables

LEASE_SECONDS = 30.0  # longer than a batch's worst case (its starts at once, 5 s deadline)
LEASE_ENV = "SCHEDFENCE_LEASE_SECONDS"  # overrides it (seconds, > 0)


def lease_seconds(env: Any = None) -> float:
    """``SCHEDFENCE_LEASE_SECONDS`` if set (a refusal names it when it is not a positive
    number of seconds), else ``LEASE_SECONDS``."""
    raw = (os.environ if env is None else env).get(LEASE_ENV)
    if raw is None or raw == "":
        return LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86_400:
        raise InvalidArgument(f"{LEASE_ENV} must be a number of seconds from 0 to 86400, "
                              f"not {raw[:40]!r}")
    return value

_metadata = MetaData()
lease = Table(
    "schedfence_work_lease", _metadata,
    Column("migration_id", String(36), primary_key=True),
    Column("holder", String(300), nullable=False),
    Column("expires_us", BigInteger, nullable=False),
)


def now_us() -> int:
    """The wall clock in microseconds: what lease and backoff expiries are kept in."""
    return int(time.time() * 1_000_000)


# One statement per dialect, with the batch's ids as one parameter (an array on PostgreSQL,
# a JSON list on SQLite), so it is compiled once: SQLAlchemy compiling a 50-row VALUES
# clause on every take cost 13 ms a batch (benchmarks/RESULTS.md, "Batched rollbacks").
_UPSERT = (f"ON CONFLICT (migration_id) DO UPDATE SET holder = excluded.holder, "
           f"expires_us = excluded.expires_us WHERE {lease.name}.expires_us < :now OR "
           f"{lease.name}.holder = excluded.holder RETURNING migration_id")
_TAKE = {
    True: text(f"INSERT INTO {lease.name} (migration_id, holder, expires_us) "
               f"SELECT unnest(CAST(:ids AS text[])), :holder, :expires {_UPSERT}"),
    # SQLite: "WHERE true" tells its parser the ON CONFLICT is the upsert's, not a join's.
    False: text(f"INSERT INTO {lease.name} (migration_id, holder, expires_us) "
                f"SELECT value, :holder, :expires FROM json_each(:ids) WHERE true {_UPSERT}"),
}


class Leases(SideTables):
    metadata = _metadata

    def __init__(self, engine: Any, seconds: float | None = None) -> None:
        self.engine = engine
        self.seconds = lease_seconds() if seconds is None else seconds

    def take(self, ids: list[UUID], holder: str) -> list[UUID]:
        """The ids of ``ids`` now leased to ``holder`` (free, expired, or its own already)."""
        if not ids:
            return []
        self._ensure_table()
        now = now_us()
        # One order for every take, and each id once: two takes of one batch in their own
        # orders locked each other's index entries (PostgreSQL: "deadlock detected"), and an
        # upsert may not touch one row twice.
        wanted = sorted({str(i) for i in ids})
        postgres = self.engine.dialect.name == "postgresql"
        with self._writing() as conn:
            taken = {r[0] for r in conn.execute(_TAKE[postgres], {
                "ids": wanted if postgres else json.dumps(wanted), "holder": holder,
                "expires": now + int(self.seconds * 1e6), "now": now})}
        return [i for i in dict.fromkeys(ids) if str(i) in taken]

    def release(self, ids: list[UUID], holder: str) -> None:
        """Give back ``holder``'s leases of ``ids`` (another's are left alone)."""
        if not ids:
            return
        self._ensure_table()
        with self._writing() as conn:
            conn.execute(delete(lease).where(and_(
                lease.c.migration_id.in_([str(i) for i in ids]), lease.c.holder == holder)))

    def held(self) -> list[tuple[str, str, float]]:
        """Every unexpired lease: (migration id, holder, seconds left)."""
        self._ensure_table()
        now = now_us()
        with self.engine.connect() as conn:
            rows = conn.execute(lease.select().where(lease.c.expires_us >= now))
            return [(r.migration_id, r.holder, (r.expires_us - now) / 1e6) for r in rows]
