"""What the Prometheus metrics read from the operator projection (rendered by
infra/adapters/observability/metrics.py).

Every number here is counted from events the projection applied, in its own tables, so it is
exact after a restart, the same from every process that reads the store, and rebuilt with the
projection. Nothing is kept in process memory.

- ``totals``: migrations started, completed, parked and aborted per direction, as counts of
  the events that mark them (below), found through the audit table's topic index.
- ``by_state``: rollback migrations per (namespace, state): the maintained ``counts`` table.
- ``attempts``: the worker attempts recorded on rollback migrations (each migration's
  ``attempts``, the highest attempt number its events carry), summed.
- ``due``: open rollback migrations per due class (``domain.decisions.due``).
- ``forward_ids``: every forward migration (their states are folded by the caller: the
  projection does not fold forward migrations).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from schedfence.domain.direction import FORWARD, ROLLBACK
from schedfence.domain.forward.aggregate import ForwardMigration
from schedfence.domain.rollback.aggregate import Migration

from . import tables as t
from .records import to_us


# (direction: domain/direction.py, counter, the event that counts one). A migration starts
# with its creation; it completes when the source is closed (rollback) or released (forward);
# ``parked`` counts every park (a migration re-armed after a park and parked again counts
# twice).
COUNTED: tuple[tuple[str, str, type], ...] = (
    (ROLLBACK, "started", Migration.RequestIdAssigned),  # v1 (legacy) records share it
    (ROLLBACK, "completed", Migration.SourceClosed),
    (ROLLBACK, "parked", Migration.MigrationParked),
    (ROLLBACK, "aborted", Migration.MigrationAborted),
    (FORWARD, "started", ForwardMigration.ForwardRequested),
    (FORWARD, "completed", ForwardMigration.ForwardCompleted),
    (FORWARD, "parked", ForwardMigration.ForwardParked),
    (FORWARD, "aborted", ForwardMigration.ForwardAborted),
)
COUNTERS = ("started", "completed", "parked", "aborted")


@dataclass(frozen=True)
class MetricsSnapshot:
    log_position: int  # the highest log position (PostgreSQL: an upper bound, see event_count)
    projected_through: int  # the position the numbers below are exact through
    lag_events: int  # positions the projection was behind the log when asked
    lag_seconds: float  # age of the oldest event it had not applied then (0: none)
    stopped: str | None  # the error code that stopped the projection, if it is stopped
    totals: dict[tuple[str, str], int] = field(default_factory=dict)  # (direction, counter)
    by_state: dict[tuple[str, str], int] = field(default_factory=dict)  # (namespace, state)
    attempts: int = 0
    due: dict[str, int] = field(default_factory=dict)
    forward_ids: list[str] = field(default_factory=list)
    start_lag: dict[str, int] = field(default_factory=dict)  # tables.start_lag's rows


def _topic(cls: type) -> str:
    topic: str = getattr(cls, "TOPIC")
    return topic


def read(conn: Connection) -> dict[str, Any]:
    """The projection's numbers, read in one connection (the snapshot's table fields)."""
    topics = {_topic(cls): (direction, counter) for direction, counter, cls in COUNTED}
    a = t.audit.c
    found = dict(conn.execute(select(a.topic, func.count()).where(a.topic.in_(sorted(topics)))
                              .group_by(a.topic)).tuples().all())
    totals = {key: found.get(topic, 0) for topic, key in topics.items()}
    by_state = {(ns, state): n for ns, state, n in conn.execute(select(t.counts)).all()}
    m = t.migrations.c
    attempts = conn.execute(select(func.coalesce(func.sum(m.attempts), 0))).scalar() or 0
    due = dict(conn.execute(select(m.due, func.count()).where(m.due != "closed")
                            .group_by(m.due)).tuples().all())
    forward = conn.execute(select(a.aggregate_id).where(
        a.topic == _topic(ForwardMigration.ForwardRequested)).order_by(a.position)).scalars()
    start_lag = dict(conn.execute(select(t.start_lag.c.bucket, t.start_lag.c.n)).tuples().all())
    return {"totals": totals, "by_state": by_state, "attempts": int(attempts), "due": due,
            "forward_ids": list(forward), "start_lag": start_lag}


def lag_seconds(app: Any, position: int, now: float) -> float:
    """How long the oldest event after ``position`` has waited (0.0: none is waiting; NaN:
    it cannot be decoded, so the projection will stop there and say so)."""
    notes = app.recorder.select_notifications(start=position, limit=1,
                                              inclusive_of_start=False)
    if not notes:
        return 0.0
    try:
        event = app.mapper.to_domain_event(notes[0])
    except Exception:  # noqa: BLE001 - the projector names it (``stopped``)
        return math.nan
    return max(now - to_us(event.timestamp) / 1e6, 0.0)
