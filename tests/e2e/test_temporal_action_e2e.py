"""Issue 27, items 6 and 7, on a real Temporal dev server through the ``temporal`` CLI and the
``schedfence`` CLI: a schedule made without ``--input`` is taken back by ``schedfence forward``
(and ``migrate --to source --dry-run`` checks the namespace) instead of failing on its empty
payload list; a schedule made with two inputs, execution, run and task timeouts, a memo, typed
search attributes and user metadata keeps every one on the source (payloads with their
encoding metadata, byte for byte), the source's own starts apply them, and a rollback hands
back a Temporal Schedule action equal to the first. A field the source cannot carry (a run
timeout of 90.5 s: the source keeps whole seconds) parks the forward migration
``unsupported_schedule`` before its fence."""
from __future__ import annotations

import difflib
import subprocess
import sys
import time
import uuid
from pathlib import Path

from schedfence.domain.source.action import StartWorkflowAction
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env, wait_for  # noqa: F401
from tests.temporal_server import temporal_binary

BIN = Path(sys.executable).parent / "schedfence"
MORE = ("--run-timeout", "30m", "--task-timeout", "15s", "--memo", 'team="ops"',
        "--search-attribute", 'SchedfenceEnv="prod"',
        "--search-attribute", "SchedfenceCount=7", "--static-summary", "nightly",
        "--static-details", "runs the report")


def temporal(env: TemporalEnv, *args: str) -> None:
    done = subprocess.run([temporal_binary(), *args, "--address", env.server.target,
                           "--namespace", NS], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr


def schedfence(env: TemporalEnv, store: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), "--store", store, "--destination", env.url, *args],
                          capture_output=True, text=True, timeout=120)


def search_attributes(env: TemporalEnv) -> None:
    """The typed search attributes the schedules below set (once per server)."""
    done = subprocess.run([temporal_binary(), "operator", "search-attribute", "create",
                           "--name", "SchedfenceEnv", "--type", "Keyword",
                           "--name", "SchedfenceCount", "--type", "Int",
                           "--address", env.server.target, "--namespace", NS],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 or "already" in done.stderr, done.stderr


def create(env: TemporalEnv, sid: str, tag: str, *extra: str) -> None:
    temporal(env, "schedule", "create", "--schedule-id", sid, "--interval", "2s",
             "--type", f"WF{tag}", "--task-queue", f"q-{tag}", "--workflow-id", f"{sid}wf",
             *extra)


def test_a_schedule_without_input_is_taken_back_and_checked(temporal_env: TemporalEnv,
                                                            tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    sid, store = f"f1-{tag}", f"sqlite:///{tmp_path / 'fence.db'}"
    create(temporal_env, sid, tag)
    dry = schedfence(temporal_env, store, "migrate", "--namespace", NS, "--to", "source",
                     "--job-id", f"J-{tag}", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert "IndexError" not in dry.stdout + dry.stderr
    fwd = schedfence(temporal_env, store, "forward", NS, sid, "--request-id", f"F-{tag}",
                     "--json")
    assert fwd.returncode == 0, fwd.stdout + fwd.stderr
    with open_service(store, temporal_env.destination, worker_id="e2e") as svc:
        assert svc.forward_state(NS, sid, f"F-{tag}").phase == "completed"
        action = StartWorkflowAction.model_validate(svc.load.source(NS, sid).state.action)
        assert action.inputs == ()
        assert svc.verify() == []


def test_every_payload_and_the_timeout_survive_both_ways(temporal_env: TemporalEnv,
                                                         tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    sid, store = f"f7-{tag}", f"sqlite:///{tmp_path / 'fence.db'}"
    search_attributes(temporal_env)
    create(temporal_env, sid, tag, "--input", "1", "--input", '"two"',
           "--execution-timeout", "1h", "--overlap-policy", "AllowAll", *MORE)
    before = temporal_env.ops.describe_schedule(sid).schedule.action.start_workflow
    theirs = [(dict(p.metadata), p.data) for p in before.input.payloads]
    assert [d for _, d in theirs] == [b"1", b'"two"']
    fwd = schedfence(temporal_env, store, "forward", NS, sid, "--request-id", f"F-{tag}",
                     "--json")
    assert fwd.returncode == 0, fwd.stdout + fwd.stderr
    with open_service(store, temporal_env.destination, worker_id="e2e") as svc:
        action = StartWorkflowAction.model_validate(svc.load.source(NS, sid).state.action)
        assert [(p.metadata_bytes(), p.data_bytes()) for p in action.inputs] == theirs
        assert action.execution_timeout == 3600
        assert (action.run_timeout, action.task_timeout) == (1800, 15)
        event = _source_start(svc, temporal_env, sid)
        started = event.workflow_execution_started_event_attributes
        assert [(dict(p.metadata), p.data) for p in started.input.payloads] == theirs
        assert (started.workflow_execution_timeout.seconds,
                started.workflow_run_timeout.seconds,
                started.workflow_task_timeout.seconds) == (3600, 1800, 15)
        assert started.memo == before.memo
        for name in ("SchedfenceEnv", "SchedfenceCount"):  # typed: Keyword, Int
            assert started.search_attributes.indexed_fields[name] == \
                before.search_attributes.indexed_fields[name]
        assert event.user_metadata == before.user_metadata
        assert svc.verify() == []
    back = schedfence(temporal_env, store, "rollback", NS, sid, "--request-id", f"R-{tag}")
    assert back.returncode == 0, back.stdout + back.stderr
    drain = schedfence(temporal_env, store, "worker", "--until-idle")
    assert drain.returncode == 0, drain.stdout + drain.stderr
    after = temporal_env.ops.describe_schedule(sid).schedule.action.start_workflow
    assert [(dict(p.metadata), p.data) for p in after.input.payloads] == theirs
    assert after.workflow_execution_timeout.seconds == 3600
    if not before.header.fields:  # the CLI sets an empty header: no field of it to carry
        before.ClearField("header")
    assert after == before, "".join(difflib.unified_diff(  # handed back whole: every field
        str(before).splitlines(True), str(after).splitlines(True)))


def test_a_field_the_source_cannot_carry_parks_before_the_fence(temporal_env: TemporalEnv,
                                                                tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    sid, store = f"f8-{tag}", f"sqlite:///{tmp_path / 'fence.db'}"
    create(temporal_env, sid, tag, "--input", "1", "--run-timeout", "90500ms",
           "--notes", "theirs")
    fwd = schedfence(temporal_env, store, "forward", NS, sid, "--request-id", f"F-{tag}",
                     "--json")
    assert fwd.returncode != 0 or "parked" in fwd.stdout, fwd.stdout + fwd.stderr
    with open_service(store, temporal_env.destination, worker_id="e2e") as svc:
        st = svc.forward_state(NS, sid, f"F-{tag}")
        assert (st.phase, st.park_reason, st.fence_issues) == (
            "parked", "unsupported_schedule", 0), st
        assert "action.workflow_run_timeout" in st.park_detail, st.park_detail
    state = temporal_env.ops.describe_schedule(sid).schedule.state
    assert (state.paused, state.notes) == (False, "theirs")  # nothing changed there


def _source_start(svc, env: TemporalEnv, sid: str):
    """The StartWorkflowExecution the source's own scheduler made, as the server recorded it
    (the first event of the newest action workflow it started: its attributes, and the
    event's user metadata)."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest

    theirs = {r["workflow_id"] for r in svc.load.source(NS, sid).state.recent_actions}

    def started_one() -> str:
        svc.run_scheduler()
        time.sleep(0.5)
        mine = [r["workflow_id"] for r in svc.load.source(NS, sid).state.recent_actions
                if r["workflow_id"] not in theirs]
        return mine[-1] if mine else ""
    workflow_id = wait_for(started_one, bool, 30.0, "the source started an action")
    history = env.ops.run(lambda: env.ops.client.workflow_service.get_workflow_execution_history(
        GetWorkflowExecutionHistoryRequest(
            namespace=NS, execution=WorkflowExecution(workflow_id=workflow_id))))
    return history.history.events[0]
