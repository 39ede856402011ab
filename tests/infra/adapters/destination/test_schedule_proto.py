"""A schedule handed to a Temporal Schedule and read back is the same schedule: generated
schedules (every spec shape and policy, paused or not, limited actions, 0-7 buffered starts,
0-3 backfills in progress, recent and running actions, and actions with 0-3 arguments of any
encoding, memo, typed search attributes, timeouts, retry policy and user metadata, or given
as JSON the way a v1 action was) go source -> handover -> Temporal Schedule (+ initial patch
+ memo) -> handover three times;
every field is preserved and the input is never mutated. Seeds 0, 1, 7, 42 and 63 are pinned
besides hypothesis' own draws."""
from __future__ import annotations

import copy
import json
import random
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedfence.domain.source.action import (RetryPolicy, SchedulePolicies, make_action, make_policies,
                                      nominal_text, parse_nominal)
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.rollback.handover import Handover, handover_of, patch_plan
from schedfence.domain.source.invoker import OVERLAPS
from schedfence.domain.source.payload import Payload, json_payload
from schedfence.domain.source.program import Program
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.spec import make_spec, times_after
from schedfence.infra.adapters.destination.schedule_proto import from_temporal, to_temporal

T0 = datetime(2026, 6, 1, tzinfo=timezone.utc)
CRONS = ["*/5 * * * *", "0 9 * * 1-5", "@daily", "30 4 1 * *"]  # no clock-change hour
ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"]


def when(rng: random.Random, days: int = 30) -> str:
    return nominal_text(T0 + timedelta(seconds=rng.randrange(days * 86400)))


def json_value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(6 if depth < 2 else 4)
    if kind == 4:
        return [json_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    if kind == 5:
        return {f"k{i}": json_value(rng, depth + 1) for i in range(rng.randrange(3))}
    return [None, rng.randrange(-10**6, 10**6), f"v{rng.randrange(999)}", rng.random() < .5][kind]


def payload(rng: random.Random) -> Payload:
    """Any encoding: JSON as some client wrote it (spaces kept), null, raw or protobuf bytes,
    a codec's encrypted bytes with metadata of its own."""
    kind = rng.randrange(5)
    if kind == 0:
        return json_payload(json_value(rng))
    if kind == 1:
        return Payload.of({"encoding": b"json/plain"}, json.dumps(json_value(rng)).encode())
    if kind == 2:
        return Payload.of({"encoding": b"binary/null"}, b"")
    raw = bytes(rng.randrange(256) for _ in range(rng.randrange(12)))
    if kind == 3:
        return Payload.of({"encoding": b"binary/protobuf", "messageType": b"x.v1.Y"}, raw)
    return Payload.of({"encoding": b"binary/encrypted", "encryption-key-id": b"k1"}, raw)


def typed(rng: random.Random) -> Payload:
    """A search attribute as a client sends it: JSON with its ``type`` metadata."""
    kind, value = rng.choice([("Keyword", "prod"), ("Int", 42), ("Bool", True),
                              ("Double", 2.5), ("Datetime", "2026-06-01T00:00:00Z"),
                              ("KeywordList", ["a", "b"]), ("Text", "free text")])
    p = json_payload(value)
    return Payload.of({**p.metadata_bytes(), "type": kind.encode()}, p.data_bytes())


def maybe(rng: random.Random, value):
    return value if rng.random() < .5 else None


def carried(rng: random.Random) -> dict:
    """Every field of an action besides its names: arguments, memo, search attributes,
    timeouts, retry policy, user metadata."""
    if rng.random() < .2:  # as a v1 action was given: JSON
        return {"input": json_value(rng),
                "memo": {f"m{i}": json_value(rng) for i in range(rng.randrange(3))},
                "search_attributes": {f"S{i}": json_value(rng)
                                      for i in range(rng.randrange(3))}}
    retry = RetryPolicy(initial_interval=maybe(rng, 1 + rng.randrange(60)),
                        backoff_coefficient=rng.choice([0.0, 1.0, 1.5, 2.0]),
                        maximum_interval=maybe(rng, 60 + rng.randrange(3600)),
                        maximum_attempts=rng.randrange(5),
                        non_retryable_error_types=tuple(f"E{i}"
                                                        for i in range(rng.randrange(3))))
    return {"inputs": tuple(payload(rng) for _ in range(rng.randrange(4))),
            "memo": {f"m{i}": payload(rng) for i in range(rng.randrange(3))},
            "search_attributes": {f"S{i}": typed(rng) for i in range(rng.randrange(3))},
            "execution_timeout": maybe(rng, 1 + rng.randrange(86400)),
            "run_timeout": maybe(rng, 1 + rng.randrange(86400)),
            "task_timeout": maybe(rng, 1 + rng.randrange(120)),
            "retry_policy": maybe(rng, retry),
            "summary": maybe(rng, json_payload(f"summary {rng.randrange(99)}")),
            "details": maybe(rng, payload(rng))}


def program(rng: random.Random) -> Program:
    intervals = [(e, rng.randrange(e)) for e in rng.sample([60, 300, 3600, 86400, 7 * 86400],
                                                           rng.randrange(3))]
    crons = rng.sample(CRONS, rng.randrange(0 if intervals else 1, 3))
    start = T0 - timedelta(days=rng.randrange(30)) if rng.random() < .5 else None
    end = T0 + timedelta(days=60 + rng.randrange(30)) if rng.random() < .5 else None
    spec = make_spec(intervals=intervals, cron=crons, start_at=start, end_at=end,
                     jitter=rng.choice([0, 0, 30, 600]), time_zone=rng.choice(ZONES))
    action = make_action(workflow_type=f"W{rng.randrange(9)}", task_queue=f"q{rng.randrange(9)}",
                         workflow_id=f"act-{rng.randrange(99)}", **carried(rng))
    policies = make_policies(overlap=rng.choice(OVERLAPS),
                             catchup_window=rng.choice([10, 60, 86400, 365 * 86400]),
                             pause_on_failure=rng.random() < .5) if rng.random() < .8 else None
    return Program(spec, action, policies, rng.choice([None, 0, 1, 99]))


def source(rng: random.Random) -> ScheduleState:
    origins = ["auto", "backfill-1", "backfill-2"]
    buffered = [{"nominal": when(rng), "origin": rng.choice(origins),
                 "overlap": rng.choice(OVERLAPS)} for _ in range(rng.randrange(8))]
    if buffered and rng.random() < .3:
        buffered[rng.randrange(len(buffered))]["origin"] = "trigger"
    backfills = []
    for k in range(rng.randrange(4)):
        start = T0 - timedelta(days=10 + rng.randrange(10))
        end = start + timedelta(hours=1 + rng.randrange(48))
        cursor = start - timedelta(seconds=1) + (end - start) * rng.random()
        backfills.append({"backfill_id": f"backfill-{k + 1}", "start": nominal_text(start),
                          "end": nominal_text(end), "overlap": rng.choice(OVERLAPS),
                          "cursor": nominal_text(cursor)})
    recent = [{"nominal": when(rng), "origin": rng.choice(origins), "workflow_id": f"a-{i}",
               "run_id": f"r-{i}"} for i in range(rng.randrange(6))]
    return replace(
        ScheduleState("ns", f"s{rng.randrange(99)}", 1 + rng.randrange(3), rng.random() < .5,
                      f"notes {rng.randrange(99)}"),
        **program(rng).fields(), cursor=when(rng), buffered=buffered, backfills=backfills,
        recent_actions=recent, running=[f"a-{i}" for i in range(rng.randrange(3))],
        action_count=rng.randrange(10**6), backfill_count=len(backfills))


def round_trips(rng: random.Random) -> None:
    state = source(rng)
    frozen = copy.deepcopy(state)
    paused, notes = rng.random() < .5, f"before the fence {rng.randrange(99)}"
    if paused:  # a paused handover carries no waiting spec start (refused before the fence)
        state = replace(state, buffered=[dict(b, origin="backfill-1") if b["origin"] == "auto"
                                         else b for b in state.buffered])
        frozen = copy.deepcopy(state)
    h = handover_of(state, paused, notes)
    expected = Handover(**h.model_dump())
    for _ in range(3):
        until = T0 + timedelta(days=31)
        h = from_temporal(*to_temporal(h, patch_plan(h, until)))
        assert h == expected
    assert state == frozen  # the input was not mutated
    assert (h.paused, h.notes, h.cursor, h.action_count) == (paused, notes, state.cursor,
                                                             state.action_count)
    assert [b["cursor"] for b in h.backfills] == [b["cursor"] for b in state.backfills]


@pytest.mark.parametrize("seed", [0, 1, 7, 42, 63])
def test_pinned_seeds_round_trip_three_times(seed):
    round_trips(random.Random(seed))


@settings(max_examples=150, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_generated_schedules_round_trip_three_times(rng):
    round_trips(rng)


def test_the_patch_continues_each_backfill_after_its_cursor_and_fills_the_gap():
    state = replace(source(random.Random(5)), remaining_actions=None)  # no limit: a gap
    h = handover_of(state, False, "")
    until = T0 + timedelta(days=31)
    plan = patch_plan(h, until)
    for b, r in zip(h.backfills, plan.backfills):
        assert nominal_text(r.start - timedelta(seconds=1)) == b["cursor"]  # exclusive cursor
        assert nominal_text(r.end) == b["end"]  # inclusive end
    gap = plan.backfills[-1]
    window = timedelta(seconds=(h.policies or SchedulePolicies()).catchup_window)
    floor = max(parse_nominal(h.cursor), until - window - timedelta(seconds=1))
    assert gap.start == next(times_after(h.spec, floor))  # the first time a tick owes
    assert gap.end == until


def test_what_a_temporal_schedule_cannot_carry_is_refused_naming_the_field():
    state = source(random.Random(3))
    with pytest.raises(InvalidArgument, match="^action:"):
        patch_plan(handover_of(replace(state, spec=None, action=None), False, ""), T0)
    two = [{"nominal": nominal_text(T0), "origin": "trigger", "overlap": "skip"}] * 2
    with pytest.raises(InvalidArgument, match="^buffered:"):
        patch_plan(handover_of(replace(state, buffered=two), False, ""), T0)


def test_a_pause_and_notes_start_becomes_a_schedule_with_no_spec_and_no_action():
    from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
    from schedfence.domain.ports import StartWorkflow
    from schedfence.infra.adapters.destination.temporal_schedule import create_request
    doc = {"namespace": "default", "schedule_id": "s", "incarnation": 2, "paused": True,
           "notes": "held"}
    start = StartWorkflow("default", "temporal-sys-scheduler:s", "R1", SCHEDULER_WORKFLOW_TYPE,
                          copy.deepcopy(doc))
    rpc = create_request(start, "me", datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert (rpc.schedule_id, rpc.request_id, rpc.identity) == ("s", "R1", "me")
    assert not rpc.schedule.HasField("action") and rpc.schedule.spec == type(rpc.schedule.spec)()
    assert (rpc.schedule.state.paused, rpc.schedule.state.notes) == (True, "held")
    assert not rpc.HasField("initial_patch") or not rpc.initial_patch.backfill_request
    assert start.input == doc  # the input is not mutated
    with pytest.raises(InvalidArgument, match="paused, notes and incarnation"):
        create_request(replace(start, input={**doc, "paused": "yes"}), "me",
                       datetime(2026, 1, 1, tzinfo=timezone.utc))
