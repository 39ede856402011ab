"""What Temporal's server refuses, create refuses: one test per rule (issue 27, item 10).
Each value here was accepted by create before and refused by a dev server's CreateSchedule
(or a start): the rollback then parked ``start_rejected`` with the source paused. The
server's side of each is tests/contract/test_server_accepts.py."""
from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from schedfence.domain.rollback import steps as handoff
from schedfence.domain.source.action import (MAX_ATTEMPTS, MAX_NAME_BYTES, StartWorkflowAction,
                                      check_registered, make_action, nominal_text)
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.program import Program
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.spec import MAX_CRON_NUMBER, ScheduleSpec, make_spec

M = datetime(2026, 12, 3, 7, 0, tzinfo=timezone.utc)


def action(**given):
    return make_action(**{"workflow_type": "W", "task_queue": "q", "workflow_id": "a", **given})


@pytest.mark.parametrize("cron", [
    "*/99999999999999999999 * * * *",             # the issue's: past Go's int64
    f"*/{MAX_CRON_NUMBER + 1} * * * *",            # past the server's int32 step
    "0 0 L * *", "0 0 LW * *", "0 0 * * 5L",      # L: the server refuses it
    "0 0 * * 1#2", "0 0 * * mon#1",               # #: a comment there (every Monday)
])
def test_a_cron_string_the_server_refuses_or_reads_otherwise_is_refused(cron):
    with pytest.raises(InvalidArgument, match="^cron: "):
        make_spec(cron=[cron])


def test_a_cron_string_at_the_servers_bounds_is_taken():
    make_spec(cron=[f"*/{MAX_CRON_NUMBER} * * * *", "0 0 * jan-mar MON-FRI", "0 0 * * 0-7"])


@pytest.mark.parametrize("field, given", [
    ("task_queue", {"task_queue": "temporal-sys-per-ns-tq"}),  # the issue's
    ("task_queue", {"task_queue": "/_sys/mine"}),
    ("task_queue", {"task_queue": "é" * 499 + "😀"}),          # 1002 bytes
    ("workflow_type", {"workflow_type": "😀" * 251}),          # 1004 bytes
    ("workflow_id", {"workflow_id": "é" * 490}),               # 980 + 21 appended
    ("retry_policy.backoff_coefficient", {"retry_policy": {"backoff_coefficient": 0.5}}),
    ("retry_policy.backoff_coefficient", {"retry_policy": {"backoff_coefficient": float("inf")}}),
    ("retry_policy.backoff_coefficient", {"retry_policy": {"backoff_coefficient": float("nan")}}),
    ("retry_policy.maximum_attempts", {"retry_policy": {"maximum_attempts": MAX_ATTEMPTS + 1}}),
    ("retry_policy.maximum_interval", {"retry_policy": {"initial_interval": 10,
                                                        "maximum_interval": 5}}),
    ("search_attributes", {"search_attributes": {"WorkflowType": "x"}}),
])
def test_an_action_the_server_refuses_is_refused_naming_the_field(field, given):
    with pytest.raises(InvalidArgument) as refused:
        action(**given)
    assert str(refused.value).startswith(f"{field}: ")
    assert "\n" not in str(refused.value)


def test_an_action_at_the_servers_bounds_is_taken():
    action(task_queue="temporal-sys-mine", workflow_type="é" * 500,
           workflow_id="é" * 489 + "a",
           retry_policy={"backoff_coefficient": 1.0, "maximum_attempts": MAX_ATTEMPTS,
                         "initial_interval": 5, "maximum_interval": 5})
    assert MAX_NAME_BYTES["workflow_id"] == 979


def test_a_program_recorded_under_older_rules_is_refused_before_the_fence():
    """A schedule created before these rules keeps its program: its rollback is refused,
    nothing written, instead of parking ``start_rejected`` after the fence."""
    old_action = StartWorkflowAction(workflow_type="W", task_queue="temporal-sys-per-ns-tq",
                                     workflow_id="a")
    old_spec = ScheduleSpec(cron_expressions=("*/99999999999999999999 * * * *",))
    for spec, act, field in [(make_spec(intervals=[(60, 0)]), old_action, "task_queue"),
                             (old_spec, action(), "cron")]:
        source = replace(ScheduleState("ns", "s", 1, False, ""),
                         **Program(spec, act).fields(), cursor=nominal_text(M))
        with pytest.raises(InvalidArgument, match=f"^{field}: "):
            handoff.rollback(source, "src", "R1", "caller", uuid.uuid4(), same=None,
                             pending=None, last=None,
                             sentinel={"workflow_id": "w", "current": None}, epoch=0, actor="")


REGISTERED = {"Env": "Keyword", "Count": "Int", "Tags": "KeywordList"}


@pytest.mark.parametrize("attributes, why", [
    ({"Nope": "x"}, "not registered"),                      # the server: "no mapping defined"
    ({"Count": "seven"}, "takes a Int value"),               # "invalid value ... of type Int"
    ({"Count": True}, "takes a Int value"),
    ({"Tags": "a"}, "takes a KeywordList value"),
])
def test_a_search_attribute_the_destination_has_not_registered_so_is_refused(attributes, why):
    act = action(search_attributes=attributes)
    with pytest.raises(InvalidArgument, match=f"^search_attributes: .*{why}"):
        check_registered(act, REGISTERED)


def test_a_declared_type_must_be_the_registered_one():
    from schedfence.domain.source.payload import json_payload
    p = json_payload("prod")
    typed = p.of({**p.metadata_bytes(), "type": b"Text"}, p.data_bytes())
    with pytest.raises(InvalidArgument, match="^search_attributes: Env is Keyword"):
        check_registered(action(search_attributes={"Env": typed}), REGISTERED)
    check_registered(action(search_attributes={"Env": "prod", "Count": 7, "Tags": ["a"]}),
                     REGISTERED)
