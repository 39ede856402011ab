"""Which eventsourcing persistence module for PostgreSQL: the core one or eventsourcing-sqlalchemy.

    python benchmarks/store_choice.py [--saves N] [--runs K] [--url postgresql://...]

Times N small saves (one new aggregate of two events each, the size of a fence step) by one
process and by two at once, through ``eventsourcing.postgres`` and, when it is installed,
``eventsourcing_sqlalchemy`` on the same server, side by side, medians of K runs. The project
does not depend on eventsourcing-sqlalchemy; install ``eventsourcing-sqlalchemy==1.0.1`` in a
scratch environment to include it. Not a timed test.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import _admin, machine, median  # noqa: E402

from eventsourcing.application import Application  # noqa: E402
from eventsourcing.domain import Aggregate, event  # noqa: E402


class Step(Aggregate):
    @event("Started")
    def __init__(self, name: str) -> None:
        self.name = name

    @event("Advanced")
    def advance(self) -> None:
        pass


def _env(module: str, url: str, app_name: str) -> dict[str, str]:
    from schedfence.infra.adapters.store.pg import parse_pg_url
    t = parse_pg_url(url)
    if module == "eventsourcing.postgres":
        return {"PERSISTENCE_MODULE": module, "POSTGRES_DBNAME": t.dbname,
                "POSTGRES_HOST": t.host, "POSTGRES_PORT": str(t.port),
                "POSTGRES_USER": t.user, "POSTGRES_PASSWORD": t.password}
    sa = f"postgresql+psycopg://{t.user}@{t.host}:{t.port}/{t.dbname}"
    return {"PERSISTENCE_MODULE": module, "SQLALCHEMY_URL": sa}


def _saves(module: str, url: str, app_name: str, n: int, start: Any, done: Any) -> None:
    # The parent made the tables; concurrent DDL by the children would fail
    # ("tuple concurrently updated").
    env = dict(_env(module, url, app_name), CREATE_TABLE="no")
    app = type(app_name, (Application,), {"name": app_name})(env=env)
    start.wait()
    t0 = time.perf_counter()
    for _ in range(n):
        step = Step(uuid.uuid4().hex)
        step.advance()
        app.save(step)
    done.put(time.perf_counter() - t0)
    app.close()


class WaitSampler:
    """Samples what the benchmark's server backends are doing (pg_stat_activity), to see why
    writers do or do not scale: waiting for the table lock, for the WAL flush, or for us."""

    def __init__(self, url: str) -> None:
        import threading
        from collections import Counter
        self.url, self.counts, self.stop = url, Counter(), threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with _admin(self.url) as conn:
            me = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            while not self.stop.is_set():
                for state, wtype, wait in conn.execute(
                        "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> %s "
                        "AND backend_type = 'client backend'", (me,)):
                    if state in ("active", "idle in transaction"):
                        self.counts[f"{wtype or 'CPU'}:{wait or state}"] += 1
                time.sleep(0.005)

    def __enter__(self) -> "WaitSampler":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()

    def summary(self) -> str:
        total = sum(self.counts.values()) or 1
        return ", ".join(f"{k} {v / total:.0%}" for k, v in self.counts.most_common(4))


def rate(module: str, url: str, n: int, procs: int, sampler: Any = None) -> float:
    app_name = f"choice{uuid.uuid4().hex[:8]}"
    # Create the tables once, before the clock and before the racing processes.
    type(app_name, (Application,), {"name": app_name})(env=_env(module, url, app_name)).close()
    ctx = mp.get_context("fork")
    start, done = ctx.Event(), ctx.Queue()
    ps = [ctx.Process(target=_saves, args=(module, url, app_name, n // procs, start, done))
          for _ in range(procs)]
    for p in ps:
        p.start()
    time.sleep(0.5)
    t0 = time.perf_counter()
    start.set()
    if sampler is not None:
        sampler.__enter__()
    for _ in ps:
        done.get(timeout=1800)
    wall = time.perf_counter() - t0
    if sampler is not None:
        sampler.__exit__()
    for p in ps:
        p.join()
    with _admin(url) as conn:
        for suffix in ("events", "snapshots"):
            conn.execute(f'DROP TABLE IF EXISTS "{app_name}_{suffix}" CASCADE')
    return n / wall


def _fresh(used: WaitSampler) -> WaitSampler:
    """A new sampler (threads start once) that keeps the counts gathered so far."""
    fresh = WaitSampler(used.url)
    fresh.counts = used.counts
    return fresh


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--saves", type=int, default=1500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    a = ap.parse_args()
    modules = ["eventsourcing.postgres"]
    try:
        import eventsourcing_sqlalchemy  # noqa: F401
        modules.append("eventsourcing_sqlalchemy")
    except ImportError:
        print("# eventsourcing_sqlalchemy is not installed: measuring the core module only")
    print(f"# {a.saves} saves (2 events each), median of {a.runs} runs; {machine()}")
    print("module                    procs  saves/s  where busy backends spent their time")
    for procs in (1, 2, 4):
        results: dict[str, list[float]] = {m: [] for m in modules}
        waits = {m: WaitSampler(a.url) for m in modules}
        for _ in range(a.runs):
            for m in modules:  # interleaved, side by side
                results[m].append(rate(m, a.url, a.saves, procs, waits[m]))
                waits[m] = _fresh(waits[m])
        for m in modules:
            print(f"{m:25} {procs:5}  {median(results[m]):7.1f}  {waits[m].summary()}",
                  flush=True)


if __name__ == "__main__":
    main()
