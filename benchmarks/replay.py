"""Replay of a 10^4-event migration vs a bare loop of its reducer, with and without snapshots.

    .venv/bin/python benchmarks/replay.py [--events N] [--runs K] [--pg URL | --no-pg] [--quick]
                                          [--before REV | --before none]

On each store (a SQLite file, and a fresh schema on PostgreSQL) it builds one long but
protocol-valid migration: a rollback whose start committed but whose answer was lost, reconciled
again and again while the destination stays unavailable (``ChainVerified(verdict="unavailable")``),
then verified and completed. The first steps and the last ones are the real worker against a
simulated destination with injected faults; the long middle is recorded through the aggregate
API with the worker's own decision (``decide_chain`` on an unavailable observation), because
driving the worker 10^4 times would replay the growing history on every attempt. The invariant
checker must accept the store before anything is timed.

Each run times, side by side: reading the rows, decoding them, the baseline (a bare
``for e in events: state = evolve_migration(state, e)`` over the already-decoded events), a full
``app.repository.get`` without snapshots, and loads that start from a snapshot 100 events behind
the head and at the head. It also times loading a normal 6-event migration with snapshots off
and on (nothing to snapshot yet), which is what decides the default. Medians of ``--runs``.
Not a timed test: the figures depend on the machine.

Side by side in the same runs it times the previous read path: the mapper, the row-id
conversion and ``fold_events`` of git revision ``--before`` (by default the last commit with
the per-row read path), loaded from git and run on the same rows with today's domain code;
and the floor: pydantic's validation of each payload alone (``validate_json``, none of our
code), which any load that validates what it reads must pay on top of selecting the rows.
"""
from __future__ import annotations

import argparse
import gc
import functools
import importlib
import subprocess
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable
from uuid import UUID

from benchkit import DEFAULT_PG, ROOT, env_var, machine, median, pg_server_version, pg_store, \
    spread, sqlite_store, timed_ms
from eventsourcing.application import project_aggregate  # noqa: E402
from eventsourcing.utils import resolve_topic

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback.aggregate import evolve_migration
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.adapters.store.eventstore import FenceApplication, open_application, parse_store_url

NS, WORKER = "bench", "bench-worker"
SAVE_BATCH = 1000  # events per append while recording the long middle
SNAPSHOT_LAG = 100  # the "snapshot behind the head" case
TARGET = 0.5  # baseline_time / replay_time
BEFORE = "8642d70"  # the read path before this change (per-row json.loads, mutate per event)


@dataclass
class Before:
    """The read path of an earlier revision: its mapper, row-id conversion and fold."""

    rev: str
    mapper: Any
    convert: Callable[[Any], Any]
    fold: Callable[[Any, Any], Any]


@dataclass
class Fixture:
    """One store: a plain app (no snapshot store) and a snapshotting app on the same data."""

    plain: FenceApplication
    snap: FenceApplication
    long_a: UUID  # snapshot SNAPSHOT_LAG events behind its head
    long_b: UUID  # snapshot at its head
    short: UUID  # a normal happy-path migration
    events: int
    before: Before | None = None


@dataclass
class Figures:
    runs: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, ms: float) -> None:
        self.runs.setdefault(name, []).append(ms)

    def med(self, name: str) -> float:
        return median(self.runs[name])


def build_long_migration(svc: MigrationService, schedule_id: str, total: int) -> UUID:
    """A completed migration of exactly ``total`` events (see the module docstring)."""
    dest = svc.destination
    svc.create_schedule(NS, schedule_id)
    dest.inject("start", "lose_response")  # the start commits; the worker never hears back
    mid = UUID(svc.rollback(NS, schedule_id).migration_id)
    if svc.worker.attempt(mid) != "backoff":  # claim + start issued + answer "unavailable"
        raise RuntimeError("expected the lost start to leave the migration claimed")
    mig = svc.app.repository.get(mid)
    unavailable = d.ChainObservation(failure="unavailable", detail="describe: unavailable")
    for _ in range(total - mig.version - 3):  # 3 = ChainVerified(owned), receipt, close
        mig.record(d.decide_chain(mig.state, unavailable, mig.state.attempts + 1, WORKER))
        if len(mig.pending_events) >= SAVE_BATCH:
            svc.app.save(mig)
    svc.app.save(mig)
    svc.worker.attempt(mid)  # the destination answers again: owned, receipt, close
    mig = svc.app.repository.get(mid)
    if (mig.version, mig.state.phase) != (total, "completed"):
        raise RuntimeError(f"built v{mig.version} {mig.state.phase}, wanted v{total} completed")
    return mid


def build_short_migration(svc: MigrationService, schedule_id: str) -> UUID:
    svc.create_schedule(NS, schedule_id)
    mid = UUID(svc.rollback(NS, schedule_id).migration_id)
    svc.worker.attempt(mid)
    return mid


def prepare(url: str, total: int) -> tuple[Fixture, MigrationService]:
    with env_var("SCHEDFENCE_SNAPSHOT_INTERVAL", None):  # the baseline store: no snapshots
        svc = open_service(url, SimulatedDestination(), worker_id=WORKER)
    long_a = build_long_migration(svc, "long-a", total)
    long_b = build_long_migration(svc, "long-b", total)
    short = build_short_migration(svc, "short")
    problems = svc.verify()
    if problems:
        raise RuntimeError(f"the invariant checker rejected the history: {problems[:3]}")
    with env_var("SCHEDFENCE_SNAPSHOT_INTERVAL", "100"):
        snap = open_application(parse_store_url(url))
    snap.take_snapshot(long_a, version=total - SNAPSHOT_LAG)
    snap.take_snapshot(long_b, version=total)
    return Fixture(svc.app, snap, long_a, long_b, short, total), svc


def one_run(fx: Fixture, figures: Figures, short_loads: int) -> None:
    """Every figure once, interleaved, so each is measured beside its baseline."""
    def time_it(name: str, fn: Callable[[], Any]) -> Any:
        gc.collect()
        ms, result = timed_ms(fn)
        figures.add(name, ms)
        return result

    rows = time_it("select", lambda: fx.plain.recorder.select_events(fx.long_a))
    events = time_it("decode", lambda: [fx.plain.mapper.to_domain_event(r) for r in rows])
    payloads = validation_inputs(rows, events)
    time_it("validate", lambda: [v.validate_json(p) for v, p in payloads])
    folded = time_it("baseline", lambda: fold(events))
    replayed = time_it("replay", lambda: fx.plain.repository.get(fx.long_a))
    loads = [replayed]
    if fx.before is not None:
        b = fx.before
        old_rows = time_it("select_before", lambda: select_with(fx, b.convert, fx.long_a))
        time_it("decode_before", lambda: [b.mapper.to_domain_event(r) for r in old_rows])
        loads.append(time_it("replay_before", lambda: load_before(fx, fx.long_a)))
    time_it("replay_library", lambda: fx.plain.repository.get(
        fx.long_a, projector_func=project_aggregate))
    behind = time_it("snap_behind", lambda: fx.snap.repository.get(fx.long_a))
    time_it("snap_head", lambda: fx.snap.repository.get(fx.long_b))
    if not (folded == replayed.state == behind.state) or replayed != behind or \
            any(load != replayed for load in loads):
        raise RuntimeError("a load disagrees with the bare fold")
    shorts = [("short_off", lambda: fx.plain.repository.get(fx.short)),
              ("short_on", lambda: fx.snap.repository.get(fx.short))]
    if fx.before is not None:
        shorts.append(("short_before", lambda: load_before(fx, fx.short)))
    for name, load in shorts:
        time_it(name, lambda: [load() for _ in range(short_loads)])
        figures.runs[name][-1] /= short_loads  # the mean of one load


def validation_inputs(rows: list[Any], events: list[Any]) -> list[tuple[Any, bytes]]:
    """Each row's pydantic validator and its payload without the ``class_version`` marker
    (pydantic would refuse the extra key): what pydantic alone must do per row. Checked to
    validate to exactly the decoded events, outside the timings."""
    payloads = []
    for row in rows:
        cls = resolve_topic(row.topic)
        marker = b',"class_version":%d' % getattr(cls, "class_version", 1)
        payloads.append((cls.__pydantic_validator__, row.state.replace(marker, b"")))
    if [v.validate_json(p) for v, p in payloads] != events:
        raise RuntimeError("validating the payloads alone does not give the decoded events")
    return payloads


def select_with(fx: Fixture, convert: Callable[[Any], Any], aggregate_id: UUID) -> Any:
    """``select_events`` with the recorder converting row ids with ``convert`` (SQLite)."""
    recorder = fx.plain.recorder
    if not hasattr(recorder, "convert_originator_id"):  # PostgreSQL: a uuid column
        return recorder.select_events(aggregate_id)
    ours = recorder.convert_originator_id
    recorder.convert_originator_id = convert
    try:
        return recorder.select_events(aggregate_id)
    finally:
        recorder.convert_originator_id = ours


def load_before(fx: Fixture, aggregate_id: UUID) -> Any:
    """A full load as the ``--before`` revision did it (no snapshots)."""
    b = fx.before
    assert b is not None
    rows = select_with(fx, b.convert, aggregate_id)
    return b.fold(None, map(b.mapper.to_domain_event, rows))


@functools.cache  # once per revision: its classes register their topics once
def previous_read_path(rev: str) -> Before | None:
    """Revision ``rev``'s store codec.py and eventstore.py, loaded from git as modules
    of their own (today's domain and everything else they import); None without git."""
    modules = {}
    aliases = _old_homes()
    try:
        for path in ("codec.py", "eventstore.py"):
            source = _git_show(rev, f"infra/adapters/store/{path}", f"infra/store/{path}")
            if source is None:
                return None
            name = f"replay_before_{path[:-3]}"
            module = sys.modules[name] = types.ModuleType(name)  # dataclasses look it up
            if path == "codec.py":  # the old eventstore imports the old codec by its old name
                sys.modules["schedfence.infra.store.codec"] = module
            exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
            modules[path] = module
    finally:
        for old in [*aliases, "schedfence.infra.store.codec"]:
            sys.modules.pop(old, None)
    codec, store = modules.values()
    fold_events = getattr(store, "fold_events", None) or codec.fold_events  # in codec since 0.5.0
    return Before(rev, codec.PydanticMapper(transcoder=codec.JSONBytes()),
                  codec.lenient_uuid, fold_events)


def _old_homes() -> list[str]:
    """Before 0.5.0 the modules an old store imports lived elsewhere (CHANGELOG.md): each old
    name is aliased to today's module while the old source runs, then removed."""
    homes = {"schedfence.domain.migration": "schedfence.domain.rollback.aggregate",
             "schedfence.domain.schedule": "schedfence.domain.source.schedule",
             "schedfence.infra.store": "schedfence.infra.adapters.store",
             "schedfence.infra.store.pg": "schedfence.infra.adapters.store.pg"}
    for old, new in homes.items():
        if old not in sys.modules:
            sys.modules[old] = importlib.import_module(new)
    return list(homes)


def _git_show(rev: str, *paths: str) -> str | None:
    """The first of ``paths`` that revision ``rev`` holds (the store moved under
    infra/adapters/ in 0.5.0); None without git or without any of them."""
    for path in paths:
        try:
            return subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"],
                                  capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            continue
    return None


def fold(events: list[Any]) -> Any:
    state = None
    for e in events:
        state = evolve_migration(state, e)
    return state


def check_snapshots(fx: Fixture) -> None:
    """The head snapshot loads to exactly what a full replay gives (outside the timings)."""
    if fx.snap.repository.get(fx.long_b) != fx.plain.repository.get(fx.long_b):
        raise RuntimeError("snapshot load differs from full replay")


def report(kind: str, fx: Fixture, f: Figures) -> None:
    n, base = fx.events, f.med("baseline")
    print(f"{kind}: one migration of {n} events; checker: ok; "
          f"median (min–max) of {len(f.runs['replay'])} runs, ms")
    rev = fx.before.rev if fx.before is not None else ""
    rows = [
        ("select rows (recorder.select_events)", "select", None),
        (f"    same, read path of {rev}", "select_before", None),
        ("decode (mapper.to_domain_event)", "decode", None),
        (f"    same, read path of {rev}", "decode_before", None),
        ("pydantic validation alone (validate_json)", "validate", None),
        ("baseline: bare evolve_migration loop", "baseline", None),
        ("(a) repository.get, full replay", "replay", base),
        (f"    same, read path of {rev}", "replay_before", base),
        ("    same, the library's projector", "replay_library", base),
        (f"(b) snapshot {SNAPSHOT_LAG} behind head + tail", "snap_behind", base),
        ("(c) snapshot at head", "snap_head", base),
        ("short 6-event migration, snapshots off", "short_off", None),
        (f"    same, read path of {rev}", "short_before", None),
        ("short 6-event migration, snapshots on", "short_on", None),
    ]
    for label, key, against in rows:
        if key not in f.runs:
            continue
        line = f"  {label:<42} {spread(f.runs[key]):>34}"
        if against is not None:
            ratio = against / f.med(key)
            met = "met" if ratio >= TARGET else "NOT met"
            line += f"  ratio {ratio:6.2f}x (target >= {TARGET}x: {met})"
        print(line)
    report_shares(f, n)


def report_shares(f: Figures, n: int) -> None:
    full, base = f.med("replay"), f.med("baseline")
    shares = {"select": f.med("select"), "decode": f.med("decode"), "reducer": base}
    shares["rest of the fold"] = full - sum(shares.values())
    print("  where full replay goes: " + ", ".join(
        f"{k} {v / full:.0%}" for k, v in shares.items())
        + f"; per event {full * 1000 / n:.1f} µs vs {base * 1000 / n:.1f} µs bare fold")
    validate = f.med("validate")
    floor = f.med("select") + validate + base
    print(f"  floor: select + pydantic validation alone + bare fold = {floor:.1f} ms: a load "
          f"that validates every stored event reaches at most {base / floor:.2f}x, and "
          f"{base / (validate + base):.2f}x with a free select (validation alone is "
          f"{validate / base:.2f}x the bare fold)")
    print(f"  snapshots on cost a short load {f.med('short_on') - f.med('short_off'):+.2f} ms "
          f"({f.med('short_on') / f.med('short_off'):.2f}x)", flush=True)


def bench(kind: str, url: str, args: argparse.Namespace) -> None:
    fx, svc = prepare(url, args.events)
    fx.before = None if args.before == "none" else previous_read_path(args.before)
    if fx.before is None and args.before != "none":
        print(f"  (no previous read path: git cannot show {args.before})")
    try:
        check_snapshots(fx)
        figures = Figures()
        for _ in range(args.runs):
            one_run(fx, figures, args.short_loads)
        report(kind, fx, figures)
    finally:
        fx.snap.close()
        svc.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--short-loads", type=int, default=200,
                        help="loads of the short migration per run (its figure is the mean)")
    parser.add_argument("--pg", default=DEFAULT_PG, help="PostgreSQL server/database to use "
                        "(a fresh schema is made and dropped)")
    parser.add_argument("--no-pg", action="store_true")
    parser.add_argument("--before", default=BEFORE, help="git revision whose read path to "
                        "time side by side (default: %(default)s, the per-row read path), "
                        "or 'none'")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 1000 events, 3 runs, 20 short loads")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.runs, args.short_loads = 1000, 3, 20
    if args.events < SNAPSHOT_LAG + 20 or args.runs < 1:
        parser.error(f"--events must be at least {SNAPSHOT_LAG + 20} and --runs at least 1")
    print(f"machine: {machine()}", flush=True)
    with sqlite_store() as url:
        bench("sqlite-file", url, args)
    if args.no_pg:
        print("postgresql: skipped (--no-pg)")
    elif pg_server_version(args.pg) is None:
        print(f"postgresql: skipped ({parse_store_url(args.pg).redacted} unreachable)")
    else:
        with pg_store(args.pg) as url:
            bench("postgresql", url, args)


if __name__ == "__main__":
    sys.exit(main())
