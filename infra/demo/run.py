"""``schedfence demo``: the rollback failure modes of docs/protocol.md played on a fresh store.

Each scenario scripts the simulated destination, drives the real service and worker, and prints
what the fenced protocol did by reading the migration's own events back from the log, then
checks the outcome against the protocol's rule. The whole store is run through the invariant
checker last.
"""
from __future__ import annotations

import os
import tempfile
from datetime import timedelta
from typing import Any, Callable

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.errors import (AlreadyExists, Closed, InvalidArgument, MigrationPending,
                                      SentinelBlocked)
from schedfence.domain.ids import (DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE, derive_request_id,
                                   destination_workflow_id)

from schedfence.domain.source.spec import make_spec

from schedfence.infra.application import display as out
from schedfence.infra.demo.handover import s2
from schedfence.infra.demo.legacy import plant_legacy_v1
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.choose import SIM, OpenedDestination, open_destination
from schedfence.infra.adapters.store.pg import StoreUnavailable
from schedfence.infra.adapters.store.eventstore import parse_store_url
from schedfence.infra.demo.kit import NS, CrashOnce, DemoRun, Echo, Scenario


# -- the scenarios (docs/protocol.md, 'Failure modes the protocol survives') -----------------
def f1(run: DemoRun) -> str:
    run.create("f1-foreign", notes="nightly export")
    run.start_foreign("f1-foreign", "order-7781", "order-fulfilment-workflow")
    run.rollback("f1-foreign")
    run.worker()
    run.worker("the foreign run is still running")
    return run.expect_parked_foreign("f1-foreign")


def f2(run: DemoRun) -> str:
    sid = "f2-close-crash"
    run.create(sid)
    run.rollback(sid)
    run.crash.arm("close.before_append")
    run.worker()
    run.check("after the crash: receipt kept, source still fenced",
              run.migration(sid).state == "receipted" and run.source(sid).migration_pending)
    run.refused("user deletes the schedule",
                lambda: run.service.update_schedule(NS, sid, delete=True), MigrationPending)
    run.dest.terminate(NS, destination_workflow_id(sid))
    run.step("env", "the destination run is terminated (the delete's other half)")
    run.step("worker", "a new worker process takes over")
    run.worker()
    run.check("the one start was never repeated", run.starts(sid) == 1)
    return run.expect_completed(sid) + "; nothing resurrected"


def f3(run: DemoRun) -> str:
    sid = "f3-lost-response"
    run.create(sid)
    run.rollback(sid)
    run.dest.inject("start", "lose_response")
    run.step("env", "the next start will commit but lose its response")
    run.worker()
    run.expect_unknown_outcome(sid)
    run.worker()
    run.check("ownership evidence is the chain head", run.evidence(sid) == "chain_head")
    return run.expect_completed(sid)


def f4(run: DemoRun) -> str:
    done, running = "f4-dummy-done", "f4-dummy-running"
    run.create(done)
    run.start_foreign(done, "sentinel-create-1", DUMMY_WORKFLOW_TYPE)
    run.dest.complete(NS, destination_workflow_id(done))
    run.step("env", "the dummy completes (its closed record stays until retention)")
    run.rollback(done)
    run.worker()
    observed = run.expect_completed(done, chains=2)
    run.create(running)
    run.start_foreign(running, "sentinel-create-2", DUMMY_WORKFLOW_TYPE)
    run.refused("rollback", lambda: run.service.rollback(NS, running), SentinelBlocked)
    s = run.source(running)
    run.check("blocked source unchanged (not paused, not fenced)",
              not s.paused and not s.migration_pending)
    return f"after a completed dummy: {observed}; behind a running one: sentinel_blocked"


def f5(run: DemoRun) -> str:
    sid = "f5-derived-id"
    run.create(sid)
    first = run.rollback(sid)
    before = run.service.event_count()
    second = run.rollback(sid)
    derived = derive_request_id(NS, sid, run.source(sid).incarnation)
    run.check("first accepted with the derived id",
              first.outcome == "accepted" and first.request_id == derived)
    run.check("retry already_pending with the same id",
              second.outcome == "already_pending" and second.request_id == first.request_id)
    run.check("retry wrote nothing", run.service.event_count() == before)
    run.worker()
    return f"retry {second.outcome} with the same derived id; {run.expect_completed(sid)}"


def f6(run: DemoRun) -> str:
    owned, foreign = "f6-continued", "f6-foreign-chain"
    run.create(owned)
    run.rollback(owned)
    run.dest.inject("start", "lose_response")
    run.step("env", "the next start will commit but lose its response")
    run.worker()
    run.expect_unknown_outcome(owned)
    run.dest.continue_as_new(NS, destination_workflow_id(owned))
    run.step("env", "our run continues-as-new (the new run has a random request id)")
    run.worker()
    run.check("ownership evidence is the chain head", run.evidence(owned) == "chain_head")
    first = run.expect_completed(owned)
    run.create(foreign)
    run.start_foreign(foreign, "v1-create-req", SCHEDULER_WORKFLOW_TYPE)
    run.dest.continue_as_new(NS, destination_workflow_id(foreign))
    run.step("env", "that foreign chain continues-as-new")
    run.rollback(foreign)
    run.worker()
    return f"own chain: {first}; foreign chain: {run.expect_parked_foreign(foreign)}"


def f7(run: DemoRun) -> str:
    sid = "f7-other-id"
    run.create(sid)
    run.rollback(sid, "rollback-X")
    run.refused("rollback with request id rollback-Y",
                lambda: run.service.rollback(NS, sid, "rollback-Y"), AlreadyExists)
    run.check("the pending migration keeps rollback-X",
              run.migration(sid).request_id == "rollback-X")
    run.worker()
    return f"rollback-Y already_exists; rollback-X {run.expect_completed(sid)}"


def f8(run: DemoRun) -> str:
    sid = "f8-legacy"
    run.create(sid, notes="old release")
    plant_legacy_v1(run.service, NS, sid)  # the v1 record an older release stored
    run.sync()
    before = run.service.event_count()
    run.worker("fail closed: no durable request id")
    m = run.migration(sid)
    run.check("legacy migration stays legacy_pending", m.state == "legacy_pending")
    run.check("worker wrote nothing and never started",
              run.service.event_count() == before and run.starts(sid) == 0)
    run.refused("rollback", lambda: run.service.rollback(NS, sid), AlreadyExists)
    return f"{m.state}, never started, source fenced; a new rollback is already_exists"


def f11(run: DemoRun) -> str:
    sid = "f11-after-done"
    run.create(sid)
    run.rollback(sid, "rollback-F11")
    run.worker()
    done = run.expect_completed(sid)
    before = run.service.event_count()
    again = run.rollback(sid, "rollback-F11")
    run.check("retry after completion already_completed", again.outcome == "already_completed")
    run.check("retry wrote nothing", run.service.event_count() == before)
    run.refused("rollback with a new id", lambda: run.service.rollback(NS, sid, "rollback-new"),
                Closed)
    return f"{done}; the retry is {again.outcome}"


def s1(run: DemoRun) -> str:
    """A schedule that runs: actions at their nominal times, none while fenced, handed over."""
    sid = "s1-every-minute"
    run.create(sid, what="every 60 s, start DigestWorkflow", spec=make_spec(intervals=[(60, 0)]),
               action=make_action(workflow_type="DigestWorkflow", task_queue="digests",
                                  workflow_id="digest"),
               policies=make_policies(overlap="allow_all"))
    cursor = run.service.load.source(NS, sid).state.cursor
    assert cursor is not None  # a schedule with a spec keeps one
    t0 = parse_nominal(cursor)

    def actions() -> list[str]:
        return sorted(w for _, w in run.dest.workflow_ids() if w.startswith("digest-"))

    report = run.service.run_scheduler(now=t0 + timedelta(minutes=3))
    started = actions()
    run.step("source", f"scheduler at +3 min: {report.started} action(s) started: "
                       f"{', '.join(started)}")
    run.check("three actions, one per minute, named <id>-<time>", len(started) == 3)
    run.rollback(sid)
    fenced = run.service.run_scheduler(now=t0 + timedelta(minutes=10))
    run.step("source", f"scheduler at +10 min while fenced: {fenced.started} started, "
                       f"{fenced.ticks} ticks")
    run.check("no action while fenced (I1)", fenced.started == fenced.ticks == 0)
    run.worker()
    after = run.service.run_scheduler(now=t0 + timedelta(minutes=20))
    run.check("no action after the handover", after.started == 0 and actions() == started)
    return f"3 actions before the fence, none after; {run.expect_completed(sid)}"


SCENARIOS: list[tuple[str, str, str, Callable[[DemoRun], str]]] = [
    ("F1", "foreign destination: an unrelated workflow runs at the workflow id",
     "parked foreign_destination, source kept paused, not closed", f1),
    ("F2", "crash before the source close, then the destination run is terminated",
     "close from the receipt only: no second start, one chain", f2),
    ("F3", "committed start, lost response",
     "claim stays consumed; reconcile accepts; one start, one chain, closed", f3),
    ("F4", "dummy sentinel: completed vs running",
     "only a running dummy blocks (sentinel_blocked, nothing written)", f4),
    ("F5", "omitted request id, retried",
     "same derived id; the retry is already_pending, nothing written", f5),
    ("F6", "continue-as-new before the source closes",
     "accept via the chain head's request ids; a foreign chain parks", f6),
    ("F7", "a different request id while one is pending",
     "already_exists, nothing written", f7),
    ("F8", "identity-less (legacy) pending migration",
     "fail closed as legacy_pending; a new rollback is already_exists", f8),
    ("F11", "retry after completion",
     "the same id is already_completed, nothing written", f11),
    ("S1", "a schedule that takes actions is fenced and handed over",
     "actions at their nominal times; none while fenced or after the close", s1),
    ("S2", "a schedule handed over whole, mid-backfill",
     "the handover carries the backfill and the cursor; every time exactly once (I14)", s2),
]


def _open(store_url: str | None) -> tuple[str, MigrationService, OpenedDestination, CrashOnce,
                                           bool]:
    """Open a *fresh* store; the destination is persisted beside it so the store stays whole."""
    if store_url is None:
        path = os.path.join(tempfile.mkdtemp(prefix="schedfence-demo-"), "demo.db")
        store_url = f"sqlite:///{path}"
    url = parse_store_url(store_url)
    shown = url.redacted  # a PostgreSQL URL's password is never printed
    opened, crash = open_destination(SIM, url), CrashOnce()
    dest = opened.destination
    try:
        service = open_service(store_url, dest, worker_id="demo-worker", crash_hook=crash,
                               retry_for=0)  # the demo plays one step at a time
        count, workflows = service.event_count(), dest.workflow_ids()
    except StoreUnavailable:
        opened.close()
        raise  # its own code, and a message without the password
    except Exception as exc:
        opened.close()
        detail = str(exc).replace(url.pg.password, "***") if url.pg and url.pg.password \
            else str(exc)
        raise InvalidArgument(f"cannot open store {shown!r}: {type(exc).__name__}: "
                              f"{detail}") from exc
    if count or workflows:
        service.close()
        opened.close()
        raise InvalidArgument(f"the demo needs an empty store; {shown} already holds "
                              f"{count} events")
    return shown, service, opened, crash, url.kind == "sqlite-memory"


def _play(run: DemoRun, code: str, title: str, expected: str,
          fn: Callable[[DemoRun], str]) -> Scenario:
    sc = Scenario(code, title, expected, [])
    run.current = sc
    run.echo(f"{code} {title}")
    try:
        sc.observed = fn(run)
    except Exception as exc:  # a scenario that blows up is a failed scenario, not a crash
        sc.error = f"{type(exc).__name__}: {exc}"
        run.echo(f"  !! unexpected error: {out.one_line(sc.error)}")
    if sc.passed:
        run.echo(f"  => OK, as the protocol requires: {sc.observed}")
    else:
        failed = "; ".join(c for c, ok in sc.checks if not ok) or "-"
        run.echo(f"  => MISMATCH: {sc.observed or 'no outcome'}; the protocol requires: "
                 f"{expected}; failed checks: {failed}")
    return sc


def run_demo(store_url: str | None, echo: Echo) -> dict[str, Any]:
    """Play every scenario on a fresh store; returns the JSON-ready report."""
    store_url, service, opened, crash, in_memory = _open(store_url)
    dest = opened.destination
    try:
        echo("schedfence demo: the rollback failure modes of docs/protocol.md against the "
             "fenced protocol")
        kept = "in memory, gone when the demo ends" if in_memory else \
            f"kept, with its simulated destination; try schedfence --store {store_url} list"
        echo(f"store: {store_url} ({kept})")
        echo("")
        run = DemoRun(service, dest, crash, echo)
        scenarios = []
        for code, title, expected, fn in SCENARIOS:
            scenarios.append(_play(run, code, title, expected, fn))
            echo("")
        doc = out.verdict(service)
        for line in out.verdict_lines(doc):
            echo(line)
        passed = doc["ok"] and all(sc.passed for sc in scenarios)
        echo(f"demo: {sum(sc.passed for sc in scenarios)}/{len(scenarios)} scenarios match "
             f"the protocol; {'PASS' if passed else 'FAIL'}")
        return {"store": store_url, "passed": passed,
                "scenarios": [sc.to_dict() for sc in scenarios], "invariants": doc}
    finally:
        service.close()
        opened.close()
