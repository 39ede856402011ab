"""The due index's take (issue 30: a pass costs what is due): one scheduler's lease of a batch
of due schedules, timed in a fleet of N schedules of which the same number are due, so that a
take at 100,000 is compared with one at 1,000 side by side in one run (and a form of the take's
statement with another, run with this script against the code before it).

Each fleet's rows are written straight to the due table (``--due`` due now, the rest due in an
hour), then every row is rewritten ``--churn`` times, as a run's settles do (each rewrite
leaves a dead version, and its index entry, until a vacuum), and no ``ANALYZE`` runs: a fleet
minutes old, before autovacuum has looked at it. Then ``--takes`` takes of ``--batch`` rows,
each given back at once (so the same rows are due again), timed one by one.

    .venv/bin/python benchmarks/due_take.py --sizes 1000,100000
"""
from __future__ import annotations

import argparse
import statistics
import time
import uuid
from datetime import datetime, timezone

from benchkit import machine, pg_store  # noqa: I001 (sys.path first)

from sqlalchemy import text

from schedfence.infra.application.service import open_service
from schedfence.infra.engines.schedule_due import due_rows
from schedfence.projections.records import to_us

CHUNK = 10_000


def take_ms(url: str, n: int, due: int, churn: int, batch: int, takes: int) -> dict[str, float]:
    with open_service(url, "sim") as svc:
        index = svc._schedule_due()
        index.sweep()  # the table
        now = datetime.now(timezone.utc)
        at = to_us(now)
        with svc.views.engine.begin() as conn:
            for start in range(0, n, CHUNK):
                conn.execute(due_rows.insert(), [
                    {"aggregate_id": str(uuid.uuid4()), "version": 1, "holder": "",
                     "lease_us": 0, "due_us": at - 1 if i < due else at + 3_600_000_000 + i}
                    for i in range(start, min(start + CHUNK, n))])
        for _ in range(churn):
            with svc.views.engine.begin() as conn:
                conn.execute(text(f"UPDATE {due_rows.name} SET version = version + 1"))
        times = []
        for _ in range(takes):
            began = time.perf_counter()
            taken = index.take(now, "bench", batch)
            times.append((time.perf_counter() - began) * 1000)
            assert len(taken) == min(batch, due), len(taken)
            index.release(taken, "bench")
    return {"n": n, "median_ms": statistics.median(times), "max_ms": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--due", type=int, default=400, help="rows due now in each fleet")
    parser.add_argument("--churn", type=int, default=2, help="rewrites of every row first")
    parser.add_argument("--batch", type=int, default=200, help="rows a take leases")
    parser.add_argument("--takes", type=int, default=30)
    args = parser.parse_args()
    print(f"# due_take on pg: {machine()}")
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        with pg_store() as url:
            rows.append(take_ms(url, n, args.due, args.churn, args.batch, args.takes))
    print(f"| schedules | due | take of {args.batch}: median (ms) | max (ms) |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['n']:,} | {args.due} | {r['median_ms']:.2f} | {r['max_ms']:.2f} |")
    if len(rows) > 1:
        print(f"take at {rows[-1]['n']:,} / at {rows[0]['n']:,}: "
              f"{rows[-1]['median_ms'] / rows[0]['median_ms']:.2f}x")


if __name__ == "__main__":
    main()
