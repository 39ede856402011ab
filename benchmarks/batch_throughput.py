"""Batched rollbacks end to end on PostgreSQL, against raw driver baselines, side by side.

    python benchmarks/batch_throughput.py [--migrations 10000] [--runs 3] [--procs 1,1x2,2]
                                          [--quick] [--sample-locks]

Per run and process shape (P processes, or PxT: T threads in each), on a fresh schema each
time, with the in-memory simulator:

- ``batched``: ``rollback_many`` (500 schedules per append) then the worker's batches
  (``RollbackEngine.attempt_batch``, ``BATCH_SIZE`` = 50 migrations per batch: one append of
  claims, the starts, one of answers and receipts, one of closes), over ids the process (or
  thread) rolled back itself;
- ``single`` (1 process, a tenth of the migrations): today's one-at-a-time path, ``rollback``
  then ``worker.attempt`` per schedule;
- ``raw tx``: the same rows (4 transactions of 2 rows per migration) through bare psycopg
  INSERT + COMMIT, throughput.py's unbatched baseline;
- ``raw COPY``: exactly the same rows in one COPY.

Schedules are created before the clock starts. Rates are migrations per second, medians of
``--runs`` runs; ratios are of medians measured in the same run of this script.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import _admin, machine, median, pg_store  # noqa: E402
from throughput import (NS, PAYLOAD, ROWS_PER_TX, _cpu_ticks, _prepare, _raw_share,  # noqa: E402
                        _raw_table)

ROLLBACK_CHUNK = 500


def _service(store: str, worker: str) -> Any:
    from schedfence.infra.adapters.destination.simulator import InMemorySimState, SimulatedDestination
    from schedfence.infra.application.service import open_service
    return open_service(store, SimulatedDestination(InMemorySimState(rollback=False)),
                        worker_id=worker)


def _roll_and_attempt(svc: Any, sids: list[str]) -> None:
    from schedfence.infra.engines.attempt import BATCH_SIZE
    ids = []
    for k in range(0, len(sids), ROLLBACK_CHUNK):
        ids += [r.migration_id for r in svc.rollback_many(NS, sids[k:k + ROLLBACK_CHUNK])]
    mids = [uuid.UUID(m) for m in ids]
    for k in range(0, len(mids), BATCH_SIZE):
        svc.worker.attempt_batch(mids[k:k + BATCH_SIZE])


def _batched_share(store: str, sids: list[str], threads: int, start: Any, done: Any) -> None:
    """One process: ``threads`` threads, each with its own service (its own connections and
    worker identity) over its own share, so one thread's store round trips overlap another's
    Python work, as a worker pool's threads do (``worker --concurrency``)."""
    svcs = [_service(store, f"bench-{os.getpid()}-{t}") for t in range(threads)]
    start.wait()
    ticks0 = _cpu_ticks()
    t0 = time.perf_counter()
    runners = [threading.Thread(target=_roll_and_attempt, args=(svc, sids[t::threads]))
               for t, svc in enumerate(svcs)]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    done.put((time.perf_counter() - t0, (ticks0, _cpu_ticks())))
    for svc in svcs:
        svc.close()


def _single(store: str, sids: list[str]) -> float:
    from schedfence.domain.ids import migration_aggregate_id
    svc = _service(store, "single")
    t0 = time.perf_counter()
    for sid in sids:
        result = svc.rollback(NS, sid)
        svc.worker.attempt(migration_aggregate_id(NS, sid, result.request_id))
    took = time.perf_counter() - t0
    svc.close()
    return len(sids) / took


BUSY: dict[str, list[float]] = {}  # shape -> the machine's CPU busy fraction of each run
# shape -> per run: the share of sampled statements that were waiting on a lock
LOCKS: dict[str, list[float]] = {}
SAMPLE_LOCKS = False  # --sample-locks: the sampler costs CPU that the runs then lack
_ACTIVE = ("SELECT count(*), count(*) FILTER (WHERE wait_event_type = 'Lock') "
           "FROM pg_stat_activity WHERE datname = current_database() "
           "AND pid <> pg_backend_pid() AND state = 'active'")


class _LockSampler(threading.Thread):
    """Every 5 ms: how many of the database's backends are running a statement, and how many
    of those wait on a lock (the event table's insert lock: nothing else here waits on one),
    read from ``pg_stat_activity``."""

    def __init__(self, store: str) -> None:
        super().__init__(daemon=True)
        self.conn, self.samples, self.stop = _admin(store), [], threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.005):
            self.samples.append(self.conn.execute(_ACTIVE).fetchone())

    def finish(self, shape: str) -> None:
        self.stop.set()
        self.join()
        self.conn.close()
        running = sum(a for a, _ in self.samples)  # idle samples (spawning) count nothing
        LOCKS.setdefault(shape, []).append(sum(w for _, w in self.samples) / max(running, 1))


def _run_procs(target: Any, shares: list[tuple], shape: str) -> float:
    """Wall time until the last process finishes; the machine's CPU busy fraction from the
    first process's clock start to the last one's end is kept in ``BUSY[shape]``."""
    ctx = mp.get_context("spawn")
    start, done = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*share, start, done)) for share in shares]
    for p in procs:
        p.start()
    start.set()
    reports = [done.get(timeout=3600) for _ in procs]
    walls = [wall for wall, _ in reports]
    first = min(ticks[0] for _, ticks in reports)
    last = max(ticks[1] for _, ticks in reports)
    BUSY.setdefault(shape, []).append((last[0] - first[0]) / max(last[1] - first[1], 1))
    for p in procs:
        p.join()
    return max(walls)


def _check(store: str, n: int) -> None:
    with _service(store, "check") as svc:
        completed = svc.stats()["by_state"]["completed"]
        assert completed == n, f"{completed} of {n} completed"


def batched_rate(n: int, shape: str) -> float:
    """``shape`` is P (processes) or PxT (processes x threads each)."""
    procs, _, threads = shape.partition("x")
    p, t = int(procs), int(threads or 1)
    with pg_store() as store:
        sids = _prepare(store, n)
        sampler = _LockSampler(store) if SAMPLE_LOCKS else None
        if sampler:
            sampler.start()
        wall = _run_procs(_batched_share, [(store, sids[i::p], t) for i in range(p)], shape)
        if sampler:
            sampler.finish(shape)
        _check(store, n)
    return n / wall


def single_rate(n: int) -> float:
    with pg_store() as store:
        sids = _prepare(store, n)
        rate = _single(store, sids)
        _check(store, n)
    return rate


def raw_tx_rate(n: int) -> float:
    with pg_store() as store:
        target = _raw_table("postgres", store)
        start, done = threading.Event(), queue.Queue()
        start.set()
        _raw_share("postgres", target, n, start, done)
        return n / done.get()[0]


def raw_copy_rate(n: int) -> float:
    import psycopg
    with pg_store() as store:
        target = _raw_table("postgres", store)
        rows_per = sum(ROWS_PER_TX)
        with psycopg.connect(target, autocommit=True) as conn:
            t0 = time.perf_counter()
            with conn.transaction(), conn.cursor() as cur, cur.copy(
                    "COPY raw_events (originator_id, originator_version, topic, state) "
                    "FROM STDIN") as copy:
                for _ in range(n):
                    oid = str(uuid.uuid4())
                    for version in range(rows_per):
                        copy.write_row((oid, version, "t", PAYLOAD))
            return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--migrations", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--procs", default="1,1x2,2",
                    help="comma-separated shapes: P processes, or PxT (T threads each)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    ap.add_argument("--sample-locks", action="store_true",
                    help="sample pg_stat_activity every 5 ms: the share of statements waiting "
                         "on a lock (its own CPU lowers the rates: measure those without it)")
    a = ap.parse_args()
    global SAMPLE_LOCKS
    SAMPLE_LOCKS = a.sample_locks
    n, runs = (300, 1) if a.quick else (a.migrations, a.runs)
    procs = a.procs.split(",")
    print(f"# PostgreSQL, in-memory simulator; {n} migrations per run, median of {runs} runs")
    print(f"# machine: {machine()}", flush=True)
    rates: dict[str, list[float]] = {k: [] for k in
                                     ("raw_tx", "raw_copy", "single", *procs)}
    for _ in range(runs):  # interleaved: every figure of a run measured side by side
        rates["raw_tx"].append(raw_tx_rate(n))
        rates["raw_copy"].append(raw_copy_rate(n))
        rates["single"].append(single_rate(max(n // 10, 50)))
        for p in procs:
            rates[p].append(batched_rate(n, p))
    m = {k: median(v) for k, v in rates.items()}
    print(f"{'path':32} {'migrations/s':>12}  {'÷ raw tx':>9}  {'÷ raw COPY':>10}")
    rows = [("raw tx (4 tx x 2 rows)", "raw_tx"), ("raw COPY (same rows)", "raw_copy"),
            ("single (one at a time)", "single")] + \
        [(f"batched, {_label(p)}", p) for p in procs]
    for label, key in rows:
        print(f"{label:32} {m[key]:12.1f}  {m[key] / m['raw_tx']:8.2f}x  "
              f"{m[key] / m['raw_copy']:9.3f}x")
    if len(procs) > 1:
        print(f"# scaling: {_label(procs[-1])} = {m[procs[-1]] / m[procs[0]]:.2f}x "
              f"{_label(procs[0])}")
    print(f"# batched {_label(procs[0])} = {m[procs[0]] / m['single']:.2f}x single", flush=True)
    for p in procs:  # a shape that keeps every core busy is bound by the machine's CPU
        print(f"# machine CPU busy, {_label(p)}: {100 * median(BUSY[p]):.0f}% of "
              f"{os.cpu_count()} cores (median, while the clocks ran)", flush=True)
        if LOCKS.get(p):
            print(f"# statements waiting on a lock, {_label(p)}: {100 * median(LOCKS[p]):.0f}% of "
                  "those sampled running (every 5 ms; median of the runs)", flush=True)


def _label(shape: str) -> str:
    procs, _, threads = shape.partition("x")
    label = f"{procs} process" + ("es" if procs != "1" else "")
    return label + (f" x {threads} threads" if threads else "")


if __name__ == "__main__":
    main()
