"""A migration is bound to its destination, on a real Temporal dev server (issue 45, item 1).

As reported: a rollback accepted against ``sim`` was completed by a worker serving the real
server, and ``status`` said nothing of where it went. Now each step checks what the migration
was accepted against (kind, address, namespace, the cluster's own id) and a worker on another
destination refuses it in one line, with nothing on the server; and the reverse (accepted on
Temporal, a worker on ``sim``), and one server's two namespaces (accepted on ``payments``, a
worker serving ``default``). One dev server for the whole session (tests/contract/temporal_env.py).
"""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.ports import DestinationNotFound
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env  # noqa: F401
from tests.infra.cli.cli_runs import subprocess_cli
from tests.temporal_server import EXTRA_NAMESPACE


def no_schedule_on_the_server(env: TemporalEnv, namespace: str, schedule_id: str) -> bool:
    """DescribeSchedule (read from the server's store, no visibility lag) finds nothing."""
    from temporalio.api.workflowservice.v1 import DescribeScheduleRequest
    from temporalio.service import RPCError, RPCStatusCode
    rpc = DescribeScheduleRequest(namespace=namespace, schedule_id=schedule_id)
    try:
        env.ops.run(lambda: env.ops.client.workflow_service.describe_schedule(rpc))
    except RPCError as exc:
        return exc.status == RPCStatusCode.NOT_FOUND
    return False


def cli(store: str, *args: str) -> dict:
    done = subprocess_cli(store, *args, "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    return json.loads(done.stdout)


@pytest.fixture
def sid() -> str:
    return f"bind-{uuid.uuid4().hex[:8]}"


def test_accepted_on_sim_a_worker_on_temporal_refuses_with_nothing_on_the_server(
        temporal_env: TemporalEnv, tmp_path: Path, sid: str) -> None:
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    url = temporal_env.url
    cli(store, "--destination", "sim", "schedule", "create", NS, sid)
    assert cli(store, "--destination", "sim", "rollback", NS, sid)["outcome"] == "accepted"
    worked = subprocess_cli(store, "--destination", url, "worker", "--until-idle",
                            "--retry-for", "0")
    assert worked.returncode == 1 and "Traceback" not in worked.stderr
    line = (f"destination_mismatch: migration {NS}/{sid} was accepted against sim; this "
            f"process serves {url}")
    assert line in worked.stderr, worked.stderr
    assert no_schedule_on_the_server(temporal_env, NS, sid)
    status = cli(store, "status", NS, sid)["migration"]
    assert (status["state"], status["starts_issued"], status["destination"]) == (
        "pending", 0, "sim")
    # On its own destination it completes.
    cli(store, "--destination", "sim", "worker", "--until-idle")
    assert cli(store, "status", NS, sid)["migration"]["state"] == "completed"
    assert no_schedule_on_the_server(temporal_env, NS, sid)


def test_accepted_on_temporal_a_worker_on_sim_refuses_and_starts_nothing(
        temporal_env: TemporalEnv, tmp_path: Path, sid: str) -> None:
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    url = temporal_env.url
    with open_service(store, url, worker_id="admin") as svc:
        svc.create_schedule(NS, sid)
        svc.rollback(NS, sid)
        binding = svc.migration(NS, sid).destination_binding
    target = temporal_env.server.target
    assert binding is not None and binding["kind"] == "temporal"
    assert (binding["address"], binding["namespace"]) == (target, NS)
    assert binding["cluster_id"]  # the server's own id (GetClusterInfo)
    with open_service(store, "sim", worker_id="on-sim") as svc:
        before = svc.event_count()
        report = svc.run_until_idle(retry_for=0)
        [line] = report.refused
        assert line.startswith(f"destination_mismatch: migration {NS}/{sid} was accepted "
                               f"against temporal://{target}/{NS} (cluster "), line
        assert line.endswith("this process serves sim (another kind of destination); "
                             "nothing was done")
        assert svc.event_count() == before
        with pytest.raises(DestinationNotFound):  # nothing started on the simulator
            svc.destination.describe(NS, destination_workflow_id(sid))
    assert no_schedule_on_the_server(temporal_env, NS, sid)
    with open_service(store, url, worker_id="on-temporal") as svc:
        assert svc.run_until_idle(retry_for=10.0).drained
        assert svc.migration(NS, sid).state == "completed" and svc.verify() == []
    assert not no_schedule_on_the_server(temporal_env, NS, sid)


def test_accepted_on_one_namespace_a_worker_serving_another_refuses(
        temporal_env: TemporalEnv, tmp_path: Path, sid: str) -> None:
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    target = temporal_env.server.target
    payments = f"temporal://{target}/{EXTRA_NAMESPACE}"
    with open_service(store, payments, worker_id="admin") as svc:
        svc.create_schedule(EXTRA_NAMESPACE, sid)
        svc.rollback(EXTRA_NAMESPACE, sid)
    with open_service(store, temporal_env.url, worker_id="on-default") as svc:
        before = svc.event_count()
        report = svc.run_until_idle(retry_for=0)
        [line] = report.refused
        assert line.startswith(f"destination_mismatch: migration {EXTRA_NAMESPACE}/{sid} was "
                               f"accepted against temporal://{target}/{EXTRA_NAMESPACE}")
        assert f"this process serves temporal://{target}/{NS} " in line
        assert f"(namespace {EXTRA_NAMESPACE} is not served here)" in line
        assert svc.event_count() == before
    assert no_schedule_on_the_server(temporal_env, EXTRA_NAMESPACE, sid)
