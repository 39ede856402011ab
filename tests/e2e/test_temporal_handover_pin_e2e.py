"""A limited handover's pin on a real Temporal dev server, 1 s intervals: a worker that dies
between the create and the settle, and again between the settle's clear of the pin and its
patch, and a settle asked once more after that, still start every owed time exactly once
(the action runs time out after 1 s, so a time started twice would show as a second run);
a read-back while the pin stands shows the user's own spec."""
from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from temporalio.api.workflowservice.v1 import DescribeScheduleRequest

from schedfence.domain.source.action import make_action, make_policies, nominal_text, parse_nominal
from schedfence.domain.rollback.handover import handover_of
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE, destination_workflow_id
from schedfence.domain.ports import StartWorkflow
from schedfence.domain.source.program import Program
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.spec import make_spec, times_between
from schedfence.infra.adapters.destination import temporal_schedule
from schedfence.infra.adapters.destination.schedule_proto import pin_of, pin_stands
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env  # noqa: F401
from tests.e2e.test_temporal_handover_e2e import listed

SPEC = make_spec(intervals=[(1, 0)])
LIMIT = 12


class Crash(Exception):
    """The worker died here."""


def limited_start(tag: str, cursor: datetime) -> StartWorkflow:
    sid = f"pin-{tag}"
    program = Program(SPEC, make_action(workflow_type=f"Pin{tag}", task_queue=f"q-{tag}",
                                        workflow_id=f"act-{tag}", execution_timeout=1),
                      make_policies(overlap="allow_all"), LIMIT)
    state = replace(ScheduleState(NS, sid, 1, False, ""), **program.fields(),
                    cursor=nominal_text(cursor))
    h = handover_of(state, False, "").model_dump(mode="json")
    return StartWorkflow(NS, destination_workflow_id(sid), f"R-{tag}", SCHEDULER_WORKFLOW_TYPE,
                         {"paused": False, "notes": "", "handover": h})


def test_a_settle_after_crashes_around_the_pin_starts_each_owed_time_once(
        temporal_env: TemporalEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    dest, tag = temporal_env.destination, uuid.uuid4().hex[:8]
    cursor = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=3)
    start = limited_start(tag, cursor)
    accepted = dest.start_workflow(start)
    assert accepted.started is True
    chain = accepted.first_execution_run_id  # the receipt's
    raw = temporal_env.ops.run(lambda: temporal_env.ops.client.workflow_service
                               .describe_schedule(DescribeScheduleRequest(
                                   namespace=NS, schedule_id=f"pin-{tag}")))
    pin = pin_of(raw.memo)
    assert pin is not None and pin_stands(raw.schedule.spec, raw.memo)
    snapshot = dest.describe_schedule(NS, f"pin-{tag}")  # a read-back while the pin stands
    assert snapshot.program["spec"]["start_at"] is None  # the user's spec, not the pin

    # The worker dies after the receipt: nothing settles until well past the pin, while the
    # server's own starts (from the pin on) lower the count the create set.
    time.sleep(max((pin - datetime.now(timezone.utc)).total_seconds(), 0) + 3)
    patch = temporal_schedule._patch

    def crash(*args):
        raise Crash()

    monkeypatch.setattr(temporal_schedule, "_patch", crash)
    with pytest.raises(Crash):  # it dies again between the clear and the patch
        dest.settle_handover(start, chain)
    monkeypatch.setattr(temporal_schedule, "_patch", patch)
    first = dest.settle_handover(start, chain)  # the pin is found cleared: the patch, once
    again = dest.settle_handover(start, chain)  # and asked again (its record was lost)
    owed = times_between(SPEC, cursor, pin - timedelta(seconds=1))
    assert first.started == [nominal_text(t) for t in owed] and again.started == []
    assert first.pin == again.pin == nominal_text(pin)

    never = times_between(SPEC, cursor, cursor + timedelta(seconds=LIMIT))
    time.sleep(max((never[-1] - datetime.now(timezone.utc)).total_seconds(), 0) + 4)
    runs = Counter(parse_nominal(w.removeprefix(f"act-{tag}-"))
                   for w in listed(temporal_env, f"Pin{tag}"))
    assert sorted(runs) == never and set(runs.values()) == {1}
