"""What create accepts, a real Temporal server accepts (issue 27, item 10).

``ACCEPTED``: for each field, the values at the edge of what create takes, built from the
domain's own bounds (so the table moves with them). Each is made by the entry points' own
rules (``make_spec``, ``make_action``, ``make_policies``, ``Program.check``, the key and notes
rules) and sent as the rollback sends it (``create_request``: the handover, its patch and
memo) to a dev server's CreateSchedule, all in one batch; the server must accept every one.

``REFUSED``: values create refuses (each naming its field, nothing written). ``server`` says
what the server does with the same value sent past our rules: ``create`` (its CreateSchedule
refuses it), ``start`` (CreateSchedule takes it, every start of the action is refused),
``comment`` (it reads ``#`` as a comment: another schedule), or ``accepts`` (a deliberate extra
refusal of the source, listed in docs/protocol.md). The test asserts that too, so a server
that changes its mind shows up here.
"""
from __future__ import annotations

import asyncio
import subprocess
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from importlib import resources
from typing import Any, Awaitable, Callable

import pytest

from schedfence.domain.bounds import MAX_TIME, MIN_TIME
from schedfence.domain.source import action as da
from schedfence.domain.source import spec as ds
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.rollback.handover import PatchPlan, handover_of
from schedfence.domain.ids import (MAX_SCHEDULE_ID_BYTES, SCHEDULER_WORKFLOW_TYPE,
                                   destination_workflow_id, validate_destination_key)
from schedfence.domain.source.payload import json_payload
from schedfence.domain.ports import StartWorkflow
from schedfence.domain.source.program import MAX_LIMIT, Program
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.text import MAX_NOTES_LENGTH, validate_notes
from schedfence.infra.adapters.destination.action_proto import start_fields
from schedfence.infra.adapters.destination.schedule_proto import to_temporal
from schedfence.infra.adapters.destination.temporal_schedule import create_request
from tests.contract.temporal_env import NS
from tests.helpers import new_world, nothing_written
from tests.temporal_server import temporal_binary

UTC = timezone.utc
RUN = uuid.uuid4().hex[:8]
NOW = datetime.now(UTC).replace(microsecond=0)
TYPED = ("SchedfenceEnv", "Keyword")  # registered by the test, as an operator would


def _typed(value: Any, kind: str) -> Any:
    p = json_payload(value)
    return p.of({**p.metadata_bytes(), "type": kind.encode()}, p.data_bytes())


def _zones() -> list[str]:
    """Every zone of the pinned tzdata that create takes."""
    root = resources.files("tzdata.zoneinfo")
    found, stack = [], [("", root)]
    while stack:
        prefix, d = stack.pop()
        for entry in d.iterdir():
            name = f"{prefix}{entry.name}"
            if entry.is_dir():
                if not entry.name.startswith("__"):
                    stack.append((f"{name}/", entry))
            elif not entry.name.startswith("__") and not entry.name.endswith((".py", ".pyc")):
                try:
                    ds.zone(name)
                    found.append(name)
                except InvalidArgument:
                    pass
    return sorted(found)


def accepted() -> list[tuple[str, dict[str, Any]]]:
    """(field, what create is given) at the edges of what it takes."""
    big, top = ds.MAX_SECONDS, da.MAX_DURATION
    wid, wtype, queue = (da.MAX_NAME_BYTES[f] for f in ("workflow_id", "workflow_type",
                                                       "task_queue"))
    rows: list[tuple[str, dict[str, Any]]] = [
        ("schedule id", {"sid": f"{RUN}-" + "s" * (MAX_SCHEDULE_ID_BYTES - 9)}),
        ("schedule id", {"sid": f"{RUN}-" + "é" * ((MAX_SCHEDULE_ID_BYTES - 9) // 2)}),
        ("schedule id", {"sid": f"{RUN} a/b#c:d?e"}),
        ("notes", {"notes": "😀" * MAX_NOTES_LENGTH}),
        ("notes", {"notes": "line\n\tline"}),
        ("interval", {"spec": {"intervals": [(1, 0)]}}),
        ("interval", {"spec": {"intervals": [(big, big - 1)]}}),
        ("spec", {"spec": {"intervals": [(60 + i, i) for i in range(ds.MAX_ENTRIES)]}}),
        ("jitter", {"spec": {"intervals": [(60, 0)], "jitter": big}}),
        ("start", {"spec": {"intervals": [(60, 0)], "start_at": MIN_TIME}}),
        ("end", {"spec": {"intervals": [(60, 0)], "end_at": MAX_TIME}}),
        ("end", {"spec": {"intervals": [(60, 0)], "start_at": NOW, "end_at": NOW}}),
        ("limit", {"limit": 0}), ("limit", {"limit": MAX_LIMIT}),
        ("catchup_window", {"policies": {"catchup_window": da.MIN_CATCHUP_WINDOW}}),
        ("catchup_window", {"policies": {"catchup_window": top}}),
        ("workflow_id", {"action": {"workflow_id": "é" * ((wid - 1) // 2) + "a" * (wid % 2)}}),
        ("workflow_type", {"action": {"workflow_type": "é" * (wtype // 2)}}),
        ("task_queue", {"action": {"task_queue": "é" * (queue // 2)}}),
        ("task_queue", {"action": {"task_queue": "temporal-sys-mine"}}),
        ("task_queue", {"action": {"task_queue": "a b/c"}}),
        ("inputs", {"action": {"input": "x" * (da.MAX_INPUT_BYTES - 64)}}),
        ("memo", {"action": {"memo": {"k": "x" * (da.MAX_INPUT_BYTES - 64)}}}),
        ("search_attributes", {"action": {"search_attributes": {TYPED[0]: _typed("prod",
                                                                                  TYPED[1])}}}),
        ("timeouts", {"action": {"execution_timeout": top, "run_timeout": top,
                                 "task_timeout": top}}),
        ("timeouts", {"action": {"execution_timeout": 0, "run_timeout": 0, "task_timeout": 0}}),
        ("retry_policy", {"action": {"retry_policy": {
            "initial_interval": top, "maximum_interval": top, "backoff_coefficient": 1.0,
            "maximum_attempts": da.MAX_ATTEMPTS, "non_retryable_error_types": ["", "E" * 999]}}}),
        ("summary", {"action": {"summary": json_payload("s" * (da.MAX_INPUT_BYTES // 2 - 64)),
                                "details": json_payload("d" * (da.MAX_INPUT_BYTES // 2 - 64))}}),
    ]
    crons = [f"*/{ds.MAX_CRON_NUMBER} * * * *", f"0 0 1-31/{ds.MAX_CRON_NUMBER} * *",
             "0-59 0-23 1-31 1-12 *", "0 0 * jan-dec SUN-SAT", "0 0 * * 0-7", "0 0 * * 7",
             "0 0 1,15 */2 *", *ds.MACROS]
    rows += [("cron", {"spec": {"cron": [c]}}) for c in crons]
    rows += [("time_zone", {"spec": {"intervals": [(60, 0)], "time_zone": z}}) for z in _zones()]
    return rows


# (field, what create is given, what the server does with it past our rules)
REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("cron", {"spec": {"cron": ["*/99999999999999999999 * * * *"]}}, "create"),  # the issue's
    ("cron", {"spec": {"cron": [f"*/{ds.MAX_CRON_NUMBER + 1} * * * *"]}}, "create"),
    ("cron", {"spec": {"cron": ["0 0 L * *"]}}, "create"),
    ("cron", {"spec": {"cron": ["0 0 * * 5L"]}}, "create"),
    ("cron", {"spec": {"cron": ["0 0 * * 1#2"]}}, "comment"),
    ("task_queue", {"action": {"task_queue": "temporal-sys-per-ns-tq"}}, "create"),  # the issue's
    ("task_queue", {"action": {"task_queue": "/_sys/mine"}}, "create"),
    ("task_queue", {"action": {"task_queue": "é" * 499 + "😀"}}, "create"),
    ("workflow_type", {"action": {"workflow_type": "😀" * 251}}, "create"),
    ("workflow_id", {"action": {"workflow_id": "é" * 490}}, "create"),
    ("search_attributes", {"action": {"search_attributes": {"WorkflowType": "x"}}}, "create"),
    ("retry_policy.backoff_coefficient",
     {"action": {"retry_policy": {"backoff_coefficient": 0.5}}}, "start"),
    ("retry_policy.maximum_interval",
     {"action": {"retry_policy": {"initial_interval": 10, "maximum_interval": 5}}}, "start"),
    # deliberate extra refusals (docs/protocol.md): the server takes these
    ("cron", {"spec": {"cron": ["0 0 1 * 1"]}}, "accepts"),
    ("time_zone", {"spec": {"cron": ["0 3 * * *"], "time_zone": "Australia/Lord_Howe"}},
     "accepts"),
    ("retry_policy.backoff_coefficient",
     {"action": {"retry_policy": {"backoff_coefficient": float("inf")}}}, "accepts"),
]


def program(given: dict[str, Any]) -> Program:
    """What create makes of ``given``, by the entry points' own rules."""
    act = {"workflow_type": "W", "task_queue": "schedfence-accepts-no-worker",
           "workflow_id": f"a-{uuid.uuid4().hex[:8]}", **given.get("action", {})}
    return Program(ds.make_spec(**given.get("spec", {"intervals": [(3600, 0)]})),
                   da.make_action(**act), da.make_policies(**given.get("policies", {})),
                   given.get("limit")).check()


def sid_of(given: dict[str, Any]) -> str:
    return given.get("sid") or f"{RUN}-{uuid.uuid4().hex[:12]}"


def rollback_create(given: dict[str, Any]) -> Any:
    """The CreateSchedule the rollback sends for a schedule created with ``given``."""
    sid, notes = sid_of(given), given.get("notes", "n")
    validate_destination_key(NS, sid)
    validate_notes(notes)
    p = program(given)
    state = replace(ScheduleState(NS, sid, 1, False, ""), **p.fields(),
                    cursor=da.nominal_text(NOW))
    h = handover_of(state, True, notes).model_dump(mode="json")
    start = StartWorkflow(NS, destination_workflow_id(sid), str(uuid.uuid4()),
                          SCHEDULER_WORKFLOW_TYPE, {"paused": True, "notes": notes, "handover": h})
    return create_request(start, "contract-test", datetime.now(UTC))


def past_our_rules(given: dict[str, Any]) -> Any:
    """The same CreateSchedule for a value our rules refuse: built without them."""
    spec = given.get("spec", {"intervals": [(3600, 0)]})
    raw_spec = ds.ScheduleSpec(intervals=tuple(ds.IntervalSpec(every=e, offset=o)
                                               for e, o in spec.get("intervals", ())),
                               cron_expressions=tuple(spec.get("cron", ())),
                               time_zone=spec.get("time_zone", "UTC"))
    doc = {"workflow_type": "W", "task_queue": "schedfence-accepts-no-worker",
           "workflow_id": f"a-{uuid.uuid4().hex[:8]}", **given.get("action", {})}
    for name in ("memo", "search_attributes"):
        doc[name] = {k: json_payload(v) for k, v in doc.get(name, {}).items()}
    act = da.StartWorkflowAction.model_validate(doc)
    state = replace(ScheduleState(NS, sid_of(given), 1, True, ""),
                    **Program(raw_spec, act).fields(), cursor=da.nominal_text(NOW))
    schedule, patch, memo = to_temporal(handover_of(state, True, ""), PatchPlan())
    return create_request_of(state.schedule_id, schedule, memo), act


def create_request_of(sid: str, schedule: Any, memo: Any) -> Any:
    from temporalio.api.workflowservice.v1 import CreateScheduleRequest
    return CreateScheduleRequest(namespace=NS, schedule_id=sid, schedule=schedule, memo=memo,
                                 identity="contract-test", request_id=str(uuid.uuid4()))


def register_search_attribute(env: Any) -> None:
    done = subprocess.run([temporal_binary(), "operator", "search-attribute", "create",
                           "--name", TYPED[0], "--type", TYPED[1], "--address",
                           env.server.target, "--namespace", NS],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 or "already" in done.stderr, done.stderr


def send_all(env: Any, method: str, rpcs: list[Any]) -> list[Exception | None]:
    """Every request to the server in one batch; each one's error, or None."""
    service = env.ops.client.workflow_service

    async def one(rpc: Any) -> Exception | None:
        try:
            await patiently(lambda: getattr(service, method)(rpc))
            return None
        except Exception as exc:  # noqa: BLE001  (the server's verdict, asserted below)
            return exc

    async def batch() -> list[Exception | None]:
        out: list[Exception | None] = []
        for i in range(0, len(rpcs), 50):
            out += await asyncio.gather(*(one(r) for r in rpcs[i:i + 50]))
        return out
    return env.ops.run(batch, timeout=300.0)


async def patiently(call: Callable[[], Awaitable[Any]], within: float = 100.0) -> Any:
    """One RPC, asked again while the client's deadline expires ("Timeout expired", seen in a
    CI run beside a soak: a describe queries the server's scheduler workflow, which may be
    queued behind the batch of creates above). Each request carries its own request id, so
    asking again is deduplicated; the server's own verdicts are raised at once."""
    from temporalio.service import RPCError, RPCStatusCode
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            return await call()
        except RPCError as exc:
            expired = exc.status == RPCStatusCode.DEADLINE_EXCEEDED or \
                "Timeout expired" in str(exc)
            if not expired or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(1.0)


def test_every_edge_value_create_accepts_the_server_accepts(temporal_env):
    register_search_attribute(temporal_env)
    rows = accepted()
    answers = send_all(temporal_env, "create_schedule", [rollback_create(g) for _, g in rows])
    rejected = [(field, str(err)[:160]) for (field, _), err in zip(rows, answers) if err]
    assert rejected == [], f"{len(rejected)} of {len(rows)} accepted values refused"


@pytest.mark.parametrize("field, given, server", REFUSED,
                         ids=[f"{f}:{s}:{i}" for i, (f, _, s) in enumerate(REFUSED)])
def test_what_create_refuses_names_the_field_writes_nothing_and_the_server(temporal_env, field,
                                                                          given, server):
    world = new_world()
    try:
        with nothing_written(world.service), pytest.raises(InvalidArgument) as no:
            p = program(given)
            world.service.create_schedule(NS, sid_of(given), spec=p.spec, action=p.action,
                                          policies=p.policies)
    finally:
        world.service.close()
    assert str(no.value).startswith(f"{field}: ") and "\n" not in str(no.value)
    rpc, act = past_our_rules(given)
    [err] = send_all(temporal_env, "create_schedule", [rpc])
    if server == "create":
        assert err is not None
        return
    assert err is None, f"the server now refuses {given}: {err}"
    if server == "start":
        from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest
        start = StartWorkflowExecutionRequest(namespace=NS, workflow_id=act.workflow_id,
                                              request_id=str(uuid.uuid4()), **start_fields(act))
        [err] = send_all(temporal_env, "start_workflow_execution", [start])
        assert err is not None, "the server's start took it"
    elif server == "comment":
        from temporalio.api.workflowservice.v1 import DescribeScheduleRequest
        ask = DescribeScheduleRequest(namespace=NS, schedule_id=rpc.schedule_id)
        described = temporal_env.ops.run(lambda: patiently(
            lambda: temporal_env.ops.client.workflow_service.describe_schedule(ask)), 130.0)
        [calendar] = described.schedule.spec.structured_calendar
        assert calendar.comment, "the server no longer reads # as a comment"


def test_the_rollbacks_search_attribute_check_reads_the_servers_registry(temporal_env):
    """What depends on the namespace's registry is asked before the fence (the rollback's own
    check, infra/application/guards.py ``rollback_check``): the server's listing names the
    registered attribute with its type; an action the check refuses, the server refuses too."""
    register_search_attribute(temporal_env)
    registered = temporal_env.destination.search_attribute_types(NS)
    assert registered[TYPED[0]] == TYPED[1] and registered["WorkflowType"] == "Keyword"
    for attributes in ({"SchedfenceNotRegistered": "x"}, {TYPED[0]: 7}):
        act = da.make_action(workflow_type="W", task_queue="q", workflow_id="a",
                             search_attributes=attributes)
        with pytest.raises(InvalidArgument, match="^search_attributes: "):
            da.check_registered(act, registered)
        rpc, _ = past_our_rules({"action": {"search_attributes": attributes}})
        [err] = send_all(temporal_env, "create_schedule", [rpc])
        assert err is not None, f"the server took {attributes}"
    da.check_registered(da.make_action(workflow_type="W", task_queue="q", workflow_id="a",
                                       search_attributes={TYPED[0]: "prod"}), registered)
