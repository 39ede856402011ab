"""Forward migration under faults, in the simulator: the worker crashes once at every
boundary of the handoff (before and after each append and each call to the Temporal side), or
an update's or a delete's answer is lost, or a describe is unavailable; a new worker takes
over. Every run ends with the Temporal schedule deleted, one source incarnation created, the
checker clean, and each nominal time started exactly once across both sides (I14)."""
from __future__ import annotations

from datetime import timedelta

import pytest

from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
from schedfence.domain.ports import DestinationNotFound
from schedfence.domain.source.runs import ActionStartIssued
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from tests.helpers import Crash
from tests.infra.engines.test_handover_exactly_once import crash_once
from tests.infra.forward.test_forward import NS, SID, SPEC, Clock, on_temporal

POINTS = tuple(f"forward.{step}.{when}" for step, whens in (
    ("describe", ("before_call", "after_call")),
    ("fence", ("before_append", "after_append", "before_call", "after_call")),
    ("TemporalFenced", ("before_append", "after_append")),
    ("create", ("before_append", "after_append")),
    ("delete", ("before_append", "after_append", "before_call", "after_call")),
    ("complete", ("before_append", "after_append"))) for when in whens)
FAULTS = (("update", "lose_response"), ("delete_schedule", "lose_response"),
          ("describe", "unavailable"), ("update", "unavailable"))


def handed_back(tmp_path, point=None, fault=None):
    clock = Clock()
    dest = SimulatedDestination(clock=clock)
    store = f"sqlite:///{tmp_path / 'f.db'}"
    with open_service(store, dest, worker_id="w1", crash_hook=crash_once(point)) as svc:
        first = on_temporal(svc, clock)
        clock.now += timedelta(minutes=4, seconds=3)
        temporal = dest.temporal_starts(NS, SID, clock.now)
        svc.forward(NS, SID, "F1")
        if fault:
            dest.inject(*fault)
        try:
            svc.run_until_idle(retry_for=0)
        except Crash:
            pass
    with open_service(store, dest, worker_id="w2") as svc:
        svc.forward(NS, SID, "F1")  # the caller retries too: the same migration
        svc.run_until_idle(retry_for=0)
        assert svc.forward_state(NS, SID, "F1").phase == "completed"
        with pytest.raises(DestinationNotFound):
            dest.describe_schedule(NS, SID)
        assert svc.load.key(NS, SID).state.incarnation == 2
        svc.run_scheduler(now=clock.now + timedelta(minutes=3))
        started = [svc.app.mapper.to_domain_event(n).nominal
                   for n in svc.app.notifications((ActionStartIssued.TOPIC,))]
        from schedfence.domain.source.action import parse_nominal
        verdict = check_exactly_once(Owed(SPEC, first, clock.now + timedelta(minutes=3)),
                                     [parse_nominal(t) for t in started], temporal)
        assert verdict.ok, verdict.describe()
        assert svc.verify() == []


@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_boundary_is_finished_by_another_worker(tmp_path, point):
    handed_back(tmp_path, point=point)


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f"{f[0]}-{f[1]}")
def test_lost_and_unknown_answers_are_finished(tmp_path, fault):
    handed_back(tmp_path, fault=fault)
