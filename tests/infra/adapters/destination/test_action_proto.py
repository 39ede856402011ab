"""A schedule's action both ways (infra/adapters/destination/action_proto.py): a Temporal Schedule
without input reads as no arguments (issue 27, item 6); every payload, with its metadata, every
timeout, the retry policy, memo, typed search attributes and user metadata survive (item 7);
what the source cannot carry is refused naming the field, which parks a forward migration
``unsupported_schedule`` before its fence; and the source's own starts apply all of it."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.common.v1 import (Header, Payload as ProtoPayload, Payloads, Priority,
                                      RetryPolicy as ProtoRetry, WorkflowType)
from temporalio.api.enums.v1 import WorkflowIdReusePolicy
from temporalio.api.schedule.v1 import IntervalSpec, Schedule, ScheduleAction, ScheduleSpec
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflow.v1 import NewWorkflowExecutionInfo

from schedfence.domain.source.action import RetryPolicy, StartWorkflowAction, make_action
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.payload import Payload, json_payload
from schedfence.domain.ports import StartWorkflow
from schedfence.infra.adapters.destination.action_proto import (action_back, new_workflow_info,
                                                       start_fields)
from schedfence.infra.adapters.destination.schedule_proto import program_docs
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

JSON = {"encoding": b"json/plain"}


def temporal_cli_start(**fields) -> NewWorkflowExecutionInfo:
    """What ``temporal schedule create --type WF --task-queue q1 --workflow-id f1wf`` sets."""
    return NewWorkflowExecutionInfo(workflow_id="f1wf", workflow_type=WorkflowType(name="WF"),
                                    task_queue=TaskQueue(name="q1"), **fields)


def schedule_of(start: NewWorkflowExecutionInfo) -> Schedule:
    return Schedule(spec=ScheduleSpec(interval=[IntervalSpec(interval=Duration(seconds=2))]),
                    action=ScheduleAction(start_workflow=start))


def test_a_schedule_without_input_reads_as_no_arguments():
    program = program_docs(schedule_of(temporal_cli_start()))
    action = StartWorkflowAction.model_validate(program["action"])
    assert action.inputs == () and "unsupported" not in program
    assert list(new_workflow_info(action).input.payloads) == []


def test_two_inputs_and_an_execution_timeout_are_kept_whole():
    start = temporal_cli_start(
        input=Payloads(payloads=[ProtoPayload(metadata=JSON, data=b"1"),
                                 ProtoPayload(metadata=JSON, data=b'"two"')]),
        workflow_execution_timeout=Duration(seconds=3600))
    action = action_back(start)
    assert [(p.metadata_bytes(), p.data_bytes()) for p in action.inputs] == \
        [(JSON, b"1"), (JSON, b'"two"')]
    assert (action.execution_timeout, action.run_timeout, action.task_timeout) == \
        (3600, None, None)
    assert new_workflow_info(action) == start


def full_action() -> StartWorkflowAction:
    typed = Payload.of({**JSON, "type": b"Keyword"}, b'"prod"')
    return make_action(
        workflow_type="WF", task_queue="q1", workflow_id="f1wf",
        inputs=(Payload.of({"encoding": b"binary/protobuf", "messageType": b"a.B"}, b"\x08\x01"),
                Payload.of(JSON, b'{"a": 1}')),  # a client's spacing, kept byte for byte
        memo={"team": Payload.of({"encoding": b"binary/encrypted"}, b"\xff\x00")},
        search_attributes={"Env": typed}, execution_timeout=3600, run_timeout=600,
        task_timeout=10, retry_policy=RetryPolicy(initial_interval=2, backoff_coefficient=1.5,
                                                  maximum_interval=60, maximum_attempts=4,
                                                  non_retryable_error_types=("Bad",)),
        summary=json_payload("nightly"), details=json_payload("runs the report"))


def test_every_field_survives_both_ways():
    action = full_action()
    info = new_workflow_info(action)
    assert action_back(info) == action
    assert info.search_attributes.indexed_fields["Env"].metadata["type"] == b"Keyword"
    assert info.user_metadata.summary.data == b'"nightly"'
    assert info.retry_policy.initial_interval.seconds == 2


@pytest.mark.parametrize("field, value", [
    ("header", Header(fields={"tracing": ProtoPayload(data=b"x")})),
    ("priority", Priority(priority_key=2)),
    ("cron_schedule", "* * * * *"),
    ("workflow_id_reuse_policy",
     WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE),
    ("workflow_execution_timeout", Duration(seconds=1, nanos=500_000_000)),
    ("retry_policy", ProtoRetry(initial_interval=Duration(nanos=100_000_000))),
])
def test_what_the_source_cannot_carry_is_refused_naming_the_field(field, value):
    start = temporal_cli_start(**{field: value})
    with pytest.raises(InvalidArgument, match=f"^action.{field}"):
        action_back(start)
    with pytest.raises(InvalidArgument, match=f"^action.{field}"):
        program_docs(schedule_of(start))  # describe_schedule: program "unsupported"


def test_the_source_starts_apply_the_whole_action():
    action = full_action()
    fields = start_fields(action)
    assert [p.data for p in fields["input"].payloads] == [b"\x08\x01", b'{"a": 1}']
    assert (fields["workflow_execution_timeout"].seconds, fields["workflow_run_timeout"].seconds,
            fields["workflow_task_timeout"].seconds) == (3600, 600, 10)
    assert fields["retry_policy"].maximum_attempts == 4
    assert fields["memo"].fields["team"].data == b"\xff\x00"
    sim = SimulatedDestination(seed=1, clock=lambda: datetime(2026, 1, 1, tzinfo=timezone.utc))
    sim.start_workflow(StartWorkflow("ns", "f1wf-x", "r1", "WF", None, task_queue="q1",
                                     action=action))
    [(logged, outcome)] = sim.start_log("ns", "f1wf-x")
    assert logged.action == action and outcome == "created"
