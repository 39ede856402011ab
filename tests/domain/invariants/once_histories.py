"""A real, clean history of a schedule that ran, backfilled and was handed over (the
simulator's destination), for I21's tests: the checker's exactly-once oracle over the log
(domain/invariants/exactly_once_log.py), and the edits that corrupt it."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from schedfence.domain.source.action import make_action, make_policies, nominal_text
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import MigrationService, open_service

NS, SID, PREFIX = "once", "s", "act"
T0 = datetime(2026, 3, 2, 12, 0, 30, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def program() -> dict[str, Any]:
    return {"spec": make_spec(intervals=[(60, 0)]),
            "action": make_action(workflow_type="W", task_queue="q", workflow_id=PREFIX),
            "policies": make_policies(overlap="allow_all")}


def handed_over(store: str = "sqlite:///:memory:", crash_hook: Any = None,
                ) -> tuple[MigrationService, SimulatedDestination, Clock]:
    """Created at T0; three spec times started by the source; a backfill of 11:51-11:55
    requested, then, before any pass processed it, a rollback handed the schedule over with
    the backfill whole (the worker run until idle)."""
    clock = Clock()
    sim = SimulatedDestination(seed=3, clock=clock)
    svc = open_service(store, sim, worker_id="w", claim_grace=0, retry_for=0,
                       crash_hook=crash_hook)
    svc.create_schedule(NS, SID, now=T0, **program())
    clock.now = T0 + 3 * MINUTE
    svc.run_scheduler(now=clock.now)
    svc.backfill_schedule(NS, SID, T0 - 10 * MINUTE, T0 - 5 * MINUTE, now=clock.now)
    clock.now += 100 * timedelta(seconds=1)
    svc.rollback(NS, SID, request_id="r1", actor="admin")
    try:
        svc.run_until_idle(retry_for=0)
    except Exception:  # a crash the caller armed
        if crash_hook is None:
            raise
    return svc, sim, clock


def events(svc: MigrationService) -> list[Any]:
    return [svc.app.mapper.to_domain_event(n) for n in svc.app.notifications()]


def listing(sim: SimulatedDestination) -> list[str]:
    """The server's ``<action workflow id>-<time>`` workflows: the source's actions and the
    destination schedule's starts (both run on the one server)."""
    ids = [wid for ns, wid in sim.workflow_ids() if ns == NS and wid.startswith(f"{PREFIX}-")]
    return ids + [f"{PREFIX}-{nominal_text(t)}"
                  for t in sim.schedule_starts(NS, destination_workflow_id(SID))]


def paused_and_updated() -> MigrationService:
    """Created at T0; paused 12:02:30-12:06:30 with no pass between (the unpause moves the
    cursor: the stretch is never caught up); the spec changed to every 90 s at 12:07:40;
    passes at 12:03:00-ish and 12:09:30; then handed over."""
    clock = Clock()
    sim = SimulatedDestination(seed=3, clock=clock)
    svc = open_service("sqlite:///:memory:", sim, worker_id="w", claim_grace=0, retry_for=0)
    svc.create_schedule(NS, SID, now=T0, **program())
    for step, change in ((2 * MINUTE, {"paused": True}), (4 * MINUTE, {"paused": False}),
                         (70 * timedelta(seconds=1), {"spec": make_spec(intervals=[(90, 0)])})):
        clock.now += step
        svc.update_schedule(NS, SID, now=clock.now, **change)
    clock.now += 110 * timedelta(seconds=1)
    svc.run_scheduler(now=clock.now)
    svc.rollback(NS, SID, request_id="r1", actor="admin")
    svc.run_until_idle(retry_for=0)
    return svc
