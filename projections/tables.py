"""The operator read models' tables (SQLAlchemy Core, so SQLite and PostgreSQL share one DDL).

Every table is prefixed ``schedfence_proj_`` and lives in the event store's own database. Times
are integer microseconds since the epoch (UTC): exact, indexable and the same on every dialect.
Every index that a query filters on ends in ``position`` so that "filter, order by position,
limit N" reads N index entries instead of sorting the whole match.

Event times are client clocks, so they are only *nearly* ordered by position. ``mono_us``
(running maximum of the times up to a position) and ``floor_us`` (minimum of the times from a
position on) are both non-decreasing in position and bracket every event's own time
(floor <= ts <= mono), so a time range becomes an exact, seekable position range: an event with
``ts >= a`` lies at or after the first position with ``mono >= a``, and one with ``ts <= b`` at
or before the last position with ``floor <= b``.
"""
from __future__ import annotations

from typing import Iterator, Sequence, TypeVar

from sqlalchemy import (BigInteger, Boolean, Column, Index, Integer, MetaData, String, Table,
                        Text)

# Ids are validated up to 1000 characters (domain.ids), and indexed.
Id = String(1000)

# SQLite makes only an INTEGER PRIMARY KEY the rowid: one B-tree instead of table + index.
Position = BigInteger().with_variant(Integer(), "sqlite")

from .names import PREFIX as PREFIX, SCHEMA_VERSION as SCHEMA_VERSION  # bump it on any change

metadata = MetaData()

# One row per (projection, application): the position applied through, and the table layout
# it was built with. Single-row tracking, as eventsourcing's own SINGLE_ROW_TRACKING.
tracking = Table(
    f"{PREFIX}tracking", metadata,
    Column("projection", String(100), primary_key=True),
    Column("application_name", String(100), primary_key=True),
    Column("notification_id", BigInteger, nullable=False),
    Column("schema_version", Integer, nullable=False),
)

# Which schedule every aggregate belongs to: later schedule events do not carry their key.
# v4: a key's and a schedule's state as its aggregate's reducer folds it (``folded``: the
# JSON of KeyState or ScheduleState) at ``version``, what ``status`` answers from.
aggregates = Table(
    f"{PREFIX}aggregates", metadata,
    Column("aggregate_id", String(36), primary_key=True),
    Column("kind", String(20), nullable=False),  # key | schedule | forward | other
    Column("namespace", Id),
    Column("schedule_id", Id),
    Column("incarnation", Integer),
    Column("version", Integer),
    Column("folded", Text),
    Column("job_id", Id),  # v8: a forward migration's batch job (audit --job)
    Index(f"{PREFIX}aggregates_key", "namespace", "schedule_id"),
)

# Every event of the log, with the columns audit queries filter on.
audit = Table(
    f"{PREFIX}audit", metadata,
    Column("position", Position, primary_key=True, autoincrement=False),
    Column("ts_us", BigInteger, nullable=False),
    Column("mono_us", BigInteger, nullable=False),
    Column("floor_us", BigInteger, nullable=False),
    Column("namespace", Id),
    Column("schedule_id", Id),
    Column("aggregate", String(20), nullable=False),
    Column("aggregate_id", String(36), nullable=False),
    Column("version", Integer, nullable=False),
    Column("migration_id", String(36)),
    Column("request_id", Id),
    Column("actor", Id),
    Column("event_type", String(100), nullable=False),
    Column("topic", String(200), nullable=False),
    Index(f"{PREFIX}audit_schedule", "namespace", "schedule_id", "position"),
    Index(f"{PREFIX}audit_request", "request_id", "position"),
    Index(f"{PREFIX}audit_migration", "migration_id", "position"),
    Index(f"{PREFIX}audit_actor", "actor", "position"),
    Index(f"{PREFIX}audit_mono", "mono_us", "position"),
    Index(f"{PREFIX}audit_floor", "floor_us", "position"),
    # v3: the metrics' counters count events of a few topics (projections/metrics.py).
    Index(f"{PREFIX}audit_topic", "topic", "position"),
)

# One row per migration: its state as folded by domain.migration.evolve_migration (``folded``
# holds the whole MigrationState; the other columns are copies of its fields, for indexes, and
# ``due``, the domain's due-work class of that state: domain.decisions.due).
# Its names are the read shape's (domain.migration.read_shape). v2 added ``epoch`` and ``due``
# and renamed ``origin`` and ``receipt`` to the read shape's names.
migrations = Table(
    f"{PREFIX}migrations", metadata,
    Column("migration_id", String(36), primary_key=True),
    Column("namespace", Id, nullable=False),
    Column("schedule_id", Id, nullable=False),
    Column("incarnation", Integer, nullable=False),
    Column("request_id", Id),
    Column("request_id_origin", String(20), nullable=False),
    Column("state", String(20), nullable=False),
    Column("claim_armed", Boolean, nullable=False),
    Column("starts_issued", Integer, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("last_answer", String(40)),
    Column("park_reason", String(40)),
    Column("park_detail", Text, nullable=False),
    Column("destination_first_run_id", Id),
    Column("last_worker", Id, nullable=False),
    Column("created_us", BigInteger, nullable=False),
    Column("updated_us", BigInteger, nullable=False),
    Column("created_position", BigInteger, nullable=False),
    Column("last_position", BigInteger, nullable=False),
    Column("version", Integer, nullable=False),
    Column("folded", Text, nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("due", String(20), nullable=False),
    Column("job_id", Id),  # v6: the batch job that requested it (audit --job)
    Index(f"{PREFIX}migrations_state", "state", "updated_us"),
    Index(f"{PREFIX}migrations_job", "job_id", "migration_id"),
    Index(f"{PREFIX}migrations_due", "due", "last_position"),
    Index(f"{PREFIX}migrations_key", "namespace", "schedule_id"),
)

# Migrations per (namespace, state), maintained incrementally; rows never hold 0.
counts = Table(
    f"{PREFIX}counts", metadata,
    Column("namespace", Id, primary_key=True),
    Column("state", String(20), primary_key=True),
    Column("n", BigInteger, nullable=False),
)

# Action starts of the source scheduler by lag (seconds from the nominal time to the
# ``ActionStarted`` event), per bucket (its upper bound, ``+Inf`` for the rest; counts are per
# bucket, not cumulative), and the row ``sum_ms``, the total lag in milliseconds; maintained
# incrementally. v5 added it.
start_lag = Table(
    f"{PREFIX}start_lag", metadata,
    Column("bucket", String(10), primary_key=True),
    Column("n", BigInteger, nullable=False),
)
START_LAG_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
LAG_SUM = "sum_ms"


def lag_bucket(seconds: float) -> str:
    """The bucket a start ``seconds`` late counts in."""
    return next((f"{b:g}" for b in START_LAG_BUCKETS if seconds <= b), "+Inf")


VIEW_TABLES = (aggregates, audit, migrations, counts, start_lag)


CHUNK = 500  # ids per IN (...) list: far below every dialect's parameter limit
_T = TypeVar("_T")


def chunks(items: Sequence[_T]) -> Iterator[Sequence[_T]]:
    """``items`` in order, in slices of at most CHUNK: one IN (...) list each."""
    for start in range(0, len(items), CHUNK):
        yield items[start:start + CHUNK]
