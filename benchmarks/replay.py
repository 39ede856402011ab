"""Replay of a 10^4-event migration vs a bare loop of its reducer, with and without snapshots.

    .venv/bin/python benchmarks/replay.py [--events N] [--runs K] [--pg URL | --no-pg] [--quick]

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
"""
from __future__ import annotations

import argparse
import gc
import sys
from dataclasses import dataclass, field
from typing import Any, Callable
from uuid import UUID

from benchkit import DEFAULT_PG, env_var, machine, median, pg_server_version, pg_store, \
    spread, sqlite_store, timed_ms
from eventsourcing.application import project_aggregate  # noqa: E402

from schedfence.domain import decisions as d
from schedfence.domain.migration import evolve_migration
from schedfence.infra.service import MigrationService, open_service
from schedfence.infra.destination.simulator import SimulatedDestination
from schedfence.infra.store.eventstore import FenceApplication, open_application, parse_store_url

NS, WORKER = "bench", "bench-worker"
SAVE_BATCH = 1000  # events per append while recording the long middle
SNAPSHOT_LAG = 100  # the "snapshot behind the head" case
TARGET = 0.5  # baseline_time / replay_time


@dataclass
class Fixture:
    """One store: a plain app (no snapshot store) and a snapshotting app on the same data."""

    plain: FenceApplication
    snap: FenceApplication
    long_a: UUID  # snapshot SNAPSHOT_LAG events behind its head
    long_b: UUID  # snapshot at its head
    short: UUID  # a normal happy-path migration
    events: int


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
    folded = time_it("baseline", lambda: fold(events))
    replayed = time_it("replay", lambda: fx.plain.repository.get(fx.long_a))
    time_it("replay_library", lambda: fx.plain.repository.get(
        fx.long_a, projector_func=project_aggregate))
    behind = time_it("snap_behind", lambda: fx.snap.repository.get(fx.long_a))
    time_it("snap_head", lambda: fx.snap.repository.get(fx.long_b))
    if not (folded == replayed.state == behind.state) or replayed != behind:
        raise RuntimeError("a load disagrees with the bare fold")
    for name, app in (("short_off", fx.plain), ("short_on", fx.snap)):
        time_it(name, lambda: [app.repository.get(fx.short) for _ in range(short_loads)])
        figures.runs[name][-1] /= short_loads  # the mean of one load


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
    rows = [
        ("select rows (recorder.select_events)", "select", None),
        ("decode (mapper.to_domain_event)", "decode", None),
        ("baseline: bare evolve_migration loop", "baseline", None),
        ("(a) repository.get, full replay", "replay", base),
        ("    same, the library's projector", "replay_library", base),
        (f"(b) snapshot {SNAPSHOT_LAG} behind head + tail", "snap_behind", base),
        ("(c) snapshot at head", "snap_head", base),
        ("short 6-event migration, snapshots off", "short_off", None),
        ("short 6-event migration, snapshots on", "short_on", None),
    ]
    for label, key, against in rows:
        line = f"  {label:<42} {spread(f.runs[key]):>34}"
        if against is not None:
            ratio = against / f.med(key)
            met = "met" if ratio >= TARGET else "NOT met"
            line += f"  ratio {ratio:6.2f}x (target >= {TARGET}x: {met})"
        print(line)
    full = f.med("replay")
    shares = {"select": f.med("select"), "decode": f.med("decode"), "reducer": base}
    shares["other mutate"] = full - sum(shares.values())
    print("  where full replay goes: " + ", ".join(
        f"{k} {v / full:.0%}" for k, v in shares.items())
        + f"; per event {full * 1000 / n:.1f} µs vs {base * 1000 / n:.1f} µs bare fold")
    print(f"  snapshots on cost a short load {f.med('short_on') - f.med('short_off'):+.2f} ms "
          f"({f.med('short_on') / f.med('short_off'):.2f}x)", flush=True)


def bench(kind: str, url: str, args: argparse.Namespace) -> None:
    fx, svc = prepare(url, args.events)
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
