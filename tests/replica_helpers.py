"""Shared by the replication and failover tests: databases, logs, and their comparison."""
from __future__ import annotations

from typing import Any, Iterator

import psycopg
import pytest

from schedfence.infra.adapters.replication.standby import PG_TRACKING_TABLE, standby_recorder
from schedfence.infra.adapters.replication.follower import replicate
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.adapters.store.eventstore import open_application, parse_store_url
from tests import pgtools


def databases(*prefixes: str) -> Iterator[list[str]]:
    """Fresh databases (names) for a module, dropped at the end whatever happens."""
    pgtools.require_postgres()
    names: list[str] = []
    try:
        for prefix in prefixes:
            names.append(pgtools.create_database(prefix))
        yield names
    finally:
        for name in names:
            pgtools.drop_database(name)


def log(url: str) -> list[tuple]:
    """The whole log as (id, originator id, version, topic, state bytes), in order."""
    app = open_application(parse_store_url(url))
    try:
        return [(n.id, n.originator_id, n.originator_version, n.topic, bytes(n.state))
                for n in app.recorder.select_notifications(start=None, limit=10**9)]
    finally:
        app.close()


def events(url: str) -> list[tuple]:
    """The log without its notification ids: what must be identical on both sides."""
    return [row[1:] for row in log(url)]


def tracked(url: str) -> dict[str, int]:
    app = open_application(parse_store_url(url))
    try:
        return standby_recorder(app).tracked()
    finally:
        app.close()


def raw_position(url: str) -> int:
    """The follower's position read with plain SQL, so polling never races table creation."""
    target = parse_store_url(url).pg
    assert target is not None
    with target.connect() as conn:
        try:
            row = conn.execute(f'SELECT max(notification_id) FROM "{target.schema}".'
                               f'"{PG_TRACKING_TABLE}" WHERE application_name LIKE '
                               "'replica-of:%'").fetchone()
        except psycopg.errors.UndefinedTable:
            return 0
    return row[0] or 0 if row else 0


def boundaries(url: str) -> set[int]:
    """The source notification ids that end a transaction (PostgreSQL's xmin per row)."""
    target = parse_store_url(url).pg
    assert target is not None
    with target.connect() as conn:
        rows = conn.execute(f'SELECT notification_id, xmin::text FROM "{target.schema}".'
                            '"schedfence_events" ORDER BY notification_id').fetchall()
    return {nid for (nid, tx), after in zip(rows, rows[1:] + [(None, None)])
            if after[1] != tx}


def populate(url: str, count: int, prefix: str = "s", complete: bool = True,
             destination: Any = None) -> None:
    """``count`` schedules, each rolled back (and migrated if ``complete``): real events,
    accepted against ``destination`` (default: a simulator of its own)."""
    with open_service(url, destination or SimulatedDestination(), claim_grace=0) as svc:
        for i in range(count):
            svc.create_schedule("ns", f"{prefix}{i:03d}", notes=f"n{i}")
            svc.rollback("ns", f"{prefix}{i:03d}")
        if complete:
            svc.run_until_idle()


def bulk_schedules(url: str, count: int, per_save: int = 500) -> None:
    """Many schedule creations quickly (3 events each), ``per_save`` per transaction."""
    from schedfence.domain.source.schedule import Schedule
    from schedfence.domain.source.key import ScheduleKey

    app = open_application(parse_store_url(url))
    try:
        for start in range(0, count, per_save):
            aggregates = []
            for i in range(start, min(count, start + per_save)):
                key = ScheduleKey.create("bulk", f"b{i:06d}")
                schedule = Schedule.create("bulk", f"b{i:06d}", key.start_incarnation(),
                                           False, "")
                aggregates += [key, schedule]
            app.save(*aggregates)
    finally:
        app.close()


def require(condition: bool, message: str) -> None:
    if not condition:
        pytest.fail(message)


class CopyAt:
    """The active's crash hook: the standby's last copy is taken at one worker boundary."""

    def __init__(self, point: str, source: str, standby: str) -> None:
        self.point, self.source, self.standby, self.done = point, source, standby, False

    def __call__(self, at: str) -> None:
        if at == self.point and not self.done:
            replicate(self.source, self.standby)
            self.done = True
