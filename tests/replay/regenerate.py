"""Regenerate the replay corpus deliberately: ``python -m tests.replay.regenerate [--force] [NAME...]``.

Records each history with today's code and writes ``tests/replay/histories/NAME.json``. It
refuses to overwrite an existing file unless ``--force``: an old history is the point of the
corpus, so replacing one must be a decision (say why in the commit), never a side effect.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

from tests.helpers import MEMORY, World, new_world
from tests.replay import corpus
from tests.replay.scenarios import SCENARIOS
from tests.replay.workload import random_history

# name: (seed, steps); long enough to cross every kind of fault, small enough to read.
RANDOM = {"random_seed_7": (7, 200), "random_seed_61": (61, 200), "random_seed_101": (101, 200)}


Maker = Callable[[], tuple[World, dict[str, Any]]]  # the world, and facts for the header
NewStore = Callable[[], str]  # a fresh, empty store URL for each history


def _scenario(fn: Callable[[World], None], store: str) -> tuple[World, dict[str, Any]]:
    world = new_world(store)
    fn(world)
    return world, {}


def _random(seed: int, steps: int, store: str) -> tuple[World, dict[str, Any]]:
    world, stats = random_history(seed, steps, store)
    return world, {"workload": stats}


def builders(new_store: NewStore = lambda: MEMORY) -> dict[str, tuple[dict[str, Any], Maker]]:
    out: dict[str, tuple[dict[str, Any], Maker]] = {}
    for name, (code, title, fn) in SCENARIOS.items():
        out[name] = ({"failure_mode": code, "title": title, "generator": f"scenario {name}"},
                     lambda fn=fn: _scenario(fn, new_store()))
    for name, (seed, steps) in RANDOM.items():
        out[name] = ({"failure_mode": "random", "title": f"seeded random workload, seed "
                      f"{seed}, {steps} actions", "generator": f"workload seed={seed} "
                      f"steps={steps}"},
                     lambda seed=seed, steps=steps: _random(seed, steps, new_store()))
    return out


def record(name: str, meta: dict[str, Any], make: Maker) -> str:
    world, extra = make()
    try:
        doc = corpus.build(name, {**meta, **extra}, world.service.app.notifications())
    finally:
        world.service.close()
    flagged = bool(doc["expected"]["final_violations"]) or any(
        s["violations"] for s in doc["expected"]["steps"])
    if flagged != (meta["failure_mode"] == "-"):  # only the corrupt history may violate
        raise SystemExit(f"{name}: unexpected invariant verdicts; not recorded")
    text = corpus.dumps(doc)
    if len(text.encode()) > corpus.MAX_BYTES:
        raise SystemExit(f"{name}: {len(text)} bytes is over {corpus.MAX_BYTES}; shorten it")
    return text


def main(argv: list[str] | None = None, new_store: NewStore = lambda: MEMORY) -> int:
    """``new_store`` gives each history its own empty store (tests record on PostgreSQL too)."""
    parser = argparse.ArgumentParser(prog="python -m tests.replay.regenerate",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="histories to record (default: all)")
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    parser.add_argument("--refold", action="store_true",
                        help="keep every file's events; re-derive only its expectations")
    args = parser.parse_args(argv)
    if args.refold:
        for path in corpus.files():
            if not args.names or corpus.key(path) in args.names:
                path.write_text(corpus.dumps(corpus.refold(corpus.load(path))))
                print(f"refolded {corpus.key(path)}")
        return 0
    available = builders(new_store)
    names = args.names or list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        parser.error(f"unknown histories: {', '.join(unknown)} (known: {', '.join(available)})")
    existing = [n for n in names if (corpus.HISTORIES / f"{n}.json").exists()]
    if existing and not args.force:
        print(f"refusing to overwrite {len(existing)} recorded histories "
              f"({', '.join(existing)}); pass --force to replace them deliberately",
              file=sys.stderr)
        return 1
    texts = {name: record(name, *available[name]) for name in names}  # all, then write
    corpus.HISTORIES.mkdir(exist_ok=True)
    for name, text in texts.items():
        (corpus.HISTORIES / f"{name}.json").write_text(text)
        print(f"recorded {name}.json ({len(text.encode())} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
