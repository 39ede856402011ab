"""CLI start-up, side by side: a fresh ``schedfence`` process for ``--help``, ``status`` and
``rollback --destination sim`` on a SQLite file, against the baseline
``python -c "import pydantic, eventsourcing"`` measured in the same rounds (each round runs every
case once, so load on the machine hits them alike). Prints, per case, the median (min-max) of
--runs rounds of its wall time and of its CPU time (user + system: steadier on a shared machine),
each as a ratio to the baseline's (target for ``status``: wall at most 2x).

The floor rows are imports alone, no command: what ``status`` cannot avoid. ``import pydantic``
is lazy (it loads pydantic's model machinery with the first model class), so the first row is
the least any process that decodes a pydantic event pays; the next add the domain's aggregates
and events, then eventsourcing's application and SQLite recorder (all ``status`` needs to read a
SQLite store); the row after is our store module as it is. Last, for ``status``: how many
modules it loads, whether SQLAlchemy or psycopg among them, and where its import time goes,
package by package.

    .venv/bin/python benchmarks/cli_startup.py [--quick] [--runs N] [--tree LABEL=DIR ...]

Without ``--tree`` it measures the checkout that ``schedfence`` imports from the caller's
directory and PYTHONPATH. Each ``--tree LABEL=DIR`` names a checkout (a directory holding
``schedfence/``, ``domain/``, ``projections/`` and ``infra/``, e.g. a copy of the tree before a
change): every case but the baseline then runs once per tree in every round, side by side.
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
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import machine, median, sqlite_store  # noqa: E402

BASELINE = "import pydantic, eventsourcing"
FLOORS = (
    ("python -c pass", "pass"),
    ("floor: one pydantic model, eventsourcing application",
     "import eventsourcing.application, pydantic\nclass M(pydantic.BaseModel):\n    x: int"),
    ("floor: domain events (Schedule, Migration)",
     "import schedfence.domain.source.schedule, schedfence.domain.rollback.aggregate"),
    ("floor: + eventsourcing's application and SQLite store",
     "import schedfence.domain.source.schedule, schedfence.domain.rollback.aggregate, "
     "eventsourcing.application, eventsourcing.sqlite"),
    ("our store module",
     "import schedfence.domain.source.schedule, schedfence.domain.rollback.aggregate, "
     "schedfence.infra.adapters.store.eventstore"),
    ("import schedfence.infra.cli", "import schedfence.infra.cli"),
)
SCHEDULES = 3  # in the store `status` reads; two of them with a migration
PACKAGES = ("domain", "projections", "infra")  # schedfence.<name> lives in <checkout>/<name>
STATUS_PROBE = ("import json, sys\nsys.argv = ['schedfence', '--store', {store!r}, 'status', "
                "'ns', 's0']\nfrom schedfence.infra.cli.commands import main\ntry:\n    main()\n"
                "except SystemExit:\n    pass\nprint(json.dumps([len(sys.modules), "
                "sorted({{m.split('.')[0] for m in sys.modules}} & {{'sqlalchemy', 'psycopg', "
                "'temporalio'}})]), file=sys.stderr)\n")


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


def run_ms(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """One process: its wall time and its CPU time (user + system, from the kernel's account of
    the waited-for child), in ms. On a shared machine the CPU figure is the steadier one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(argv)}\n{done.stdout}{done.stderr}")
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return wall, cpu


def prepare(store: str, fresh: int) -> None:
    """``SCHEDULES`` schedules (two rolled back: status shows a migration too), and ``fresh``
    more that the timed rollbacks take, one per round. In process: setup is not timed."""
    from click.testing import CliRunner

    from schedfence.infra.cli.commands import cli

    def ok(*args: str) -> None:
        result = CliRunner().invoke(cli, ["--store", store, "--destination", "sim", *args])
        if result.exit_code != 0:
            raise SystemExit(f"setup failed: {args}: {result.output}")

    for i in range(SCHEDULES + fresh):
        ok("schedule", "create", "ns", f"s{i}", "--interval", "1h", "--workflow-type", "W",
           "--task-queue", "q")
    ok("rollback", "ns", "s0")
    ok("rollback", "ns", "s1")


Case = tuple[str, object, "dict[str, str] | None"]  # label, argv (or argv of the round), env


def cases(store: str, trees: dict[str, str | None]) -> list[Case]:
    """The baseline, then every floor and command once per tree (rows side by side)."""
    cli = cli_argv()
    py = sys.executable
    table: list[Case] = [("baseline: " + BASELINE, [py, "-c", BASELINE], None)]
    rows = [(label, [py, "-c", code]) for label, code in FLOORS] + [
        ("schedfence --help", [*cli, "--help"]),
        ("schedfence status (sqlite)", [*cli, "--store", store, "status", "ns", "s0"]),
        ("schedfence rollback --destination sim (sqlite)", None)]
    for label, argv in rows:
        for i, (name, root) in enumerate(trees.items()):
            shown = f"{label} [{name}]" if name else label
            if argv is None:  # a new schedule each round and tree: every rollback is accepted
                table.append((shown, _rollback_argv(cli, store, i, len(trees)), tree_env(root)))
            else:
                table.append((shown, argv, tree_env(root)))
    return table


def _rollback_argv(cli: list[str], store: str, tree: int, trees: int) -> object:
    return lambda n: [*cli, "--store", store, "--destination", "sim", "rollback", "ns",
                      f"s{SCHEDULES + n * trees + tree}"]


def measure(store: str, runs: int, trees: dict[str, str | None]
            ) -> dict[str, tuple[list[float], list[float]]]:
    table = cases(store, trees)
    times: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label, _, _ in table}
    for n in range(runs):
        for label, argv, env in table:
            wall, cpu = run_ms(argv(n) if callable(argv) else argv, env)  # type: ignore[operator]
            times[label][0].append(wall)
            times[label][1].append(cpu)
    return times


def report(times: dict[str, tuple[list[float], list[float]]], runs: int) -> None:
    walls, cpus = next(iter(times.values()))
    base_wall, base_cpu = median(walls), median(cpus)
    print(f"ms, median (min-max) of {runs} rounds; ratio = median / the baseline's median")
    print(f"  {'':<66}{'wall':>24}{'':>9}{'cpu (user+sys)':>22}")
    for label, (wall, cpu) in times.items():
        ratio, cpu_ratio = median(wall) / base_wall, median(cpu) / base_cpu
        target = ""
        if label.startswith("schedfence status"):
            target = f"  target wall <= 2.0x: {'met' if ratio <= 2.0 else 'not met'}"
        print(f"  {label:<64} {median(wall):7.0f} ({min(wall):.0f}-{max(wall):.0f}) "
              f"{ratio:5.2f}x   {median(cpu):7.0f} ({min(cpu):.0f}-{max(cpu):.0f}) "
              f"{cpu_ratio:5.2f}x{target}")


def loaded(store: str, name: str, env: dict[str, str] | None) -> None:
    """What one ``status`` process loads: how many modules, and which of the heavy ones."""
    done = subprocess.run([sys.executable, "-c", STATUS_PROBE.format(store=store)],
                          capture_output=True, text=True, timeout=120, env=env)
    count, heavy = json.loads(done.stderr.strip().splitlines()[-1])
    print(f"status{f' [{name}]' if name else ''}: {count} modules in sys.modules; "
          f"of SQLAlchemy, psycopg, Temporal's SDK: {', '.join(heavy) or 'none'}")


def breakdown(store: str, runs: int, env: dict[str, str] | None = None, name: str = "",
              top: int = 12) -> None:
    """Where ``status``'s import time goes: ``-X importtime`` self times summed per package
    (schedfence's by room), median over ``runs`` processes. The rest of its wall time is the
    interpreter and the command's own work (opening the store, reading two aggregates)."""
    argv = [sys.executable, "-X", "importtime", "-m", "schedfence.infra.cli", "--store", store,
            "status", "ns", "s0"]
    per_run = []
    for _ in range(runs):
        err = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env).stderr
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
    print(f"status{f' [{name}]' if name else ''}: where its imports go (-X importtime self "
          f"times, median of {runs}; "
          f"total {total / 1000:.0f} ms)")
    for us, key in shares[:top]:
        print(f"  {key:<40} {us / 1000:7.1f} ms  {100 * us / total:5.1f}%")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds (smoke)")
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR",
                        help="A checkout to measure (repeat: side by side in each round).")
    args = parser.parse_args(argv)
    runs = 3 if args.quick else max(3, args.runs)
    print(f"machine: {machine()}")
    print(f"cli: {' '.join(cli_argv())}; cpu count {os.cpu_count()}")
    with ExitStack() as stack:
        trees: dict[str, str | None] = {"": None}
        if args.tree:
            named = [spec.partition("=") for spec in args.tree]
            trees = {label: stack.enter_context(import_root(Path(path)))
                     for label, _, path in named}
        store = stack.enter_context(sqlite_store())
        prepare(store, runs * len(trees))
        times = measure(store, runs, trees)
        report(times, runs)
        for name, root in trees.items():
            loaded(store, name, tree_env(root))
        for name, root in trees.items():
            breakdown(store, runs, tree_env(root), name)


if __name__ == "__main__":
    main()
