"""The schedules' due index: which schedules a scheduler pass must look at, without loading
every schedule (a pass costs what is due, not the fleet's size).

One row per schedule aggregate (``schedfence_schedule_due``): ``due_us``, when a pass must
look at it next (the domain's ``scheduling.due``; NULL: not until it changes), ``version``,
the schedule version that time was decided on, and a lease (``holder``, ``lease_us``).

- **Kept from the log.** ``sweep`` catches the operator views up and reads, from their audit
  index, the schedule events after the last position swept: a schedule changed at a version
  above its row's is due at once (a command, a fence, another scheduler's step). The position
  swept is one shared row, moved only forward.
- **Kept by the pass that decided.** ``settle`` writes a schedule's next due time with the
  version it was decided on, only over a row of that version or older: a change the pass did
  not see stays due.
- **Leases.** ``take`` leases a bounded batch of due rows to one scheduler (PostgreSQL: ``FOR
  UPDATE SKIP LOCKED``, so concurrent takers get different rows; SQLite has one writer at a
  time). A lease is an efficiency device only: a lost or stolen lease costs a second look;
  the store's optimistic concurrency decides every step and an action start's request id is a
  function of (schedule, nominal time, origin), so the runner deduplicates a second start.
"""
from __future__ import annotations

import time
from datetime import datetime

from sqlalchemy import (BigInteger, Column, Index, Integer, MetaData, String, Table, and_,
                        func, select, text)

from schedfence.projections.service_views import OperatorViews
from schedfence.projections.tables import audit

from schedfence.infra.adapters.store.sql import SideTables

LEASE_SECONDS = 30.0  # longer than a batch's worst case

_metadata = MetaData()
due_rows = Table(
    "schedfence_schedule_due", _metadata,
    Column("aggregate_id", String(36), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("due_us", BigInteger),  # NULL: not due until the schedule changes
    Column("holder", String(300), nullable=False, default=""),
    Column("lease_us", BigInteger, nullable=False, default=0),
    Index("schedfence_schedule_due_at", "due_us"),
)
swept = Table(
    "schedfence_schedule_due_swept", _metadata,
    Column("name", String(20), primary_key=True),
    Column("position", BigInteger, nullable=False),
)

_MARK = text(
    f"INSERT INTO {due_rows.name} (aggregate_id, version, due_us, holder, lease_us) "
    "VALUES (:aggregate_id, :version, 0, '', 0) ON CONFLICT (aggregate_id) DO UPDATE SET "
    f"version = excluded.version, due_us = 0 WHERE {due_rows.name}.version < excluded.version")
_ADVANCE = text(
    f"INSERT INTO {swept.name} (name, position) VALUES ('audit', :position) ON CONFLICT (name) "
    f"DO UPDATE SET position = excluded.position WHERE {swept.name}.position < excluded.position")
_SETTLE = text(f"UPDATE {due_rows.name} SET due_us = :due, version = :version "
               "WHERE aggregate_id = :aggregate_id AND version <= :version")
_RELEASE = text(f"UPDATE {due_rows.name} SET holder = '', lease_us = 0 "
                "WHERE aggregate_id = :aggregate_id AND holder = :holder")
_TAKE = (f"UPDATE {due_rows.name} SET holder = :holder, lease_us = :lease "
         f"WHERE aggregate_id IN (SELECT aggregate_id FROM {due_rows.name} "
         "WHERE due_us <= :now AND (lease_us < :wall OR holder = :holder) "
         "ORDER BY due_us LIMIT :limit{lock}) RETURNING aggregate_id")
_TAKES = {True: text(_TAKE.format(lock=" FOR UPDATE SKIP LOCKED")),
          False: text(_TAKE.format(lock=""))}


def to_us(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000)


class ScheduleDue(SideTables):
    """The due index of one store, beside its operator views."""

    metadata = _metadata

    def __init__(self, views: OperatorViews, lease_seconds: float = LEASE_SECONDS) -> None:
        self.views, self.lease_seconds = views, lease_seconds
        self.engine = views.engine  # an attribute, as SideTables reads it

    def sweep(self) -> int:
        """Mark due at once every schedule changed since the last sweep; how many were."""
        self._ensure_table()
        self.views.catch_up()
        with self.engine.connect() as conn:
            row = conn.execute(select(swept.c.position).where(swept.c.name == "audit")).first()
            after = row[0] if row else 0
            until = conn.execute(select(audit.c.position).order_by(
                audit.c.position.desc()).limit(1)).scalar() or 0
        if until <= after:
            return 0
        query = (select(audit.c.aggregate_id, audit.c.version)
                 .where(and_(audit.c.position > after, audit.c.position <= until,
                             audit.c.aggregate == "schedule")))
        with self._writing() as conn:
            latest: dict[str, int] = {}
            for aggregate_id, version in conn.execute(query):
                latest[aggregate_id] = max(version, latest.get(aggregate_id, 0))
            if latest:
                conn.execute(_MARK, [{"aggregate_id": a, "version": v}
                                     for a, v in latest.items()])
            conn.execute(_ADVANCE, {"position": until})
        return len(latest)

    def take(self, now: datetime, holder: str, limit: int) -> list[str]:
        """Lease up to ``limit`` schedules due at ``now`` (earliest first) to ``holder``."""
        self._ensure_table()
        wall = int(time.time() * 1_000_000)
        postgres = self.engine.dialect.name == "postgresql"
        with self._writing() as conn:
            return [r[0] for r in conn.execute(_TAKES[postgres], {
                "holder": holder, "lease": wall + int(self.lease_seconds * 1e6),
                "now": to_us(now), "wall": wall, "limit": limit})]

    def settle(self, decided: list[tuple[str, int, int | None]], holder: str) -> None:
        """Each (aggregate id, version, next due in µs or None) as its pass decided it, over a
        row of that version or older; the holder's leases on them given back."""
        if not decided:
            return
        with self._writing() as conn:
            conn.execute(_SETTLE, [{"aggregate_id": a, "version": v, "due": d}
                                   for a, v, d in decided])
            conn.execute(_RELEASE, [{"aggregate_id": a, "holder": holder}
                                    for a, _, _ in decided])

    def release(self, ids: list[str], holder: str) -> None:
        """Give back ``holder``'s leases on ``ids``, their rows as they are."""
        if ids:
            with self._writing() as conn:
                conn.execute(_RELEASE, [{"aggregate_id": a, "holder": holder} for a in ids])

    def backlog(self, now: datetime) -> int:
        """Schedules due at ``now`` (the due-backlog gauge)."""
        self._ensure_table()
        with self.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(due_rows).where(
                due_rows.c.due_us <= to_us(now))).scalar() or 0

