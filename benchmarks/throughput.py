"""End-to-end rollbacks/s: admin request -> claim -> start -> receipt -> close, by P processes.

    .venv/bin/python benchmarks/throughput.py [--migrations N] [--runs K] [--procs 1,2,4]
                                              [--stores sqlite,postgres] [--quick]

Each of P worker processes takes its own share of the schedules and, for each, makes the admin
rollback and drives the migration to completion (``RollbackEngine.attempt``) against an in-memory
simulated destination of its own. The baseline, run side by side in the same script, is raw
driver transactions (psycopg on PostgreSQL, sqlite3 on SQLite) by the same number of processes,
inserting the same rows per migration in the same number of transactions into a table shaped
like eventsourcing's. Prints medians of K runs and the ratios the issue sets targets for.
Not a timed test: figures depend on the machine.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import machine, median, pg_store, sqlite_store  # noqa: E402

NS = "bench"


def _migrate_share(store: str, sids: list[str], start: Any, done: Any) -> None:
    """One worker process: rollback + drive each of its schedules to completion."""
    from schedfence.domain.ids import migration_aggregate_id
    from schedfence.infra.application.service import open_service
    from schedfence.infra.adapters.destination.simulator import InMemorySimState, SimulatedDestination
    # No per-call copy of the simulator's whole state: it would grow with the runs and
    # measure the simulator, not the store.
    dest = SimulatedDestination(InMemorySimState(rollback=False))
    svc = open_service(store, dest, worker_id=f"bench-{os.getpid()}")
    start.wait()
    t0 = time.perf_counter()
    for sid in sids:
        result = svc.rollback(NS, sid)
        svc.worker.attempt(migration_aggregate_id(NS, sid, result.request_id))
    done.put((time.perf_counter() - t0, os.getpid()))
    svc.close()


def _prepare(store: str, n: int) -> list[str]:
    from schedfence.infra.application.service import open_service
    sids = [f"s{i:06d}" for i in range(n)]
    with open_service(store, "sim") as svc:
        for sid in sids:
            svc.create_schedule(NS, sid)
    return sids


def _check(store: str, n: int) -> None:
    from schedfence.infra.application.service import open_service
    with open_service(store, "sim") as svc:
        by_state = svc.stats()["by_state"]
        assert by_state["completed"] == n, by_state


def _guarded(target: Any, *args: Any) -> None:
    """Run a share; report a failure to the parent instead of leaving it waiting."""
    done = args[-1]
    try:
        target(*args)
    except BaseException as exc:  # noqa: BLE001 - any failure must reach the parent
        done.put((None, f"{type(exc).__name__}: {exc}"))


def _cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat (0, 0 where absent)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


BUSY: list[float] = []  # machine CPU busy fraction of each _run_procs, in call order


def _run_procs(target: Any, args_for: Any, procs: int) -> float:
    """Start ``procs`` processes, release them together; wall time until the last finishes.
    Appends the machine's CPU busy fraction over that time to ``BUSY``."""
    ctx = mp.get_context("fork")
    start, done = ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=_guarded, args=(target, *args_for(i), start, done))
               for i in range(procs)]
    for w in workers:
        w.start()
    time.sleep(0.5)  # let every process open its connections before the clock starts
    busy0, total0 = _cpu_ticks()
    t0 = time.perf_counter()
    start.set()
    for _ in workers:
        took, who = done.get(timeout=3600)
        if took is None:
            raise SystemExit(f"a benchmark process failed: {who}")
    wall = time.perf_counter() - t0
    busy1, total1 = _cpu_ticks()
    BUSY.append((busy1 - busy0) / max(total1 - total0, 1))
    for w in workers:
        w.join()
    return wall


def fence_rate(kind: str, n: int, procs: int) -> float:
    holder = sqlite_store() if kind == "sqlite" else pg_store()
    with holder as store:
        sids = _prepare(store, n)
        wall = _run_procs(_migrate_share, lambda i: (store, sids[i::procs]), procs)
        _check(store, n)
    return n / wall


# -- the baseline: the same rows and transactions through the bare driver ---------------------
ROWS_PER_TX = (2, 2, 2, 2)  # rollback (fence + request id), claim + start issued, answer +
# receipt, close (source + migration): what the store appends per migration on the happy path
PAYLOAD = b'{"x":"' + b"y" * 300 + b'"}'  # about the size of one stored event


def _raw_share(kind: str, target: str, count: int, start: Any, done: Any) -> None:
    if kind == "sqlite":
        # WAL was set once when the table was made (_raw_table): switching the journal mode
        # needs the whole file, so two shares switching it at once failed "database is locked".
        conn: Any = sqlite3.connect(target, timeout=60, isolation_level=None)
        sql = "INSERT INTO raw_events (originator_id, originator_version, topic, state) " \
              "VALUES (?, ?, ?, ?)"
    else:
        import psycopg
        conn = psycopg.connect(target, autocommit=True)
        sql = "INSERT INTO raw_events (originator_id, originator_version, topic, state) " \
              "VALUES (%s, %s, %s, %s)"
    start.wait()
    t0 = time.perf_counter()
    for _ in range(count):
        oid = uuid.uuid4()
        for version, rows in enumerate(ROWS_PER_TX):
            _raw_tx(kind, conn, sql, [(str(oid), version * 2 + r, "t", PAYLOAD)
                                      for r in range(rows)])
    done.put((time.perf_counter() - t0, os.getpid()))
    conn.close()


def _raw_tx(kind: str, conn: Any, sql: str, rows: list[tuple]) -> None:
    if kind == "sqlite":
        conn.execute("BEGIN")
        conn.executemany(sql, rows)
        conn.execute("COMMIT")
    else:
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(sql, rows)


def raw_rate(kind: str, n: int, procs: int) -> float:
    holder = sqlite_store() if kind == "sqlite" else pg_store()
    with holder as store:
        target = _raw_table(kind, store)
        wall = _run_procs(_raw_share, lambda i: (kind, target, len(range(i, n, procs))), procs)
    return n / wall


def _raw_table(kind: str, store: str) -> str:
    ddl = ("CREATE TABLE raw_events (originator_id {uuid} NOT NULL, originator_version "
           "bigint NOT NULL, topic text NOT NULL, state {blob}, notification_id {serial}, "
           "PRIMARY KEY (originator_id, originator_version))")
    if kind == "sqlite":
        path = store[len("sqlite:///"):]
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA journal_mode=WAL")  # persistent: every share writes in WAL
            conn.execute(ddl.format(uuid="text", blob="blob", serial="integer"))
        return path
    import psycopg

    from schedfence.infra.adapters.store.pg import parse_pg_url
    t = parse_pg_url(store)
    t.ensure_schema()
    dsn = f"host={t.host} port={t.port} user={t.user} dbname={t.dbname} " \
          f"options=-csearch_path={t.schema}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(ddl.format(uuid="uuid", blob="bytea", serial="bigserial"))
    return dsn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--migrations", type=int, default=600)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--procs", default="1,2,4")
    ap.add_argument("--stores", default="sqlite,postgres")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    a = ap.parse_args()
    n, runs = (40, 1) if a.quick else (a.migrations, a.runs)
    procs = [int(p) for p in ("1,2" if a.quick else a.procs).split(",")]
    print(f"# end-to-end rollbacks/s; {n} migrations per run, median of {runs} runs")
    print(f"# machine: {machine()}", flush=True)
    print("store     procs  fence/s  raw/s   fence/raw  per-proc  scaling  cpu(fence)  cpu(raw)")
    for kind in a.stores.split(","):
        one = None
        for p in procs:
            fence, raw, cpu_f, cpu_r = [], [], [], []
            for _ in range(runs):  # interleaved: fence and baseline side by side
                fence.append(fence_rate(kind, n, p))
                cpu_f.append(BUSY[-1])
                raw.append(raw_rate(kind, n, p))
                cpu_r.append(BUSY[-1])
            f, r = median(fence), median(raw)
            one = f if p == procs[0] else one
            print(f"{kind:9} {p:5}  {f:7.1f}  {r:6.1f}  {f / r:9.2f}  {f / p:8.1f}  "
                  f"{f / one:6.2f}x  {median(cpu_f):9.0%}  {median(cpu_r):8.0%}", flush=True)


if __name__ == "__main__":
    main()
