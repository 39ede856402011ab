"""Due work: which migrations a worker should attempt next, found without scanning the log.

The projection's ``schedfence_proj_migrations`` table (indexed by state) says which migrations
are open; a small ``schedfence_work_backoff`` table, shared by every worker process on the
store, holds when a migration that could not progress (destination unavailable, a foreign run
still running, another worker's start still in flight) may be tried again. Backoff is only a
hint for fairness and load: every attempt reloads the aggregate and the store's optimistic
concurrency decides every race, so a stale or lost backoff row can cost a wasted attempt,
never a wrong step.
"""
from __future__ import annotations

import random
import time
from typing import Any, Callable
from uuid import UUID

from sqlalchemy import (BigInteger, Column, Integer, MetaData, String, Table, and_, delete,
                        or_, select, update)
from sqlalchemy.exc import IntegrityError

from schedfence.domain.rollback.phases import CLOSED_PHASES, OPEN_PHASES
from schedfence.projections.service_views import OperatorViews
from schedfence.projections.tables import migrations

from schedfence.infra.pacing import doubling, retry_call
from schedfence.infra.engines.lease import now_us
from schedfence.infra.engines.stalls import Stalls
from schedfence.infra.adapters.store.sql import SideTables

BASE_BACKOFF = 0.5  # seconds after the first failure; doubles per failure
MAX_BACKOFF = 60.0

_metadata = MetaData()
backoff = Table(
    "schedfence_work_backoff", _metadata,
    Column("migration_id", String(36), primary_key=True),
    Column("not_before_us", BigInteger, nullable=False),
    Column("failures", Integer, nullable=False),
    Column("reason", String(40), nullable=False),
)


def backoff_seconds(failures: int, rng: random.Random | None = None) -> float:
    """Exponential, capped, with jitter so that workers that failed together spread out."""
    delay = doubling(BASE_BACKOFF, MAX_BACKOFF, failures)
    return delay * (0.5 + (rng or random).random() / 2)


class DueWork(SideTables):
    """The due-work index of one store: its operator views' migrations table (caught up
    before each read) and the backoff table beside it. ``epoch``: the store's epoch now."""

    metadata = _metadata

    def __init__(self, views: OperatorViews, epoch: Callable[[], int]) -> None:
        self.views, self.epoch = views, epoch
        self.engine = views.engine  # an attribute, as SideTables reads it (never a callback)
        self.stalls = Stalls(self.engine)  # attempts that keep failing (infra/engines/stalls.py)

    def open_ids(self) -> list[UUID]:
        """Every open migration, oldest change first (the log is read only to catch up)."""
        self.views.catch_up()
        query = select(migrations.c.migration_id).where(
            migrations.c.state.in_(OPEN_PHASES)
        ).order_by(migrations.c.last_position)
        with self.engine.connect() as conn:
            return [UUID(r[0]) for r in conn.execute(query)]

    def due(self, limit: int = 100) -> list[tuple[UUID, bool]]:
        """Open migrations a worker may act on now, least recently changed first, each with
        whether it has a backoff row (so a worker clears only rows that exist)."""
        self._ensure_table()
        self.views.catch_up()
        # The domain's due class of each migration's state (domain.decisions.due): due now,
        # or only once a failover was recorded after the migration's epoch.
        workable = or_(migrations.c.due == "now",
                       and_(migrations.c.due == "after_failover",
                            migrations.c.epoch < self.epoch()))
        ready = or_(backoff.c.not_before_us.is_(None), backoff.c.not_before_us <= now_us())
        query = (select(migrations.c.migration_id, backoff.c.failures)
                 .select_from(migrations.outerjoin(
                     backoff, backoff.c.migration_id == migrations.c.migration_id))
                 .where(workable, ready).order_by(migrations.c.last_position).limit(limit))
        with self.engine.connect() as conn:
            return [(UUID(r[0]), r[1] is not None) for r in conn.execute(query)]

    def back_off(self, migration_id: UUID, reason: str) -> float:
        """Record one more failure to progress; returns the delay chosen (0 when three tries
        each lost the row's insert to another worker)."""
        self._ensure_table()
        try:  # insert-or-update without dialect-specific upserts
            return retry_call(lambda: self._count_failure(str(migration_id), reason),
                              attempts=3, retry_on=IntegrityError)
        except IntegrityError:
            return 0.0

    def _count_failure(self, mid: str, reason: str) -> float:
        """One more failure in one transaction; IntegrityError when another worker inserted
        the row first (trying again reads its count)."""
        with self._writing() as conn:
            row = conn.execute(select(backoff.c.failures).where(
                backoff.c.migration_id == mid)).first()
            failures: int = (row[0] if row else 0) + 1
            not_before_us = now_us() + int(backoff_seconds(failures) * 1e6)
            values = {"not_before_us": not_before_us, "failures": failures,
                      "reason": reason[:40]}
            if row is None:
                conn.execute(backoff.insert().values(migration_id=mid, **values))
            else:
                conn.execute(update(backoff).where(
                    backoff.c.migration_id == mid).values(**values))
            return not_before_us / 1e6 - time.time()

    def clear(self, migration_id: UUID) -> None:
        """The migration progressed: it is due again at once."""
        self._ensure_table()
        with self._writing() as conn:
            conn.execute(delete(backoff).where(backoff.c.migration_id == str(migration_id)))

    def prune(self) -> int:
        """Drop backoff rows of migrations that are no longer open."""
        self._ensure_table()
        self.views.catch_up()
        closed = select(migrations.c.migration_id).where(
            migrations.c.state.in_(CLOSED_PHASES))
        with self._writing() as conn:
            return conn.execute(delete(backoff).where(
                backoff.c.migration_id.in_(closed))).rowcount or 0
