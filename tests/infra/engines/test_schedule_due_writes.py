"""The due index's writes on each store. The settle (PostgreSQL writes a batch in one
statement, other stores a row at a time): a decision lands only over a row of its version or
older, only the holder's lease is given back, and rows are locked in id order, as every other
writer locks them (the sweep's mark, a release), so two writers never wait on each other in a
circle. The take (PostgreSQL updates the rows it locked by their address): it passes over
rows another taker holds, and leases what it returns."""
from __future__ import annotations

import threading
import uuid
from datetime import datetime, timezone

from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from schedfence.infra.engines.schedule_due import ScheduleDue, due_rows
from schedfence.projections.records import to_us


def rows(due: ScheduleDue) -> dict[str, tuple]:
    with due.engine.connect() as conn:
        c = due_rows.c
        return {r[0]: tuple(r[1:]) for r in conn.execute(
            select(c.aggregate_id, c.version, c.due_us, c.holder, c.lease_us))}


def put(due: ScheduleDue, *values: tuple[str, int, int | None, str, int]) -> None:
    due.sweep()  # the table
    with due.engine.begin() as conn:
        conn.execute(due_rows.insert(), [dict(zip(
            ("aggregate_id", "version", "due_us", "holder", "lease_us"), v)) for v in values])


def test_a_settle_lands_over_older_rows_only_and_gives_back_the_holders_leases(store_url):
    with open_service(store_url, SimulatedDestination()) as svc:
        due = ScheduleDue(svc.views.engine, svc.app.recorder)
        a, b, c, d = (str(uuid.uuid4()) for _ in range(4))
        put(due, (a, 3, 0, "A", 99), (b, 5, 0, "A", 99), (c, 2, 0, "B", 99), (d, 1, 0, "A", 9))
        due.settle([(b, 4, 400), (a, 3, 300), (c, 2, None), (d, 2, None)], "A")
        assert rows(due) == {
            a: (3, 300, "A", 0),  # its own version: decided
            b: (5, 0, "A", 0),  # newer than the decision (a change the pass missed): due still
            c: (2, None, "B", 99),  # decided (not due until it changes); B's lease kept
            d: (2, None, "A", 0)}


def test_a_settle_locks_its_rows_in_id_order_whatever_order_they_are_stored_in(pg_store):
    """Stored highest id first, so a scan in the table's order meets it first: with a second
    row held elsewhere, the settle must already hold the first id's row while it waits."""
    with open_service(pg_store, SimulatedDestination()) as svc:
        due = ScheduleDue(svc.views.engine, svc.app.recorder)
        low, high = sorted(str(uuid.uuid4()) for _ in range(2))
        put(due, (high, 1, 0, "A", 99))
        put(due, (low, 1, 0, "A", 99))
        with svc.views.engine.connect() as other, svc.views.engine.connect() as probe:
            other.begin()
            other.execute(select(due_rows.c.version).where(
                due_rows.c.aggregate_id == high).with_for_update())
            settling = threading.Thread(target=due.settle,
                                        args=([(high, 2, 20), (low, 2, 10)], "A"))
            settling.start()
            held_low = _held_elsewhere(probe, low)  # by the settle, waiting on the high one
            other.rollback()
        settling.join(timeout=10)
        assert held_low
        assert rows(due)[low][:2] == (2, 10) and rows(due)[high][:2] == (2, 20)


def _held_elsewhere(conn, aggregate_id: str) -> bool:
    """Whether another transaction comes to hold the row within 5 s (a NOWAIT lock fails)."""
    for _ in range(100):
        conn.begin()
        try:
            conn.execute(select(due_rows.c.version).where(
                due_rows.c.aggregate_id == aggregate_id).with_for_update(nowait=True))
        except OperationalError:  # LockNotAvailable
            conn.rollback()
            return True
        conn.rollback()
        threading.Event().wait(0.05)
    return False


def test_a_take_passes_over_rows_another_taker_holds_and_leases_what_it_returns(pg_store):
    with open_service(pg_store, SimulatedDestination()) as svc:
        due = ScheduleDue(svc.views.engine, svc.app.recorder, lease_seconds=60)
        now = datetime.now(timezone.utc)
        ids = sorted(str(uuid.uuid4()) for _ in range(4))
        put(due, *((a, 1, to_us(now) - 10 + i, "", 0) for i, a in enumerate(ids)))
        with svc.views.engine.connect() as other:  # a concurrent take, mid-statement
            other.begin()
            other.execute(select(due_rows.c.version).where(
                due_rows.c.aggregate_id.in_(ids[:2])).with_for_update())
            taken = due.take(now, "A", 3)
            other.rollback()
        assert sorted(taken) == ids[2:]
        leases = {a: (holder, lease_us > to_us(now)) for a, (_, _, holder, lease_us)
                  in rows(due).items()}
        assert leases == {ids[0]: ("", False), ids[1]: ("", False),
                          ids[2]: ("A", True), ids[3]: ("A", True)}
        assert sorted(due.take(now, "B", 3)) == ids[:2]  # A's leases held: the rest
