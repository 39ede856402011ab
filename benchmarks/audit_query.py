"""Audit and operator queries on a store of 10^6 events: generate, project, time each query.

    .venv/bin/python benchmarks/audit_query.py [--events N] [--store PATH] [--repeat K]

The store is filled with real events (domain aggregates and decisions, encoded by the store's own
mapper) written by direct recorder inserts, many thousands per transaction, with timestamps
spread over 30 days. Most schedules complete a migration; a few park, stay pending or are
legacy. The projection is then built once from zero, and every query kind runs ``--repeat``
times through the service (each call includes its catch-up check); the median is printed.
Not a timed test: the figures depend on the machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from schedfence.domain.rollback import decide as d  # noqa: E402
from schedfence.domain.ids import (derive_request_id, destination_workflow_id,  # noqa: E402
                        migration_aggregate_id)
from schedfence.domain.rollback.aggregate import Migration  # noqa: E402
from schedfence.domain.source.schedule import Schedule  # noqa: E402
from schedfence.domain.source.key import ScheduleKey  # noqa: E402
from schedfence.infra.application.service import open_service  # noqa: E402
from schedfence.infra.adapters.destination.simulator import SimulatedDestination  # noqa: E402

NAMESPACES = [f"ns{i:02d}" for i in range(20)]
WORKERS = [f"worker-{i}" for i in range(8)]
ADMINS = ["alice", "bob", "carol"]
SPAN = timedelta(days=30)
INSERT_BATCH = 20_000


def schedule_events(i: int) -> list[Any]:
    """One schedule's events in log order; the mix: 99% complete, the rest need an operator."""
    ns, sid = NAMESPACES[i % len(NAMESPACES)], f"sched-{i:07d}"
    worker, kind = WORKERS[i % len(WORKERS)], i % 1000
    key = ScheduleKey.create(ns, sid)
    n = key.start_incarnation()
    source = Schedule.create(ns, sid, n, False, f"notes {i}")
    out = key.collect_events() + source.collect_events()
    rid = derive_request_id(ns, sid, n)
    mig = Migration.assign_request_id(
        migration_aggregate_id(ns, sid, rid), namespace=ns, schedule_id=sid,
        source_id=str(source.id), incarnation=n, workflow_id=destination_workflow_id(sid),
        request_id=rid, origin="derived", pre_paused=False, pre_notes=f"notes {i}",
        claim_armed=True, actor=ADMINS[i % len(ADMINS)])
    source.fence_for_migration(rid, mig.id)
    out += source.collect_events() + mig.collect_events()
    if kind < 3:  # stuck: pending, never claimed
        return out
    mig.record(d.claim_facts(mig.state, 1, worker))
    run = f"run-{i:07d}"
    if kind < 8:  # parked: a foreign run answered AlreadyStarted
        outcome = d.StartOutcome("already_started", run, run, "foreign-request", "running")
        facts, head = d.decide_start_outcome(mig.state, outcome, 1, worker)
        mig.record(facts)
        mig.record([(Migration.ChainVerified, {
            "request_id": rid, "attempt": 1, "worker": worker, "verdict": "foreign",
            "current_run_id": run, "first_run_id": head, "head_request_ids": ["foreign"]}),
            (Migration.MigrationParked, {"request_id": rid, "attempt": 1, "worker": worker,
                                         "reason": "foreign_destination"})])
        return out + mig.collect_events()
    facts, _ = d.decide_start_outcome(
        mig.state, d.StartOutcome("created", run, run, "", "running"), 1, worker)
    mig.record(facts)
    out += mig.collect_events()
    source.close_for_migration(rid, mig.state.receipt)
    mig.record(d.close_facts(mig.state, 1, worker))
    return out + source.collect_events() + mig.collect_events()


def generate(service: Any, total: int) -> int:
    """Write about ``total`` events; returns how many were written."""
    app, start = service.app, datetime.now(timezone.utc) - SPAN
    step = SPAN / total
    written, i, pending = 0, 0, []
    while written + len(pending) < total:
        for event in schedule_events(i):
            stamp = start + step * (written + len(pending))
            pending.append(app.mapper.to_stored_event(event.model_copy(
                update={"timestamp": stamp})))
        i += 1
        if len(pending) >= INSERT_BATCH:
            app.recorder.insert_events(pending)
            written, pending = written + len(pending), []
    app.recorder.insert_events(pending)
    return written + len(pending)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), result


def query_kinds(service: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    mid_time = datetime.now(timezone.utc) - SPAN / 2
    window = (mid_time.isoformat(), (mid_time + timedelta(hours=1)).isoformat())
    i = service.event_count() // 22  # mid-log (a schedule has ~11 events) ...
    i += max(0, 8 - i % 1000)  # ... and one that completed (see schedule_events)
    key = f"{NAMESPACES[i % len(NAMESPACES)]}/sched-{i:07d}"
    probe = service.audit(schedule=key).entries
    mid, rid = probe[-1].migration_id, probe[-1].request_id
    a = service.audit
    yield "audit --schedule NS/ID", lambda: a(schedule=key)
    yield "audit --request-id", lambda: a(request_id=rid)
    yield "audit --migration", lambda: a(migration_id=mid)
    yield "audit --actor worker-3 (limit 100)", lambda: a(actor="worker-3")
    yield "audit --actor alice --newest-first", lambda: a(actor="alice", newest_first=True)
    yield "audit --since/--until 1h window", lambda: a(since=window[0], until=window[1])
    yield "audit 1h window --newest-first", lambda: a(since=window[0], until=window[1],
                                                      newest_first=True)
    yield "audit --since 6h (recent)", lambda: a(since="6h")
    yield "audit --newest-first (no filter)", lambda: a(newest_first=True)
    yield "audit --actor + 1h window", lambda: a(actor="worker-3", since=window[0],
                                                 until=window[1])
    yield "stats", service.stats
    yield "oncall --stuck-after 3600", lambda: service.oncall(stuck_after_seconds=3600)
    yield "migrations --state parked", lambda: service.migrations_by_state("parked")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--store", default=None, help="SQLite file (reused if it has events)")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rebuild", action="store_true",
                        help="Drop and rebuild the projection first (times a full projection).")
    args = parser.parse_args()
    path = args.store or os.path.join(tempfile.mkdtemp(prefix="schedfence-bench-"), "bench.db")
    service = open_service(f"sqlite:///{path}", SimulatedDestination(), worker_id="bench")
    try:
        if service.event_count() == 0:
            t0 = time.perf_counter()
            n = generate(service, args.events)
            print(f"generated {n} events in {time.perf_counter() - t0:.1f}s -> {path}",
                  flush=True)
        t0 = time.perf_counter()
        applied = service.views.rebuild() if args.rebuild else service.catch_up()
        took = time.perf_counter() - t0
        print(f"projected {applied} events in {took:.1f}s"
              + (f" ({applied / took:,.0f} events/s)" if applied else ""))
        print(f"store: {service.event_count()} events, "
              f"{os.path.getsize(path) / 2**20:.0f} MiB; median of {args.repeat} runs:")
        for label, fn in query_kinds(service):
            ms, result = timed(fn, args.repeat)
            size = len(getattr(result, "entries", result if isinstance(result, list) else [1]))
            print(f"  {label:<38} {ms:8.2f} ms  ({size} rows)")
    finally:
        service.close()


if __name__ == "__main__":
    main()
