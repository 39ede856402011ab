"""Several namespaces on one real Temporal server: a worker that serves only ``default`` meets
a ``payments`` migration and backs off (it stays claimed, never parked ``start_rejected``);
a worker that serves ``default,payments`` (one URL) completes both, each as a real Temporal
Schedule in its own namespace."""
from __future__ import annotations

import uuid
from pathlib import Path

from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env  # noqa: F401
from tests.temporal_server import EXTRA_NAMESPACE


def test_one_worker_serves_several_namespaces_and_another_backs_off(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    sid = f"ns-{uuid.uuid4().hex[:8]}"
    only_default = f"temporal://{temporal_env.server.target}/{NS}"
    both = f"temporal://{temporal_env.server.target}/{NS},{EXTRA_NAMESPACE}"
    with open_service(store, both, worker_id="w-admin") as svc:  # the admin calls
        for namespace in (NS, EXTRA_NAMESPACE):
            svc.create_schedule(namespace, sid, notes=namespace)
            svc.rollback(namespace, sid, f"R-{namespace}")
    with open_service(store, only_default, worker_id="w-default") as svc:
        report = svc.run_until_idle(retry_for=1.0)
        assert svc.migration(NS, sid).state == "completed"
        payments = svc.migration(EXTRA_NAMESPACE, sid)
        assert payments.state != "parked" and payments.park_reason is None, payments
        assert not report.drained  # it is blocked here, not refused
    with open_service(store, both, worker_id="w-both") as svc:
        svc.run_until_idle(retry_for=10.0)
        assert svc.migration(EXTRA_NAMESPACE, sid).state == "completed"
        assert svc.verify() == []
    from temporalio.api.workflowservice.v1 import DescribeScheduleRequest
    desc = temporal_env.ops.run(lambda: temporal_env.ops.client.workflow_service
                                .describe_schedule(DescribeScheduleRequest(
                                    namespace=EXTRA_NAMESPACE, schedule_id=sid)))
    assert desc.schedule.state.notes == EXTRA_NAMESPACE
