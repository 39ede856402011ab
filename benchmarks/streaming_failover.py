"""Failover on PostgreSQL streaming replication: time to promote and resume, events lost.

    .venv/bin/python benchmarks/streaming_failover.py [--runs 3] [--lag 0.3 ...] [--json]

Each run is the scenario of tests/e2e/test_streaming_failover.py on a new private primary and
hot standby (initdb, pg_basebackup -R, their own ports and directories, removed at the end):
30 rollbacks, 2 worker processes on the primary; after 30 acknowledged appends the primary
stops sending WAL for ``lag`` seconds (0: not at all), then its postmaster is SIGKILLed. The
standby is promoted (``pg_ctl promote``) and new workers run against it; in asynchronous mode
the new primary first records a failover epoch (``promote``). Times are seconds from the
SIGKILL: ``promoted`` (the standby accepts writes), ``resumed`` (a worker's first acknowledged
append on it), ``completed`` (every migration completed, the operator's re-arms included).
``lost`` counts events the dead primary had committed that the standby never received (read
from the dead primary's own WAL, started again afterwards); ``acked lost``, those a worker saw
acknowledged. The simulator (the destination) lives on the shared server, in a database made
for the run and dropped at the end. Medians over ``--runs``; not a timed test.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import pgtools  # noqa: E402
from tests.e2e.test_streaming_failover import Figures, failover  # noqa: E402

FIELDS = ("promoted_s", "resumed_s", "completed_s", "acked_before", "wal_lost", "acked_lost",
          "confirmed", "reissued")


def measure(synchronous: bool, lag: float, runs: int, db: str) -> dict[str, float]:
    found: list[Figures] = []
    for _ in range(runs):
        found.append(failover(synchronous, "sim+" + pgtools.new_schema_url(db), lag))
    return {name: statistics.median(asdict(f)[name] for f in found) for name in FIELDS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lag", type=float, nargs="+", default=[0.0, 0.3])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    pgtools.require_postgres()
    db = pgtools.create_database("schedfence_bench_sf")
    rows = []
    try:
        for lag in args.lag:
            for synchronous in (True, False):
                row = {"mode": "synchronous" if synchronous else "asynchronous", "lag_s": lag,
                       "runs": args.runs, **measure(synchronous, lag, args.runs, db)}
                rows.append(row)
                if not args.json:
                    print(f"{row['mode']:>12} lag {lag:.1f}s: promoted {row['promoted_s']:.2f}s"
                          f" resumed {row['resumed_s']:.2f}s completed {row['completed_s']:.2f}s"
                          f" | acked before {row['acked_before']:.0f}, lost {row['wal_lost']:.0f}"
                          f" (acked {row['acked_lost']:.0f}), re-armed {row['confirmed']:.0f},"
                          f" re-issued {row['reissued']:.0f}", flush=True)
    finally:
        pgtools.drop_database(db)
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
