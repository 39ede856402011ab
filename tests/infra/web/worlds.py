"""Stores the overview pages show: every owner and both directions on a few keys (``mixed``),
and many keys, some handed over by a batch job (``many``)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.jobs import RunOptions, run_job
from tests.helpers import NS, World, new_world, start_foreign

SPEC = make_spec(intervals=[(3600, 0)])
PLAIN, PARKED, HANDED, PAUSED, GONE, BACK = ("plain-1", "parked-1", "handed-1", "handed-paused",
                                             "gone-1", "back-1")
JOB = "job-half"


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


def _create(w: World, sid: str, paused: bool = False) -> None:
    w.service.create_schedule(NS, sid, paused=paused, notes="pre", spec=SPEC,
                              action=make_action(workflow_type="W", task_queue="q",
                                                 workflow_id=f"act-{sid}"),
                              policies=make_policies(overlap="allow_all"))


def mixed(store: str) -> World:
    """A source schedule; a rollback parked on a foreign run; two handed over (one paused);
    a deleted schedule; and one handed over and taken back by a forward migration."""
    clock = Clock()
    w = new_world(store, SimulatedDestination(clock=clock))
    for sid in (PLAIN, PARKED, HANDED, GONE, BACK):
        _create(w, sid)
    _create(w, PAUSED, paused=True)
    start_foreign(w.dest, PARKED, workflow_type="order-fulfilment-workflow")
    for sid in (PARKED, HANDED, PAUSED, BACK):
        w.service.rollback(NS, sid, f"R-{sid}", actor="alice")
    w.service.run_until_idle()
    w.service.update_schedule(NS, GONE, delete=True)
    clock.now += timedelta(minutes=5)
    w.service.forward(NS, BACK, "F-back", actor="bob")
    w.service.run_until_idle()
    return w


MISSING = "missing-1"  # a schedule the job names that does not exist: skipped
FOREIGN = "s0001"  # somebody else's workflow holds its destination id: parked


def many(store: str, n: int, handed: int) -> World:
    """``n`` source schedules ``s0000``...; job ``JOB`` asks to hand the first ``handed`` to
    Temporal and ``MISSING``: all complete but ``FOREIGN`` (parked) and ``MISSING`` (skipped)."""
    w = new_world(store)
    for i in range(n):
        w.service.create_schedule(NS, f"s{i:04d}", notes="bulk")
    start_foreign(w.dest, FOREIGN)
    run_job(w.service, JOB, NS, "workflow",
            schedule_ids=[f"s{i:04d}" for i in range(handed)] + [MISSING],
            options=RunOptions(actor="carol", page_size=100))
    return w
