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
SQLite store); the row after is our store module as it is, which also imports psycopg and
SQLAlchemy. Last, where ``status``'s import time goes, package by package.

    .venv/bin/python benchmarks/cli_startup.py [--quick] [--runs N]

It measures the checkout that ``schedfence`` imports from the caller's directory and PYTHONPATH.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import machine, median, sqlite_store  # noqa: E402

BASELINE = "import pydantic, eventsourcing"
FLOORS = (
    ("python -c pass", "pass"),
    ("floor: one pydantic model, eventsourcing application",
     "import eventsourcing.application, pydantic\nclass M(pydantic.BaseModel):\n    x: int"),
    ("floor: domain events (Schedule, Migration)",
     "import schedfence.domain.schedule, schedfence.domain.migration"),
    ("floor: + eventsourcing's application and SQLite store",
     "import schedfence.domain.schedule, schedfence.domain.migration, "
     "eventsourcing.application, eventsourcing.sqlite"),
    ("our store module (+ psycopg, SQLAlchemy at import)",
     "import schedfence.domain.schedule, schedfence.domain.migration, "
     "schedfence.infra.store.eventstore"),
    ("import schedfence.infra.cli", "import schedfence.infra.cli"),
)
SCHEDULES = 3  # in the store `status` reads; two of them with a migration


def cli_argv() -> list[str]:
    """The console script next to this interpreter (what a user runs), else ``-m``."""
    script = Path(sys.executable).with_name("schedfence")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "schedfence.infra.cli"]


def run_ms(argv: list[str]) -> tuple[float, float]:
    """One process: its wall time and its CPU time (user + system, from the kernel's account of
    the waited-for child), in ms. On a shared machine the CPU figure is the steadier one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
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


def cases(store: str) -> list[tuple[str, object]]:
    cli = cli_argv()
    py = sys.executable
    base = [("baseline: " + BASELINE, [py, "-c", BASELINE])]
    floors = [(label, [py, "-c", code]) for label, code in FLOORS]
    commands = [
        ("schedfence --help", [*cli, "--help"]),
        ("schedfence status (sqlite)", [*cli, "--store", store, "status", "ns", "s0"]),
        # a new schedule each round: every timed rollback is accepted, not already_pending
        ("schedfence rollback --destination sim (sqlite)",
         lambda n: [*cli, "--store", store, "--destination", "sim", "rollback", "ns",
                    f"s{SCHEDULES + n}"]),
    ]
    return base + floors + commands


def measure(store: str, runs: int) -> dict[str, tuple[list[float], list[float]]]:
    table = cases(store)
    times: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label, _ in table}
    for n in range(runs):
        for label, argv in table:
            wall, cpu = run_ms(argv(n) if callable(argv) else argv)
            times[label][0].append(wall)
            times[label][1].append(cpu)
    return times


def report(times: dict[str, tuple[list[float], list[float]]], runs: int) -> None:
    walls, cpus = next(iter(times.values()))
    base_wall, base_cpu = median(walls), median(cpus)
    print(f"ms, median (min-max) of {runs} rounds; ratio = median / the baseline's median")
    print(f"  {'':<54}{'wall':>24}{'':>9}{'cpu (user+sys)':>22}")
    for label, (wall, cpu) in times.items():
        ratio, cpu_ratio = median(wall) / base_wall, median(cpu) / base_cpu
        target = ""
        if label.startswith("schedfence status"):
            target = f"  target wall <= 2.0x: {'met' if ratio <= 2.0 else 'not met'}"
        print(f"  {label:<52} {median(wall):7.0f} ({min(wall):.0f}-{max(wall):.0f}) "
              f"{ratio:5.2f}x   {median(cpu):7.0f} ({min(cpu):.0f}-{max(cpu):.0f}) "
              f"{cpu_ratio:5.2f}x{target}")


def breakdown(store: str, runs: int, top: int = 12) -> None:
    """Where ``status``'s import time goes: ``-X importtime`` self times summed per package
    (schedfence's by room), median over ``runs`` processes. The rest of its wall time is the
    interpreter and the command's own work (opening the store, reading two aggregates)."""
    argv = [sys.executable, "-X", "importtime", "-m", "schedfence.infra.cli", "--store", store,
            "status", "ns", "s0"]
    per_run = []
    for _ in range(runs):
        err = subprocess.run(argv, capture_output=True, text=True, timeout=120).stderr
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
    print(f"status: where its imports go (-X importtime self times, median of {runs}; "
          f"total {total / 1000:.0f} ms)")
    for us, key in shares[:top]:
        print(f"  {key:<40} {us / 1000:7.1f} ms  {100 * us / total:5.1f}%")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 rounds (smoke)")
    args = parser.parse_args(argv)
    runs = 3 if args.quick else max(3, args.runs)
    print(f"machine: {machine()}")
    print(f"cli: {' '.join(cli_argv())}; cpu count {os.cpu_count()}")
    with sqlite_store() as store:
        prepare(store, runs)
        times = measure(store, runs)
        report(times, runs)
        breakdown(store, runs)


if __name__ == "__main__":
    main()
