"""Fault injection at every boundary of an action start, on a store with the simulator as the
runner: a crash before or after the tick's append, after the call, and a runner that fails
before committing, is unavailable, or loses its answer. Whatever happens, each nominal time
starts at most once (the deterministic request id makes every retry a dedupe) and, once the
faults stop, none is lost; the checker agrees over the whole history."""
from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.source.spec import make_spec, times_between
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service

NS, SID = "ns", "s"
SPEC = make_spec(intervals=[(2, 0)])
POINTS = ("before_tick_save", "after_tick_save", "after_start_call")


class Crash(Exception):
    """The scheduler process dies here."""


def crash_at(point: str):
    armed = [True]

    def hook(where: str) -> None:
        if where == point and armed[0]:
            armed[0] = False
            raise Crash(point)
    return hook


def run(store_url: str, point: str | None, fault: str | None) -> None:
    dest = SimulatedDestination()
    with open_service(store_url, dest) as svc:
        svc.create_schedule(NS, SID, spec=SPEC, action=make_action(
            workflow_type="W", task_queue="q", workflow_id="act"),
            policies=make_policies(overlap="allow_all"))
        t0 = parse_nominal(svc.load.source(NS, SID).state.cursor)
        if fault:
            dest.inject("start", fault)
        if point:
            with pytest.raises(Crash):
                svc.run_scheduler(now=t0 + timedelta(seconds=4), crash_hook=crash_at(point))
        end = t0 + timedelta(seconds=12)
        for k in range(2, 13):  # the faults are over: later passes finish the work
            svc.run_scheduler(now=t0 + timedelta(seconds=k))
        check(svc, dest, t0, end)


def check(svc, dest: SimulatedDestination, t0: datetime, end: datetime) -> None:
    ids = sorted(w for ns, w in dest.workflow_ids() if ns == NS)
    assert all(dest.created_count(NS, w) == 1 for w in ids)  # at most once
    expected = [f"act-{t.strftime('%Y-%m-%dT%H:%M:%SZ')}" for t in times_between(SPEC, t0, end)]
    assert ids == expected  # and none lost
    assert svc.load.source(NS, SID).state.issued == []
    assert svc.verify() == []


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_boundary_of_a_start_neither_repeats_nor_loses_a_time(store_url, point):
    run(store_url, point, None)


@pytest.mark.parametrize("fault", ["unavailable", "fail_before_commit", "lose_response"])
@pytest.mark.parametrize("point", [None, "after_start_call"])
def test_a_runner_fault_with_or_without_a_crash_neither_repeats_nor_loses_a_time(
        store_url, point, fault):
    run(store_url, point, fault)
