"""Stalls: open migrations whose attempts keep failing, with their last error, in one small
table every worker process of the store writes and ``oncall`` reads (from any process).

A row is written when an attempt backs off or waits (``note``), with what it last ran into
(infra/engines/failures.py). ``since_us`` is when the current streak of failures began: a
later failure keeps it, unless the migration has had an event since the row's last failure
(it moved, and this is a new streak). A row is only a hint, never a decision: a reader trusts
it only while no event of the migration followed its last failure (``current``), so a row
left behind by a worker that died is never shown once the migration moved on. Rows of closed
migrations are pruned with the due-work index's (``prune``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable
from uuid import UUID

from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, delete, select
from sqlalchemy.exc import IntegrityError

from schedfence.infra.adapters.store.sql import SideTables
from schedfence.infra.engines.failures import Failure
from schedfence.infra.engines.lease import now_us
from schedfence.infra.pacing import retry_call

_metadata = MetaData()
stalls = Table(
    "schedfence_work_stalls", _metadata,
    Column("migration_id", String(36), primary_key=True),
    Column("direction", String(10), nullable=False),  # rollback | forward
    Column("since_us", BigInteger, nullable=False),  # the streak's first failure
    Column("at_us", BigInteger, nullable=False),  # its latest
    Column("failures", Integer, nullable=False),
    Column("step", String(40), nullable=False),
    Column("error", String(500)),
)


@dataclass(frozen=True)
class Stall:
    migration_id: str
    direction: str
    since_us: int
    at_us: int
    failures: int
    step: str
    error: str | None

    def current(self, last_event_us: int) -> bool:
        """Whether the streak still stands: no event of the migration after its last
        failure."""
        return self.at_us >= last_event_us

    def to_dict(self, now: int) -> dict[str, Any]:
        doc = asdict(self)
        doc["stalled_seconds"] = round(max(now - self.since_us, 0) / 1e6, 3)
        return doc


class Stalls(SideTables):
    """The stall table on ``engine`` (the operator views' database), created on first use."""

    metadata = _metadata

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def note(self, migration_id: UUID, direction: str, failure: Failure) -> None:
        """One more failed attempt (three lost inserts to other workers: given up, a hint)."""
        self._ensure_table()
        try:
            retry_call(lambda: self._note(str(migration_id), direction, failure), attempts=3,
                       retry_on=IntegrityError)
        except IntegrityError:
            pass

    def _note(self, mid: str, direction: str, failure: Failure) -> None:
        now = now_us()
        with self._writing() as conn:
            row = conn.execute(select(stalls.c.since_us, stalls.c.at_us, stalls.c.failures)
                               .where(stalls.c.migration_id == mid)).first()
            moved = failure.since_event is not None and row is not None and \
                row.at_us < int(failure.since_event.timestamp() * 1e6)
            values = {"direction": direction, "at_us": now, "step": failure.step[:40],
                      "error": failure.error,
                      "since_us": now if row is None or moved else row.since_us,
                      "failures": 1 if row is None or moved else row.failures + 1}
            if row is None:
                conn.execute(stalls.insert().values(migration_id=mid, **values))
            else:
                conn.execute(stalls.update().where(stalls.c.migration_id == mid)
                             .values(**values))

    def read(self, ids: Iterable[str] | None = None) -> dict[str, Stall]:
        """Every row (or those of ``ids``), by migration id."""
        self._ensure_table()
        query = select(stalls)
        if ids is not None:
            query = query.where(stalls.c.migration_id.in_(list(ids)))
        with self.engine.connect() as conn:
            return {r.migration_id: Stall(**r._mapping) for r in conn.execute(query)}

    def prune(self, keep: Iterable[UUID]) -> int:
        """Drop the rows of every migration not in ``keep`` (the open ones)."""
        self._ensure_table()
        open_ids = {str(m) for m in keep}
        with self._writing() as conn:
            gone = [m for m in conn.execute(select(stalls.c.migration_id)).scalars()
                    if m not in open_ids]
            for start in range(0, len(gone), 500):
                conn.execute(delete(stalls).where(
                    stalls.c.migration_id.in_(gone[start:start + 500])))
        return len(gone)

