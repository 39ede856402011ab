"""A schedule's action and policies: checked input, and the deterministic names of one action's
workflow and start request (the server's own naming, so a retry is a dedupe)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.source.action import (action_request_id, action_workflow_id, make_action,
                                      make_policies, nominal_text)
from schedfence.domain.errors import InvalidArgument

T = datetime(2026, 12, 3, 7, 33, 52, tzinfo=timezone.utc)


def test_the_action_workflow_id_is_the_servers_naming():
    action = make_action(workflow_type="Report", task_queue="q", workflow_id="act")
    assert action_workflow_id(action, T) == "act-2026-12-03T07:33:52Z"
    later = T.astimezone(timezone(timedelta(hours=5, minutes=30)))  # same instant, other zone
    assert nominal_text(later) == "2026-12-03T07:33:52Z"


def test_the_request_id_is_a_function_of_schedule_time_and_origin():
    rid = action_request_id("ns", "s", T)
    assert rid == action_request_id("ns", "s", T)
    others = {action_request_id("ns", "s", T + timedelta(seconds=1)),
              action_request_id("ns", "s", T, origin="trigger"),
              action_request_id("ns", "s", T, origin="backfill-1"),
              action_request_id("ns", "t", T), action_request_id("other", "s", T)}
    assert rid not in others and len(others) == 5


@pytest.mark.parametrize("kwargs, field", [
    ({"workflow_type": ""}, "workflow_type"),
    ({"task_queue": " q"}, "task_queue"),
    ({"workflow_id": "a\u202eb"}, "workflow_id"),
    ({"input": {1, 2}}, "input"),
    ({"input": "x" * 300_000}, "input"),
])
def test_bad_actions_are_refused_naming_the_field(kwargs, field):
    args = {"workflow_type": "W", "task_queue": "q", "workflow_id": "act", **kwargs}
    with pytest.raises(InvalidArgument) as refused:
        make_action(**args)
    assert refused.value.message.startswith(field)


@pytest.mark.parametrize("kwargs, field", [
    ({"overlap": "sometimes"}, "overlap"),
    ({"catchup_window": 5}, "catchup_window"),
    ({"catchup_window": 1.5}, "catchup_window"),
])
def test_bad_policies_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(InvalidArgument) as refused:
        make_policies(**kwargs)
    assert refused.value.message.startswith(field)


def test_policy_defaults_are_temporals():
    p = make_policies()
    assert (p.overlap, p.catchup_window, p.pause_on_failure) == ("skip", 365 * 86400, False)


def test_memo_and_search_attributes_are_kept_opaque_and_checked():
    from schedfence.domain.source.action import make_action
    from schedfence.domain.errors import InvalidArgument
    from schedfence.domain.source.payload import json_payload
    action = make_action(workflow_type="W", task_queue="q", workflow_id="a",
                         memo={"team": {"x": [1]}}, search_attributes={"Env": "prod"})
    assert action.memo == {"team": json_payload({"x": [1]})}
    assert action.search_attributes == {"Env": json_payload("prod")}
    assert action.memo["team"].data_bytes() == b'{"x":[1]}'
    for field, bad in (("memo", [1]), ("search_attributes", {"x": object()})):
        try:
            make_action(workflow_type="W", task_queue="q", workflow_id="a", **{field: bad})
        except InvalidArgument as exc:
            assert exc.message.startswith(field)
        else:
            raise AssertionError(f"{field} accepted {bad!r}")
