"""The modules a command walks through: a CLI rollback, a worker drain and one scheduled action,
each run for real in a fresh ``python`` process on a SQLite file with the simulator destination
(``--destination sim``), traced with ``sys.setprofile``.

**What is counted.** The probe imports ``schedfence.infra.cli.commands`` untraced, then
profiles the click group's call as the console script makes it (``cli.main(args=[--store URL,
--destination sim, COMMAND ...])``: parsing, the group's callback, the command, its output).
The setup runs in earlier processes, untraced. A module counts when a Python function in the
checkout's ``domain/``, ``projections/`` or ``infra/`` runs, except while a module is imported
(module and class bodies, decorators: anything under importlib's ``_find_and_load``).

**Rooms.** By path, so the layouts before issue 29 (``infra/worker``, ``infra/store``, ...) and
after (``infra/engines``, ``infra/adapters/store``, ...) both classify; ``ENTRY``,
``APPLICATION``, ``ENGINES`` and ``ADAPTERS`` below name the folders and old top-level modules
of each role. ``infra/pacing.py`` (imports nothing of ours; the store uses it) is an adapter.

**Steps back up a layer.** Layers, high to low, as pyproject.toml's import-linter contract
orders them: entry > application > engines > adapters > projections > store (the store adapter,
pacing) > domain. A call's caller is the nearest enclosing frame in a project module (frames of
libraries, and of ``infra/pacing.py`` whose ``retry_call`` runs what it is handed, are skipped:
a callback counts as the module that called the library). Each distinct (caller module, callee
module) pair going to a higher layer is one step; "into a closure": its callee is a lambda or a
nested function (a callback handed down, not an import); "(store above projections)": the
count with the store ranked among the other adapters. Methods that dataclasses and named
tuples generate (their code has no file) count nowhere.

``--whole-process`` counts from the process's start, imports included (no module bodies): the
reading closest to issue 29's baseline figures (55 and 63 modules).

    .venv/bin/python benchmarks/walk.py                      # this checkout
    .venv/bin/python benchmarks/walk.py --root base=/work/wt-base --root .   # side by side
    .venv/bin/python benchmarks/walk.py --json | --markdown    # --markdown: tables and trees
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("domain", "projections", "infra")
LAYERS = ("entry", "application", "engines", "adapters", "projections", "domain")  # high to low
INFRA_ROLES = LAYERS[:4]
RANK = {**{name: i for i, name in enumerate(LAYERS)}, "unclassified": 99}
# The order imports follow (pyproject.toml's import-linter "layers" contract): the store and
# pacing sit below the projections, which are handed the store's engine, codec and recorder.
LEVELS = ("entry", "application", "engines", "adapters", "projections", "store", "domain")
LEVEL_RANK = {**{name: i for i, name in enumerate(LEVELS)}, "unclassified": 99}
ENTRY = {"cli", "http", "web", "demo"}
APPLICATION = {"application", "replay", "service", "schedule_commands", "forward_commands",
               "bulk_commands", "recovery", "jobs", "views", "narration", "offline"}
ENGINES = {"engines", "worker"}
ADAPTERS = {"adapters", "store", "destination", "replication", "observability", "pacing"}

# Runs in the traced process: argv = [result file, staged package dir, click args ...].
PROBE = r'''
import json, sys, threading
out_path, prefix, whole, *argv = sys.argv[1:]
cache, first, edges, ran = {}, {}, {}, {}
local = threading.local()  # local.depth: imports under way in this thread

def module_of(code):
    name = cache.get(code.co_filename)
    if name is None:
        name, fn = "", code.co_filename
        if fn.startswith(prefix) and fn.endswith(".py"):
            parts = fn[len(prefix):-3].split("/")
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        cache[code.co_filename] = name
    return name

def profile(frame, event, arg):
    code = frame.f_code
    loading = code.co_name == "_find_and_load" and code.co_filename.startswith("<frozen")
    if event == "return":
        if loading:
            local.depth = max(0, getattr(local, "depth", 0) - 1)
        return
    if event != "call":
        return
    if loading:
        local.depth = getattr(local, "depth", 0) + 1
        return
    if (getattr(local, "depth", 0) and whole == "no") or code.co_name == "<module>":
        return
    name = module_of(code)
    if not name:
        return
    caller, up = frame.f_back, ""
    while caller is not None and not up:
        up = module_of(caller.f_code)
        up = "" if up == "infra.pacing" else up  # runs what it is handed, as a library would
        caller = caller if up else caller.f_back
    if name not in first:
        first[name] = (len(first), up if up != name else "")
    ran.setdefault(name, set()).add(code.co_qualname)
    if up and up != name and (up, name) not in edges:
        edges[up, name] = (caller.f_code.co_qualname, code.co_qualname)

code = 0
if whole == "yes":
    sys.setprofile(profile)
import schedfence
from schedfence.infra.cli.commands import cli
assert schedfence.__file__.startswith(prefix), (schedfence.__file__, prefix)
threading.setprofile(profile)
sys.setprofile(profile)
try:
    cli.main(args=argv, prog_name="schedfence", standalone_mode=True)
except SystemExit as stop:
    code = stop.code or 0
finally:
    sys.setprofile(None)
    threading.setprofile(None)
with open(out_path, "w") as f:
    json.dump({"exit": code, "order": sorted(first, key=first.get),
               "first_caller": {name: up for name, (_, up) in first.items()},
               "functions": {name: sorted(names) for name, names in ran.items()},
               "edges": [[*edge, *names] for edge, names in sorted(edges.items())]}, f)
'''


# -- the checkouts -------------------------------------------------------------------------------
def stage(checkout: Path, where: Path) -> Path:
    """``where/schedfence``: the checkout's package files, its rooms linked in (as
    tests/staging.py and setuptools' package-dir map them); returns the package directory."""
    package = where / "schedfence"
    package.mkdir(parents=True)
    for entry in (checkout / "schedfence").iterdir():
        if entry.is_file():
            (package / entry.name).write_bytes(entry.read_bytes())
    for room in ROOMS:
        (package / room).symlink_to((checkout / room).resolve(), target_is_directory=True)
    return package


class Tree:
    """One checkout, staged, and the commands run against it."""

    def __init__(self, label: str, checkout: Path, stack: ExitStack, whole: bool) -> None:
        self.label, self.whole = label, whole
        self.tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="walk-")))
        self.package = stage(checkout, self.tmp / "stage")
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(self.tmp / "stage"), *filter(None, [os.environ.get("PYTHONPATH")])]))
        self.count = 0

    def store(self) -> str:
        self.count += 1
        return f"sqlite:///{self.tmp}/store{self.count}.db"

    def cli(self, store: str, *args: str) -> str:
        """An untraced command (the setup)."""
        done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                               "--destination", "sim", *args], env=self.env, cwd=self.tmp,
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise SystemExit(f"{self.label}: setup {args} failed: {done.stderr}")
        return done.stdout

    def traced(self, store: str, *args: str) -> tuple[dict[str, Any], str]:
        result = self.tmp / f"trace{self.count}.json"
        done = subprocess.run([sys.executable, "-c", PROBE, str(result), f"{self.package}/",
                               "yes" if self.whole else "no",
                               "--store", store, "--destination", "sim", *args],
                              env=self.env, cwd=self.tmp, capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0 or not result.exists():
            raise SystemExit(f"{self.label}: traced {args} failed: {done.stderr}")
        trace = json.loads(result.read_text())
        if trace["exit"] != 0:
            raise SystemExit(f"{self.label}: {args} exited {trace['exit']}: {done.stdout}"
                             f"{done.stderr}")
        return trace, done.stdout


# -- the walks -----------------------------------------------------------------------------------
def walk_rollback(tree: Tree) -> dict[str, Any]:
    store = tree.store()
    tree.cli(store, "schedule", "create", "ns", "s0")
    trace, out = tree.traced(store, "rollback", "ns", "s0")
    _expect(tree, "rollback accepted" in out, "rollback not accepted", out)
    return trace


def walk_drain(tree: Tree, migrations: int = 3) -> dict[str, Any]:
    store = tree.store()
    for i in range(migrations):
        tree.cli(store, "schedule", "create", "ns", f"s{i}")
        tree.cli(store, "rollback", "ns", f"s{i}")
    trace, out = tree.traced(store, "worker", "--until-idle")
    _expect(tree, f"migrations: completed {migrations}" in out, "not all completed", out)
    return trace


def walk_action(tree: Tree) -> dict[str, Any]:
    """A schedule every second, created just after a whole second; the pass runs just after the
    next one: exactly one time is due."""
    store = tree.store()
    tree.cli(store, "schedule", "create", "ns", "warm")  # the store and the simulator's tables
    time.sleep(1.02 - math.modf(time.time())[0])
    tree.cli(store, "schedule", "create", "ns", "a", "--interval", "1s", "--workflow-type", "W",
             "--task-queue", "q")
    time.sleep(max(0.0, math.ceil(time.time()) + 0.05 - time.time()))
    trace, out = tree.traced(store, "scheduler", "--once")
    _expect(tree, "started: 1" in out.splitlines(), "not exactly one action started", out)
    return trace


def _expect(tree: Tree, ok: bool, what: str, out: str) -> None:
    if not ok:
        raise SystemExit(f"{tree.label}: {what}:\n{out}")


WALKS: dict[str, tuple[str, Callable[[Tree], dict[str, Any]]]] = {
    "rollback": ("`schedfence rollback ns s0` (one schedule in the store)", walk_rollback),
    "drain": ("`schedfence worker --until-idle` (3 rollbacks requested)", walk_drain),
    "action": ("`schedfence scheduler --once` (one action due, every 1s)", walk_action),
}


# -- classifying ---------------------------------------------------------------------------------
def layer(module: str) -> str:
    room, _, rest = module.partition(".")
    if room != "infra":
        return room
    head = rest.split(".")[0]
    for role, names in (("entry", ENTRY), ("application", APPLICATION), ("engines", ENGINES),
                        ("adapters", ADAPTERS)):
        if head in names:
            return role
    return "application" if head == "" else "unclassified"


def level(module: str) -> str:
    """``layer``, with the store (and pacing) apart from the other adapters."""
    parts = module.split(".")
    store = parts[1:2] in (["store"], ["pacing"]) or parts[1:3] == ["adapters", "store"]
    return "store" if parts[0] == "infra" and store else layer(module)


def summarise(trace: dict[str, Any]) -> dict[str, Any]:
    order: list[str] = trace["order"]
    by_layer = {name: sum(layer(m) == name for m in order) for name in LAYERS}
    infra = [m for m in order if m.startswith("infra")]
    upward = [edge for edge in trace["edges"]
              if LEVEL_RANK[level(edge[1])] < LEVEL_RANK[level(edge[0])]]
    by_role = [edge for edge in trace["edges"] if RANK[layer(edge[1])] < RANK[layer(edge[0])]]
    return {"total": len(order), "domain": by_layer["domain"],
            "projections": by_layer["projections"], "infra": len(infra),
            "infra_by_role": {r: by_layer[r] for r in INFRA_ROLES},
            "unclassified": [m for m in order if layer(m) == "unclassified"],
            "upward_steps": len(upward),
            "upward_to_closures": sum(_closure(edge[3]) for edge in upward), "upward": upward,
            "upward_store_above_projections": len(by_role),
            "infra_modules": infra, "modules": order, "functions": trace["functions"],
            "edges": trace["edges"], "first_caller": trace["first_caller"]}


def _closure(qualname: str) -> bool:
    """A function defined inside another (a lambda, a closure): one handed to the caller."""
    return "<locals>" in qualname or "<lambda>" in qualname


# -- printing ------------------------------------------------------------------------------------
def figure_rows(results: dict[str, dict[str, Any]], walk: str) -> list[tuple[str, list[str]]]:
    cells = [results[label][walk] for label in results]
    rows = [(name, [str(c[key]) for c in cells]) for name, key in (
        ("total modules", "total"), ("domain", "domain"), ("projections", "projections"),
        ("infra", "infra"))]
    rows += [(f"  infra {r}", [str(c["infra_by_role"][r]) for c in cells]) for r in INFRA_ROLES]
    rows.append(("steps back up a layer", [str(c["upward_steps"]) for c in cells]))
    rows.append(("  of which into a closure", [str(c["upward_to_closures"]) for c in cells]))
    rows.append(("  (store above projections)",
                 [str(c["upward_store_above_projections"]) for c in cells]))
    return rows


def tree(result: dict[str, Any]) -> list[str]:
    """The modules as a tree: each under the module that first called into it, in order of
    first entry; ``^`` marks a module first entered from a lower layer."""
    caller = result["first_caller"]
    children: dict[str, list[str]] = {}
    for m in result["modules"]:
        children.setdefault(caller.get(m, ""), []).append(m)
    lines: list[str] = []

    def draw(parent: str, indent: str) -> None:
        kids = children.get(parent, [])
        for i, m in enumerate(kids):
            last = i == len(kids) - 1
            up = "^" if parent and LEVEL_RANK[level(m)] < LEVEL_RANK[level(parent)] else " "
            branch = "" if not parent else ("└─ " if last else "├─ ")
            lines.append(f"{layer(m):<12}{up} {indent}{branch}{m.removeprefix('infra.')}")
            draw(m, indent + ("" if not parent else ("   " if last else "│  ")))
    draw("", "")
    return lines


def shared(walks: dict[str, Any]) -> list[str]:
    """The infra modules every walk passes through (opening and closing the service ...)."""
    return [m for m in walks["rollback"]["infra_modules"]
            if all(m in w["infra_modules"] for w in walks.values())]


def print_text(results: dict[str, dict[str, Any]]) -> None:
    labels = list(results)
    for walk, (title, _) in WALKS.items():
        print(f"walk {walk}: {title}")
        print(f"  {'':<26}" + "".join(f"{label:>14}" for label in labels))
        for name, cells in figure_rows(results, walk):
            print(f"  {name:<26}" + "".join(f"{c:>14}" for c in cells))
        for label in labels:
            r = results[label][walk]
            print(f"  [{label}] infra modules in order of first entry:")
            for m in r["infra_modules"]:
                print(f"    {layer(m):<12} {m}")
            for a, b, caller, callee in r["upward"]:
                print(f"  [{label}] step up: {a}:{caller} ({level(a)}) -> {b}:{callee} "
                      f"({level(b)})")
            for m in r["unclassified"]:
                print(f"  [{label}] unclassified: {m}")
        print()
    for label, walks in results.items():
        print(f"[{label}] infra modules every walk passes through: {len(shared(walks))}: "
              + ", ".join(m.removeprefix("infra.") for m in shared(walks)))


def print_markdown(results: dict[str, dict[str, Any]]) -> None:
    labels = list(results)
    for walk, (title, _) in WALKS.items():
        print(f"**{walk}**: {title}\n")
        print("| | " + " | ".join(labels) + " |")
        print("|---|" + "---:|" * len(labels))
        for name, cells in figure_rows(results, walk):
            print(f"| {name.strip()} | " + " | ".join(cells) + " |")
        r = results[labels[-1]][walk]
        print(f"\nThe walk at {labels[-1]}: each module under the one that first called it "
              "(`^`: from a lower layer).\n")
        print("```")
        print("\n".join(tree(r)))
        print("```\n")
        for a, b, caller, callee in r["upward"]:
            print(f"- step up: `{a}.{caller}` → `{b}.{callee}`")
        print()
    common = shared(results[labels[-1]])
    print(f"Every walk at {labels[-1]} passes through these {len(common)} infra modules: "
          + ", ".join(f"`{m.removeprefix('infra.')}`" for m in common) + ".")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", action="append", default=[], metavar="[LABEL=]PATH",
                        help="A checkout to measure (repeatable: side by side); default: this.")
    parser.add_argument("--json", action="store_true", help="One JSON document.")
    parser.add_argument("--whole-process", action="store_true",
                        help="Trace from the process's start, code run by imports included "
                             "(module bodies still not): a wider reading, for comparison.")
    parser.add_argument("--markdown", action="store_true", help="Tables and lists to paste.")
    args = parser.parse_args()
    roots = []
    for spec in args.root or [str(ROOT)]:
        label, _, path = spec.rpartition("=")
        checkout = Path(path).resolve()
        roots.append((label or _describe(checkout), checkout))
    results: dict[str, dict[str, Any]] = {}
    with ExitStack() as stack:
        for label, checkout in roots:
            tree = Tree(label, checkout, stack, args.whole_process)
            results[label] = {walk: summarise(run(tree)) for walk, (_, run) in WALKS.items()}
    if args.json:
        print(json.dumps(results, indent=2))
    elif args.markdown:
        print_markdown(results)
    else:
        print_text(results)


def _describe(checkout: Path) -> str:
    """The checkout's short commit, ``+`` when its rooms have changes not committed."""
    try:
        head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--",
                                *ROOMS], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return checkout.name
    return (head + ("+" if dirty.strip() else "")) or checkout.name


if __name__ == "__main__":
    main()
