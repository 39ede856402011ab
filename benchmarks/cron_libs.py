"""Cron libraries side by side: cronsim (what the domain uses) against croniter, on a year of
nominal times in one run. Prints, per expression and zone, the median seconds of each over
--runs runs, their ratio, and whether both name the same instants.

    .venv/bin/python benchmarks/cron_libs.py [--quick] [--runs N]
"""
from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import median  # noqa: E402

from cronsim import CronSim  # noqa: E402

from schedfence.domain.source.spec import zone  # noqa: E402

EXPRESSIONS = ("* * * * *", "*/5 * * * *", "30 2 * * *", "0 9 * * 1-5")
ZONES = ("UTC", "America/New_York")


def with_cronsim(expr: str, start: datetime, end: datetime) -> list[datetime]:
    out = []
    for t in CronSim(expr, start):
        if t >= end:
            return out
        out.append(t)
    return out


def with_croniter(expr: str, start: datetime, end: datetime) -> list[datetime]:
    from croniter import croniter
    it, out = croniter(expr, start), []
    while (t := it.get_next(datetime)) < end:
        out.append(t)
    return out


def timed(fn, *args) -> tuple[float, list[datetime]]:
    t0 = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - t0, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one week instead of a year")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    try:
        import croniter  # noqa: F401
    except ImportError:
        print("croniter is not installed (pip install '.[test]'): nothing to compare")
        return
    days = 7 if args.quick else 365
    print(f"span: {days} days from 2026-01-01, median of {args.runs} runs")
    for name in ZONES:
        tz = zone(name)
        start = datetime(2026, 1, 1, tzinfo=tz)
        end = start + timedelta(days=days)
        for expr in EXPRESSIONS:
            sim = [timed(with_cronsim, expr, start, end) for _ in range(args.runs)]
            itr = [timed(with_croniter, expr, start, end) for _ in range(args.runs)]
            a, b = median([s for s, _ in sim]), median([s for s, _ in itr])
            same = [t.timestamp() for t in sim[0][1]] == [t.timestamp() for t in itr[0][1]]
            print(f"{name:<17} {expr:<12} times {len(sim[0][1]):>7}  cronsim {a:7.3f}s  "
                  f"croniter {b:7.3f}s  ratio croniter/cronsim {b / a if a else 0:5.1f}x  "
                  f"same instants: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
