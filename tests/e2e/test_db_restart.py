"""Issue 10, item 1 as reported: the PostgreSQL server under a running worker pool restarts
(twice, each time while the worker holds connections) while rollbacks keep arriving. Every
thread must live through it (thread i serves only the ids hashing to i, so all migrations
ending means no thread died) and the process keeps running; each failed pass is one error
line, never a traceback."""
from __future__ import annotations

import time
from pathlib import Path

from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.shared_sim import open_shared_sim
from tests.infra.engines.pool_helpers import (NS, _settled, _worker_process, assert_rode_it_out,
                                             pool_outcome, stop_all, worker_backends)
from tests.pg_cluster import private_cluster


def _retrying(call, *args) -> None:
    """The test's own writes, while the server may be coming back."""
    for _ in range(100):
        try:
            call(*args)
            return
        except Exception:  # noqa: BLE001 - store_unavailable while restarting
            time.sleep(0.1)
    call(*args)


def _worker_connections(cluster) -> int:
    """The worker process's connections to the store's database, as the server sees them."""
    import psycopg
    with psycopg.connect(cluster.url(), autocommit=True, connect_timeout=5) as conn:
        return worker_backends(conn, "fence")


def _worker_reconnected(cluster, timeout: float = 60) -> int:
    """The worker's connections, once it holds any: after a restart it comes back on its own
    schedule (its pool reconnects after a back-off), so the next restart waits for it."""
    deadline = time.monotonic() + timeout
    while not (held := _worker_connections(cluster)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return held


def test_a_worker_pool_survives_a_database_restart(tmp_path: Path) -> None:
    with private_cluster() as cluster:
        store = cluster.create_database("fence")
        sim_url = cluster.create_database("sim")
        dest = open_shared_sim(f"sim+{sim_url}")
        svc = open_service(store, dest, worker_id="admin")
        log = tmp_path / "worker.err"
        proc = _worker_process(store, sim_url, log, "--concurrency", "2", "--claim-grace", "1")
        sids = [f"s{i}" for i in range(30)]
        try:
            for wave in range(3):
                for k, sid in enumerate(sids[wave * 10:(wave + 1) * 10]):
                    if wave and k == 5:  # rollbacks arrive on both sides of the restart
                        # The worker holds pooled connections: the restart cuts them under it.
                        assert _worker_reconnected(cluster), "the restart would not reach it"
                        cluster.restart()
                    _retrying(svc.create_schedule, NS, sid)
                    _retrying(svc.rollback, NS, sid)
                if wave == 0:
                    _settled(svc, 10, timeout=60)  # the pool is up and working
            outcome = pool_outcome(svc, proc, sids, timeout=120)
        finally:
            code = stop_all(proc, svc, dest)
        # The simulated destination lives on the same server: a start cut off in its COMMIT
        # has an unknown outcome and may park (one cut off before COMMIT re-arms and completes).
        assert_rode_it_out(outcome, code, log.read_text(), len(sids), unknown_starts=True)
