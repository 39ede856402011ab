"""Projection lag on PostgreSQL: polling at the default interval vs the log's subscription.

    .venv/bin/python benchmarks/projection_lag.py [--events N] [--runs R] [--sqlite]
        [--idle SECONDS] [--server postgresql://postgres@127.0.0.1:5432/postgres]
    .venv/bin/python benchmarks/projection_lag.py --quick   # 3 appends, 1 run, 2 s idle (smoke)

Lag: from the moment an append returns (its transaction committed) to the moment the batch
holding it has committed to the operator views (rows visible to any reader). Each run takes a
fresh schema; one service appends (a schedule created: 3 events in one transaction), a
``ProjectionFollower`` (projections/follow.py) on a second service follows the log in a thread of
the same process (one clock for both ends). Appends are spaced by a random pause (0-1 s, a fixed
seed), each after the previous one is visible, so polling's phase is uniform. Figures: per
mode, the median over runs of each run's median and 90th percentile lag, in milliseconds.
Then the log stays idle (10 s; ``--idle``) and the follower's catch-ups (each a few reads of the
tracking row and the log) are counted, per minute. ``--sqlite`` adds polling on a SQLite file
for reference. Not a timed test.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.benchkit import DEFAULT_PG, machine, pg_store, sqlite_store  # noqa: E402
from schedfence.infra.adapters.destination.simulator import SimulatedDestination  # noqa: E402
from schedfence.infra.application.service import open_service  # noqa: E402
from schedfence.projections.follow import Applied, ProjectionFollower  # noqa: E402

WAIT = 30.0  # seconds an append may take to become visible before the run fails


class Seen:
    """When each committed batch became visible, by position (filled by the follower)."""

    def __init__(self) -> None:
        self.position = 0
        self.cond = threading.Condition()
        self.visible_at: list[tuple[int, float]] = []

    def batch(self, applied: Applied) -> None:
        now = time.perf_counter()
        with self.cond:
            self.position = applied.position
            self.visible_at.append((applied.position, now))
            self.cond.notify_all()

    def wait_for(self, position: int) -> float:
        with self.cond:
            if not self.cond.wait_for(lambda: self.position >= position, WAIT):
                raise SystemExit(f"position {position} not visible after {WAIT:g}s")
            return next(t for p, t in self.visible_at if p >= position)


def counted(service: object, calls: list[int]) -> object:
    """The service's projector, its ``catch_up`` counted in ``calls[0]``."""
    projector = service.views.projector  # type: ignore[attr-defined]
    inner = projector.catch_up

    def catch_up(*args: object, **kwargs: object) -> int:
        calls[0] += 1
        return inner(*args, **kwargs)
    projector.catch_up = catch_up
    return projector


def one_run(url: str, mode: str, events: int, seed: int, idle: float
            ) -> tuple[list[float], float]:
    """Lags (ms) of ``events`` appends on a fresh store followed in ``mode``, and the
    follower's catch-ups (reads of the log) per minute while the log is idle."""
    rng = random.Random(seed)
    dest = SimulatedDestination()
    with ExitStack() as stack:
        writer = stack.enter_context(open_service(url, dest, worker_id="bench"))
        reader = stack.enter_context(open_service(url, dest, worker_id="follower"))
        seen, calls = Seen(), [0]
        follower = ProjectionFollower(lambda: counted(reader, calls), reader.app.recorder,
                                      mode=mode, on_batch=seen.batch)
        thread = threading.Thread(target=follower.run, daemon=True)
        thread.start()
        time.sleep(0.5)  # the follower has caught up (nothing) and is waiting
        lags = []
        for i in range(events):
            time.sleep(rng.uniform(0.0, 1.0))
            writer.create_schedule("bench", f"s{i:04d}")
            appended = time.perf_counter()
            position = writer.app.recorder.max_notification_id()
            lags.append((seen.wait_for(position) - appended) * 1000)
        before = calls[0]
        time.sleep(idle)
        idle_per_minute = (calls[0] - before) * 60 / idle
        follower.stop_now()
        thread.join(10)
        if follower.waker is None and mode == "subscribe":
            raise SystemExit("the follower did not subscribe")
    return lags, idle_per_minute


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


def measure(label: str, store: object, mode: str, events: int, runs: int, idle: float
            ) -> None:
    medians, p90s, worst, idles = [], [], [], []
    for run in range(runs):
        with store() as url:  # type: ignore[operator]
            lags, per_minute = one_run(url, mode, events, seed=run, idle=idle)
        medians.append(statistics.median(lags))
        p90s.append(p90(lags))
        worst.append(max(lags))
        idles.append(per_minute)
        print(f"  {label} run {run + 1}: median {medians[-1]:.1f} ms, p90 {p90s[-1]:.1f} ms, "
              f"max {worst[-1]:.1f} ms; idle: {per_minute:.0f} catch-ups/min", flush=True)
    print(f"| {label} | {statistics.median(medians):.1f} ({min(medians):.1f}-"
          f"{max(medians):.1f}) | {statistics.median(p90s):.1f} | {max(worst):.1f} | "
          f"{statistics.median(idles):.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20, help="appends per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--server", default=DEFAULT_PG, help="a PostgreSQL database URL")
    parser.add_argument("--sqlite", action="store_true", help="also poll a SQLite file")
    parser.add_argument("--idle", type=float, default=10.0,
                        help="seconds of idle log counted after the appends")
    parser.add_argument("--quick", action="store_true", help="3 appends, 1 run, 2 s idle")
    args = parser.parse_args()
    if args.quick:
        args.events, args.runs, args.idle = 3, 1, 2.0
    if args.events < 2 or args.runs < 1 or not args.idle > 0:
        parser.error("--events must be at least 2, --runs at least 1, --idle above 0")
    print(f"machine: {machine()}")
    print(f"{args.events} appends per run, {args.runs} runs per mode; lag in ms from the "
          "append's commit to the batch's commit in the views")
    print("| mode | median lag (min-max of run medians) | p90 | max | idle catch-ups/min |")
    print("|---|---|---|---|---|")
    measure("PostgreSQL, poll every 1 s", lambda: pg_store(args.server), "poll",
            args.events, args.runs, args.idle)
    measure("PostgreSQL, subscribe (LISTEN/NOTIFY)", lambda: pg_store(args.server),
            "subscribe", args.events, args.runs, args.idle)
    if args.sqlite:
        measure("SQLite, poll every 1 s", sqlite_store, "poll", args.events, args.runs,
                args.idle)


if __name__ == "__main__":
    main()
