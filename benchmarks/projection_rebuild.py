"""Projection rebuild on PostgreSQL against raw COPY of the same rows, side by side.

    python benchmarks/projection_rebuild.py [--migrations 5000] [--runs 3] [--profile]
    python benchmarks/projection_rebuild.py --quick   # 200 migrations, 1 run (smoke)

One store is filled once, before any clock starts: ``--migrations`` schedules created and
rolled back end to end with the in-memory simulator (``rollback_many``, then the worker's
batches), so the log holds every event of a real rollback. Then, per run:

- ``rebuild``: ``OperatorViews.rebuild`` — drop the view tables, create them, project the whole
  log from position 0 (read, decode, fold with the domain's reducer, write in batches);
- ``raw COPY``: the rows that rebuild wrote (every row of every view table, read back before
  the clock starts), COPYed into the same freshly created tables (same indexes) in one
  transaction by bare psycopg.

Rates are view rows per second; the ratio is of the medians measured in the same run.
``--profile`` prints cProfile's top entries of one extra rebuild.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_throughput import _check, _roll_and_attempt  # noqa: E402
from batch_throughput import _service as _worker_service  # noqa: E402
from benchkit import _admin, machine, median, pg_store  # noqa: E402
from throughput import _prepare  # noqa: E402


def fill(store: str, n: int) -> None:
    """``n`` schedules created and rolled back end to end (the batched worker path, as
    batch_throughput.py drives it)."""
    sids = _prepare(store, n)
    with _worker_service(store, "fill") as svc:
        _roll_and_attempt(svc, sids)
    _check(store, n)


def _service(store: str) -> Any:
    from schedfence.infra.application.service import open_service
    return open_service(store, "sim", worker_id="bench")


def rebuild_seconds(store: str) -> tuple[float, int]:
    """Seconds one rebuild took, and how many events it applied."""
    with _service(store) as svc:
        views = svc.views
        views.projector  # the tables exist before the clock starts  # noqa: B018
        t0 = time.perf_counter()
        applied = views.rebuild()
        return time.perf_counter() - t0, applied


def view_rows(store: str) -> dict[str, tuple[list[str], list[tuple]]]:
    """Every row of every view table (and the tracking row), in key order: table ->
    (columns, rows)."""
    from schedfence.projections import tables as t
    with _service(store) as svc:
        engine = svc.views.engine
        with engine.connect() as conn:
            return {table.name: ([c.name for c in table.columns],
                                 [tuple(r) for r in conn.execute(table.select().order_by(
                                     *table.primary_key.columns))])
                    for table in (*t.VIEW_TABLES, t.tracking)}


def copy_seconds(store: str, rows: dict[str, tuple[list[str], list[tuple]]]) -> float:
    """Seconds to COPY ``rows`` into freshly created view tables, in one transaction."""
    from schedfence.infra.adapters.store.pg import parse_pg_url
    with _service(store) as svc:
        view = svc.views.projector.view
        view.drop_tables()
        view.create_tables()
    with _admin(store) as conn:
        conn.execute(f'SET search_path TO "{parse_pg_url(store).schema}"')
        conn.execute("DELETE FROM schedfence_proj_tracking")
        t0 = time.perf_counter()
        with conn.transaction(), conn.cursor() as cur:
            for name, (columns, table_rows) in rows.items():
                with cur.copy(f"COPY {name} ({', '.join(columns)}) FROM STDIN") as copy:
                    for row in table_rows:
                        copy.write_row(row)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--migrations", type=int, default=5_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile one extra rebuild")
    ap.add_argument("--sort", default="cumulative", help="the profile's order (pstats keys)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    a = ap.parse_args()
    n, runs = (200, 1) if a.quick else (a.migrations, a.runs)
    print(f"# PostgreSQL; a log of {n} rolled-back migrations; median of {runs} runs")
    print(f"# machine: {machine()}", flush=True)
    with pg_store() as store:
        fill(store, n)
        rebuild_seconds(store)  # warm: the rows COPY writes are the rows rebuild writes
        rows = view_rows(store)
        total = sum(len(r) for _, r in rows.values())
        per_table = ", ".join(f"{k.removeprefix('schedfence_proj_')} {len(r)}"
                              for k, (_, r) in rows.items())
        rebuilds, copies, events = [], [], 0
        for _ in range(runs):  # interleaved: each pair measured side by side
            took, events = rebuild_seconds(store)
            if view_rows(store) != rows:  # each rebuild writes exactly the rows COPY writes
                raise SystemExit("a rebuild wrote other rows than the first one")
            rebuilds.append(took)
            copies.append(copy_seconds(store, rows))
        if a.profile:
            profile = cProfile.Profile()
            profile.runcall(rebuild_seconds, store)
            pstats.Stats(profile).sort_stats(a.sort).print_stats(30)
    print(f"# {events} events, {total} view rows ({per_table})")
    rebuild_rate, copy_rate = total / median(rebuilds), total / median(copies)
    print(f"{'path':28} {'rows/s':>10} {'events/s':>10} {'seconds':>8}")
    print(f"{'rebuild (OperatorViews)':28} {rebuild_rate:10.0f} "
          f"{events / median(rebuilds):10.0f} {median(rebuilds):8.2f}")
    print(f"{'raw COPY (same rows)':28} {copy_rate:10.0f} {'':>10} {median(copies):8.2f}")
    print(f"# rebuild = {rebuild_rate / copy_rate:.3f}x raw COPY", flush=True)


if __name__ == "__main__":
    main()
