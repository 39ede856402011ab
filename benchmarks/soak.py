"""Soak: one worker over many migrations with the simulated destination kept in the store.

    nice .venv/bin/python benchmarks/soak.py [--migrations 20000] [--every 1000]
                                             [--store sqlite|postgres] [--tracemalloc] [--quick]

One process opens a store (a new SQLite file, or a new PostgreSQL schema with
``--store postgres``) with the simulator persisted in it (``SqlSimState``, as the CLI does when
no destination is configured). For each block of ``--every`` migrations it creates the
schedules, makes the admin rollbacks, then runs the worker pool until idle (the loop of
``schedfence worker --until-idle``). After every block it samples:

- RSS, from ``/proc/self/status`` (VmRSS), after a ``gc.collect()``;
- the Python heap traced by ``tracemalloc`` (with ``--tracemalloc`` only: it slows every call);
- the simulator's cost per rollback: seconds spent inside the simulator's ``start_workflow``
  and ``describe`` (admin sentinel check and worker calls) per 100 rollbacks of the block;
- the block's wall time per 100 migrations (create + rollback + worker).

It prints a table and, for each series, the median of the last quarter of the samples over
the median of the first quarter: "flat" means that ratio is at most ``--flat`` (1.5).
Not a timed test: figures depend on the machine.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import machine, median, pg_store, sqlite_store  # noqa: E402

NS = "soak"


class TimedDestination:
    """The ``Destination`` port over a simulator, adding up the time spent in each call."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0
        self._lock = threading.Lock()

    def _timed(self, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            with self._lock:
                self.seconds += time.perf_counter() - t0
                self.calls += 1

    def start_workflow(self, request: Any) -> Any:
        return self._timed(self.inner.start_workflow, request)

    def describe(self, namespace: str, workflow_id: str, run_id: str | None = None) -> Any:
        return self._timed(self.inner.describe, namespace, workflow_id, run_id)


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def quarter_ratio(values: list[float]) -> float:
    """Median of the last quarter over the median of the first (at least one sample each)."""
    q = max(1, len(values) // 4)
    first = median(values[:q])
    return median(values[-q:]) / first if first else float("inf")


def soak(store: str, total: int, every: int, traced: bool) -> list[dict[str, float]]:
    from schedfence.domain.ids import migration_aggregate_id  # noqa: F401 - imported before measuring
    from schedfence.infra.application.service import open_service
    from schedfence.infra.adapters.destination.sim_sql import SqlSimState
    from schedfence.infra.adapters.destination.simulator import SimulatedDestination

    state = SqlSimState(store)
    dest = TimedDestination(SimulatedDestination(state))
    svc = open_service(store, dest, worker_id="soak")
    samples: list[dict[str, float]] = []
    if traced:
        tracemalloc.start()
    try:
        done = 0
        while done < total:
            block = min(every, total - done)
            sids = [f"s{i:07d}" for i in range(done, done + block)]
            sim0, t0 = dest.seconds, time.perf_counter()
            for sid in sids:
                svc.create_schedule(NS, sid)
                svc.rollback(NS, sid)
            stats = svc.run_workers(threading.Event(), until_idle=True, poll_interval=0.05)
            wall = time.perf_counter() - t0
            if stats.errors:
                raise RuntimeError(f"worker errors: {stats.errors[:3]}")
            done += block
            gc.collect()
            heap = tracemalloc.get_traced_memory()[0] / 1024 if traced else float("nan")
            samples.append({"migrations": done, "rss_mb": rss_kb() / 1024,
                            "heap_mb": heap / 1024,
                            "sim_s_per_100": (dest.seconds - sim0) * 100 / block,
                            "wall_s_per_100": wall * 100 / block})
            _print_row(samples[-1], traced)
        by_state = {k: v for k, v in svc.stats()["by_state"].items() if v}
        if by_state != {"completed": total}:
            raise RuntimeError(f"not every migration completed: {by_state}")
    finally:
        if traced:
            tracemalloc.stop()
        svc.close()
        state.dispose()
    return samples


HEADER = ("migrations", "RSS MB", "heap MB", "sim s/100 rollbacks", "wall s/100 migrations")


def _print_row(s: dict[str, float], traced: bool) -> None:
    heap = f"{s['heap_mb']:.1f}" if traced else "-"
    print(f"| {int(s['migrations']):>10} | {s['rss_mb']:7.1f} | {heap:>7} | "
          f"{s['sim_s_per_100']:19.3f} | {s['wall_s_per_100']:21.3f} |", flush=True)


def summarise(samples: list[dict[str, float]], flat: float, traced: bool) -> None:
    n = len(samples)
    rss = [s["rss_mb"] for s in samples]
    growth_kb = (rss[-1] - rss[0]) * 1024 / max(1, samples[-1]["migrations"]
                                                 - samples[0]["migrations"])
    series = [("RSS", rss), ("sim s/100 rollbacks", [s["sim_s_per_100"] for s in samples]),
              ("wall s/100 migrations", [s["wall_s_per_100"] for s in samples])]
    if traced:
        series.insert(1, ("heap", [s["heap_mb"] for s in samples]))
    print(f"RSS growth first->last sample: {growth_kb:.2f} KB per migration")
    for label, values in series:
        r = quarter_ratio(values)
        verdict = "flat" if r <= flat else "NOT flat"
        print(f"{label}: last-quarter/first-quarter median ratio {r:.2f} over {n} samples "
              f"({verdict}, threshold {flat})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--migrations", type=int, default=20000)
    p.add_argument("--every", type=int, default=1000, help="migrations per sample")
    p.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--pg", default=None, help="PostgreSQL URL (benchkit's default otherwise)")
    p.add_argument("--tracemalloc", action="store_true", help="also sample the Python heap")
    p.add_argument("--flat", type=float, default=1.5)
    p.add_argument("--quick", action="store_true", help="600 migrations, a sample every 100")
    args = p.parse_args()
    if args.quick:
        args.migrations, args.every = 600, 100
    if args.migrations < 1 or args.every < 1:
        p.error("--migrations and --every must be at least 1")
    print(f"machine: {machine()}")
    print(f"store: {args.store}; {args.migrations} migrations, a sample every {args.every}; "
          f"simulator in the store; pid {os.getpid()}")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "|".join("---" for _ in HEADER) + "|")
    if args.store == "postgres":
        with pg_store(*([args.pg] if args.pg else [])) as url:
            samples = soak(url, args.migrations, args.every, args.tracemalloc)
    else:
        with sqlite_store() as url:
            samples = soak(url, args.migrations, args.every, args.tracemalloc)
    summarise(samples, args.flat, args.tracemalloc)


if __name__ == "__main__":
    main()
