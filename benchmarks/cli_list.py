"""``schedfence list`` on a store of N schedule keys: the whole-log listing before paging
against the paged listing (projection-indexed keys, one aggregate load per listed key).

    .venv/bin/python benchmarks/cli_list.py [--keys 2001] [--namespaces 4] [--repeat 5]
                                            [--store sqlite:///PATH | postgresql://...]

Before: ``list_doc`` (below: what ``list`` ran before paging), which loads every key, its
incarnations and its migration from the log. After: ``schedule_list`` (infra/application/views.py), what ``list`` and
``GET /v1/schedules`` run: a first page of 1,000, a walk over every page, a page of 100, and
one namespace. Each figure is the median of ``--repeat`` in-process calls (the projection
caught up first), plus one ``schedfence list`` process for the wall time an operator sees.
Not a timed test: the figures depend on the machine.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schedfence.infra.application.service import open_service  # noqa: E402
from schedfence.infra.application.views import schedule_list  # noqa: E402


def list_doc(service: Any) -> dict[str, Any]:
    """The listing before paging: every schedule, each with its migration's state."""
    from schedfence.domain.errors import NotFound
    rows = []
    for view in service.list_schedules():
        row = view.to_dict()
        try:
            row["migration_state"] = service.migration(view.namespace, view.schedule_id).state
        except NotFound:
            row["migration_state"] = None
        rows.append(row)
    return {"schedules": rows}


def ms(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return sorted(times)[len(times) // 2], result


def walk(service: Any, limit: int, namespace: str | None = None) -> int:
    rows, cursor = 0, None
    while True:
        doc = schedule_list(service, namespace, limit, cursor)
        rows += len(doc["schedules"])
        cursor = doc["next_cursor"]
        if cursor is None:
            return rows


def fill(store: str, keys: int, namespaces: int) -> None:
    with open_service(store, "sim") as service:
        for i in range(keys):
            service.create_schedule(f"ns{i % namespaces}", f"s{i:05d}")
            if i % 10 == 0:  # every tenth key has a migration, as an operator's store might
                service.rollback(f"ns{i % namespaces}", f"s{i:05d}")
        service.catch_up()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=2001)
    ap.add_argument("--namespaces", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--store", default=None)
    args = ap.parse_args()
    store = args.store or f"sqlite:///{tempfile.mkdtemp(prefix='cli_list_')}/store.db"
    t0 = time.perf_counter()
    fill(store, args.keys, args.namespaces)
    print(f"store: {store.split('?')[0]}; {args.keys} keys in {args.namespaces} namespaces "
          f"(filled in {time.perf_counter() - t0:.1f}s); median of {args.repeat} runs")
    with open_service(store, "sim") as service:
        service.catch_up()
        rows = [
            ("before: list_doc, every key", *ms(lambda: len(list_doc(service)["schedules"]),
                                               args.repeat)),
            ("after: first page (--limit 1000)", *ms(lambda: len(schedule_list(
                service, None, 1000)["schedules"]), args.repeat)),
            ("after: every page (--limit 1000)", *ms(lambda: walk(service, 1000), args.repeat)),
            ("after: first page (--limit 100)", *ms(lambda: len(schedule_list(
                service, None, 100)["schedules"]), args.repeat)),
            ("after: --namespace ns0, every page", *ms(lambda: walk(service, 1000, "ns0"),
                                                       args.repeat)),
        ]
    for label, took, n in rows:
        print(f"  {label:<38} {took:9.1f} ms  {n:>6} rows")
    for extra in ([], ["--limit", "100"]):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                               "list", "--json", *extra], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parents[1])
        wall = (time.perf_counter() - t0) * 1000
        assert done.returncode == 0, done.stderr
        print(f"  process: schedfence list --json {' '.join(extra):<12} {wall:9.1f} ms wall")


if __name__ == "__main__":
    main()
