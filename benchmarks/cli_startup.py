"""CLI start-up, side by side: fresh ``schedfence`` processes for ``--help``, ``status --help``,
``status`` and ``list`` of 503 rows (text and ``--json``) on a SQLite store and on a PostgreSQL store (a database
this script creates and drops), against the baseline ``python -c "import pydantic,
eventsourcing"`` measured in the same rounds (each round runs every case once, so load on the
machine hits them alike). Prints, per case, the median (min-max) of --runs rounds of its wall
time and of its CPU time (user + system: steadier on a shared machine), each as a ratio to the
baseline's (target for ``status`` and ``list``: wall at most 2x).

Each backend gets two stores with the same schedules (two of three rolled back): on the first
the operator projection is caught up (``projection catch-up``, as a running ``projection
follow`` keeps it), on the second it was never built ("projection behind": ``status`` must
read the log). The floor rows are imports alone, no command. Last, per case: how many modules
it loads and which database drivers among them, and where ``status``'s import time goes,
package by package (``-X importtime`` self times).

    .venv/bin/python benchmarks/cli_startup.py [--quick] [--runs N] [--no-pg] [--tree LABEL=DIR ...]

Without ``--tree`` it measures the checkout that ``schedfence`` imports from the caller's
directory and PYTHONPATH. Each ``--tree LABEL=DIR`` names a checkout (a directory holding
``schedfence/``, ``domain/``, ``projections/`` and ``infra/``, e.g. ``git archive`` of the
revision before a change): every case but the baseline then runs once per tree in every round,
side by side.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import DEFAULT_PG, _admin, machine, median, pg_server_version  # noqa: E402
from benchkit import sqlite_store  # noqa: E402

BASELINE = "import pydantic, eventsourcing"
FLOORS = (
    ("python -c pass", "pass"),
    ("import click", "import click"),
    ("floor: domain events (Schedule, Migration)",
     "import schedfence.domain.source.schedule, schedfence.domain.rollback.aggregate"),
    ("import schedfence.infra.cli", "import schedfence.infra.cli"),
)
SCHEDULES = 3  # in each store `status` reads; two of them with a migration
LISTED = 500  # more schedules in each store (namespace "many"): what `list` pages through
PACKAGES = ("domain", "projections", "infra")  # schedfence.<name> lives in <checkout>/<name>
DRIVERS = ("sqlite3", "_sqlite3", "psycopg", "psycopg_c", "psycopg_binary", "sqlalchemy",
           "eventsourcing.sqlite", "eventsourcing.postgres", "eventsourcing.persistence")
# Runs the console entry point with argv in this process, then reports what it loaded.
PROBE = ("import json, sys\nsys.argv = ['schedfence', *{argv!r}]\n"
         "from schedfence.infra.cli import main\ntry:\n    main()\nexcept SystemExit:\n"
         "    pass\nprint(json.dumps([len(sys.modules), sorted(m for m in {drivers!r} "
         "if m in sys.modules)]), file=sys.stderr)\n")


@contextmanager
def import_root(checkout: Path) -> Iterator[str]:
    """A directory to put on PYTHONPATH so that ``schedfence`` imports from ``checkout``:
    the package's own files, its subpackages linked in (as setuptools' package-dir maps
    them)."""
    with tempfile.TemporaryDirectory(prefix="schedfence-tree-") as root:
        package = Path(root) / "schedfence"
        package.mkdir()
        for entry in (checkout / "schedfence").iterdir():
            if entry.is_file():
                (package / entry.name).write_bytes(entry.read_bytes())
        for name in PACKAGES:
            (package / name).symlink_to((checkout / name).resolve(), target_is_directory=True)
        yield root


@contextmanager
def pg_database(url: str = DEFAULT_PG) -> Iterator[str]:
    """The URL of a new database on ``url``'s server, dropped afterwards."""
    name = f"bench_cli_{uuid.uuid4().hex[:10]}"
    with _admin(url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with _admin(url) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# Every measured process runs here: ``python -c`` and ``-m`` put their working directory first
# on sys.path, and a checkout's own directory there would win over a --tree on PYTHONPATH.
NEUTRAL = tempfile.gettempdir()


def tree_env(root: str | None) -> dict[str, str] | None:
    """The environment of a process that imports the tree at ``root`` (None: as called)."""
    if root is None:
        return None
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])])}


def cli_argv() -> list[str]:
    """The console script next to this interpreter (what a user runs), else ``-m``."""
    script = Path(sys.executable).with_name("schedfence")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "schedfence.infra.cli"]


def run_ms(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """One process: its wall time and its CPU time (user + system, from the kernel's account of
    the waited-for child), in ms, and its stdout. On a shared machine the CPU figure is the
    steadier one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env,
                          cwd=NEUTRAL)
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{done.stdout}{done.stderr}")
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return wall, cpu, done.stdout


def prepare(store: str, caught_up: bool) -> None:
    """``SCHEDULES`` schedules, two rolled back (status shows a migration too); the operator
    projection caught up, or never built. In process: setup is not timed."""
    from click.testing import CliRunner

    from schedfence.infra.cli.commands import cli

    def ok(*args: str) -> None:
        result = CliRunner().invoke(cli, ["--store", store, "--destination", "sim", *args])
        if result.exit_code != 0:
            raise SystemExit(f"setup failed: {args}: {result.output}")

    for i in range(SCHEDULES):
        ok("schedule", "create", "ns", f"s{i}", "--interval", "1h", "--workflow-type", "W",
           "--task-queue", "q")
    ok("rollback", "ns", "s0")
    ok("rollback", "ns", "s1")
    _many(store)
    if caught_up:
        ok("projection", "catch-up")


def _many(store: str) -> None:
    """``LISTED`` schedules more, through the service (faster than a command each)."""
    from schedfence import make_action, make_spec, open_service
    with open_service(store, "sim") as service:
        for i in range(LISTED):
            service.create_schedule("many", f"m{i:04d}", spec=make_spec(intervals=[(3600, 0)]),
                                    action=make_action(workflow_type="W", task_queue="q",
                                                       workflow_id=f"w{i}"))


Case = tuple[str, list[str], "dict[str, str] | None"]  # label, argv, env


def commands(stores: dict[str, str]) -> list[tuple[str, list[str]]]:
    """The timed commands (argv after ``schedfence``), each with its label."""
    rows = [("schedfence --help", ["--help"]), ("schedfence status --help", ["status", "--help"])]
    for label, store in stores.items():
        rows += [(f"schedfence status ({label})", ["--store", store, "status", "ns", "s0"]),
                 (f"schedfence status --json ({label})",
                  ["--store", store, "status", "ns", "s0", "--json"]),
                 (f"schedfence list, {LISTED + SCHEDULES} rows ({label})",
                  ["--store", store, "list"]),
                 (f"schedfence list --json ({label})", ["--store", store, "list", "--json"])]
    return rows


def cases(stores: dict[str, str], trees: dict[str, str | None]) -> list[Case]:
    """The baseline, then every floor and command once per tree (rows side by side)."""
    cli = cli_argv()
    py = sys.executable
    table: list[Case] = [("baseline: " + BASELINE, [py, "-c", BASELINE], None)]
    rows = [(label, [py, "-c", code]) for label, code in FLOORS] + [
        (label, [*cli, *argv]) for label, argv in commands(stores)]
    for label, argv in rows:
        for name, root in trees.items():
            table.append((f"{label} [{name}]" if name else label, argv, tree_env(root)))
    return table


Times = dict[str, tuple[list[float], list[float]]]


def measure(stores: dict[str, str], runs: int, trees: dict[str, str | None]) -> Times:
    """Every case once a round; a case whose output differs between trees or rounds fails."""
    table = cases(stores, trees)
    times: Times = {label: ([], []) for label, _, _ in table}
    outputs: dict[str, str] = {}
    for _ in range(runs):
        for label, argv, env in table:
            wall, cpu, stdout = run_ms(argv, env)
            key = label.rsplit(" [", 1)[0]
            if outputs.setdefault(key, stdout) != stdout:
                raise SystemExit(f"{label}: output differs from the first run's")
            times[label][0].append(wall)
            times[label][1].append(cpu)
    return times


def report(times: Times, runs: int) -> None:
    walls, cpus = next(iter(times.values()))
    base_wall, base_cpu = median(walls), median(cpus)
    print(f"ms, median (min-max) of {runs} rounds; ratio = median / the baseline's median")
    print(f"  {'':<66}{'wall':>24}{'':>9}{'cpu (user+sys)':>22}")
    for label, (wall, cpu) in times.items():
        ratio, cpu_ratio = median(wall) / base_wall, median(cpu) / base_cpu
        target = ""
        if label.startswith(("schedfence status (", "schedfence status --j", "schedfence list")):
            target = f"  target wall <= 2.0x: {'met' if ratio <= 2.0 else 'not met'}"
        print(f"  {label:<64} {median(wall):7.0f} ({min(wall):.0f}-{max(wall):.0f}) "
              f"{ratio:5.2f}x   {median(cpu):7.0f} ({min(cpu):.0f}-{max(cpu):.0f}) "
              f"{cpu_ratio:5.2f}x{target}")


def loaded(stores: dict[str, str], name: str, env: dict[str, str] | None) -> None:
    """What each command's process loads: how many modules, and which database drivers."""
    for label, argv in commands(stores):
        if "--json" in argv:
            continue
        done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, drivers=DRIVERS)],
                              capture_output=True, text=True, timeout=120, env=env,
                              cwd=NEUTRAL)
        count, drivers = json.loads(done.stderr.strip().splitlines()[-1])
        print(f"  {label}{f' [{name}]' if name else ''}: {count} modules; drivers: "
              f"{', '.join(drivers) or 'none'}")


def breakdown(store: str, label: str, runs: int, env: dict[str, str] | None = None,
              name: str = "", top: int = 8) -> None:
    """Where ``status``'s import time goes: ``-X importtime`` self times summed per package
    (schedfence's by room), median over ``runs`` processes."""
    argv = [sys.executable, "-X", "importtime", "-m", "schedfence.infra.cli", "--store", store,
            "status", "ns", "s0"]
    per_run = []
    for _ in range(runs):
        err = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env,
                             cwd=NEUTRAL).stderr
        groups: dict[str, int] = {}
        for line in err.splitlines():
            fields = line.removeprefix("import time:").split("|")
            if not line.startswith("import time:") or not fields[0].strip().isdigit():
                continue
            parts = fields[2].strip().split(".")
            depth = 3 if parts[:2] == ["schedfence", "infra"] else 2
            key = ".".join(parts[:depth]) if parts[0] == "schedfence" else parts[0]
            groups[key] = groups.get(key, 0) + int(fields[0])
        per_run.append(groups)
    total = median([sum(g.values()) for g in per_run])
    shares = sorted(((median([g.get(k, 0) for g in per_run]), k)
                     for k in set().union(*per_run)), reverse=True)
    print(f"status ({label}){f' [{name}]' if name else ''}: where its imports go (-X importtime "
          f"self times, median of {runs}; total {total / 1000:.0f} ms)")
    for us, key in shares[:top]:
        print(f"  {key:<40} {us / 1000:7.1f} ms  {100 * us / total:5.1f}%")


def open_stores(stack: ExitStack, pg: bool) -> dict[str, str]:
    """Per backend, a store whose projection is caught up and one whose is not."""
    stores = {}
    backends = [("sqlite", lambda: sqlite_store())]
    if pg:
        backends.append(("postgresql", lambda: pg_database()))
    for backend, opener in backends:
        for caught_up, suffix in ((True, ""), (False, ", projection behind")):
            store = stack.enter_context(opener())
            prepare(store, caught_up)
            stores[backend + suffix] = store
    return stores


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds (smoke)")
    parser.add_argument("--no-pg", action="store_true", help="SQLite stores only")
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR",
                        help="A checkout to measure (repeat: side by side in each round).")
    args = parser.parse_args(argv)
    runs = 3 if args.quick else max(3, args.runs)
    pg = not args.no_pg and pg_server_version() is not None
    print(f"machine: {machine()}; PostgreSQL: {pg_server_version() if pg else 'not used'}")
    print(f"cli: {' '.join(cli_argv())}; cpu count {os.cpu_count()}")
    with ExitStack() as stack:
        trees: dict[str, str | None] = {"": None}
        if args.tree:
            named = [spec.partition("=") for spec in args.tree]
            trees = {label: stack.enter_context(import_root(Path(path)))
                     for label, _, path in named}
        stores = open_stores(stack, pg)
        times = measure(stores, runs, trees)
        report(times, runs)
        print("modules loaded:")
        for name, root in trees.items():
            loaded(stores, name, tree_env(root))
        for name, root in trees.items():
            for label in ("sqlite", "postgresql"):
                if label in stores:
                    breakdown(stores[label], label, runs, tree_env(root), name)


if __name__ == "__main__":
    main()
