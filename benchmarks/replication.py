"""Replication rate, PostgreSQL → PostgreSQL in another database.

    .venv/bin/python benchmarks/replication.py [--events N] [--batch-size B ...]
        [--server postgresql://postgres@127.0.0.1:5432]

It makes two (or more) databases ``schedfence_bench_rep_*`` on the server and drops them at the
end. The active log holds real events: full migrations (create, rollback, claim, answer,
receipt, close: 11 events each, through the service and the simulator) and bulk schedule
creations (100 schedules, 300 events per transaction). Each batch size copies the whole log
into a fresh standby; the rate is events copied per second of wall time, including the
follower's checks. Then the latency of copying one new small transaction is timed. Not a timed
test: the figures depend on the machine (2 shared vCPUs here).
"""
from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schedfence.infra.adapters.replication.follower import replicate  # noqa: E402
from schedfence.infra.application.service import open_service  # noqa: E402
from schedfence.infra.adapters.destination.simulator import SimulatedDestination  # noqa: E402
from tests.replica_helpers import bulk_schedules  # noqa: E402


def make_database(server: str, tag: str) -> str:
    name = f"schedfence_bench_rep_{tag}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(server: str, name: str) -> None:
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fill(url: str, events: int) -> int:
    migrations = max(1, events // 50)  # a fifth of the log: full migrations
    with open_service(url, SimulatedDestination(), claim_grace=0) as svc:
        for i in range(migrations):
            svc.create_schedule("bench", f"m{i:05d}", notes="x" * 40)
            svc.rollback("bench", f"m{i:05d}")
        svc.run_until_idle(max_attempts=10 * migrations)
        made = svc.event_count()
    bulk_schedules(url, max(0, (events - made) // 3), per_save=100)
    with open_service(url, SimulatedDestination()) as svc:
        return svc.event_count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    args = parser.parse_args()
    names = [make_database(args.server, "active")]
    try:
        active = f"{args.server}/{names[0]}"
        started = time.perf_counter()
        total = fill(active, args.events)
        print(f"active log: {total} events ({time.perf_counter() - started:.1f}s to write)")
        for size in args.batch_size:
            names.append(make_database(args.server, f"standby{size}"))
            standby = f"{args.server}/{names[-1]}"
            report = replicate(active, standby, batch_size=size)
            print(f"batch {size:>5}: {report.copied} events in {report.seconds:.2f}s = "
                  f"{report.rate:,.0f} events/s ({report.batches} transactions)")
        with open_service(active, SimulatedDestination()) as svc:
            svc.create_schedule("bench", "one-more")
        started = time.perf_counter()
        report = replicate(active, standby)
        print(f"incremental: {report.copied} new events copied in "
              f"{(time.perf_counter() - started) * 1000:.0f} ms (open, check, copy, close)")
    finally:
        for name in names:
            drop_database(args.server, name)


if __name__ == "__main__":
    main()
