"""A PostgreSQL store keeps one connection open, not four: the event store's pool grows on
demand (up to 12) and each CLI command, service or test that opens a store costs the server
one connection while idle, so the suite runs beside other work within max_connections."""
from __future__ import annotations

import time

from schedfence.infra.application.service import open_service


def test_an_open_store_holds_one_connection_and_grows_on_demand(pg_store: str) -> None:
    with open_service(pg_store, "sim") as svc:
        svc.create_schedule("ns", "a")
        pool = svc.app.factory.datastore.pool
        pool.wait(timeout=30)  # its minimum opened
        assert (pool.min_size, pool.max_size) == (1, 12)
        time.sleep(0.2)
        # What the create used at once (a write takes a second connection), not four.
        assert pool.get_stats()["pool_size"] <= 2
