"""The cost profile of one rollback: the one-at-a-time path against the batched one (cProfile).

    python benchmarks/profile_migration.py [--migrations 500] [--store sqlite|postgres] [--top 12]

For each path, on a fresh store with the in-memory simulator, rolls back and completes
``--migrations`` schedules under cProfile and prints: wall time and Python function calls per
migration, store round trips (reads and appends) per migration, and the top entries by
cumulative time. Schedules are created before profiling starts.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import machine, pg_store, sqlite_store  # noqa: E402

NS = "prof"


def _single(svc: Any, sids: list[str]) -> None:
    from schedfence.domain.ids import migration_aggregate_id
    for sid in sids:
        result = svc.rollback(NS, sid)
        svc.worker.attempt(migration_aggregate_id(NS, sid, result.request_id))


def _batched(svc: Any, sids: list[str]) -> None:
    from schedfence.infra.engines.attempt import BATCH_SIZE
    mids = []
    for k in range(0, len(sids), 500):
        mids += [uuid.UUID(r.migration_id) for r in svc.rollback_many(NS, sids[k:k + 500])]
    for k in range(0, len(mids), BATCH_SIZE):
        svc.worker.attempt_batch(mids[k:k + BATCH_SIZE])


def _counting(recorder: Any) -> dict[str, int]:
    """Count the recorder's reads and appends (one round trip each)."""
    counts = {"reads": 0, "appends": 0}
    for name, kind in (("select_events", "reads"), ("insert_events", "appends")):
        inner = getattr(recorder, name)

        def counted(*a: Any, _inner: Callable = inner, _kind: str = kind, **k: Any) -> Any:
            counts[_kind] += 1
            return _inner(*a, **k)
        setattr(recorder, name, counted)
    from schedfence.infra.adapters.store import bulk  # a batch's reads: one query for many aggregates
    inner_select = bulk._select

    def counted_select(*a: Any, **k: Any) -> Any:
        counts["reads"] += 1
        return inner_select(*a, **k)
    bulk._select = counted_select
    return counts


def profile(kind: str, path: Callable[[Any, list[str]], None], n: int, top: int) -> None:
    from schedfence.infra.adapters.destination.simulator import InMemorySimState, SimulatedDestination
    from schedfence.infra.application.service import open_service
    holder = sqlite_store() if kind == "sqlite" else pg_store()
    with holder as store:
        svc = open_service(store, SimulatedDestination(InMemorySimState(rollback=False)),
                           worker_id="prof")
        sids = [f"s{i:05d}" for i in range(n)]
        for sid in sids:
            svc.create_schedule(NS, sid)
        counts = _counting(svc.app.recorder)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.runcall(path, svc, sids)
        wall = time.perf_counter() - t0
        assert svc.stats()["by_state"]["completed"] == n
        svc.close()
    stats = pstats.Stats(prof, stream=(out := io.StringIO()))
    print(f"\n## {path.__name__.strip('_')} ({kind}, {n} migrations)")
    print(f"wall {wall * 1000 / n:.2f} ms/migration (profiled); "
          f"{stats.total_calls / n:,.0f} function calls/migration; "
          f"{counts['reads'] / n:.2f} reads and {counts['appends'] / n:.2f} appends/migration")
    stats.sort_stats(os.environ.get("PROFILE_SORT", "cumulative")).print_stats(top)
    lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
    print("\n".join(lines[start:start + top + 1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--migrations", type=int, default=500)
    ap.add_argument("--store", choices=("sqlite", "postgres"), default="postgres")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    print(f"# machine: {machine()}")
    for path in (_single, _batched):
        profile(a.store, path, a.migrations, a.top)


if __name__ == "__main__":
    main()
