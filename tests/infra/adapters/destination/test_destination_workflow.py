"""The one workflow the destination worker runs on a real server: the sentinel holds its id
for as long as it is told to sleep, then completes."""
from __future__ import annotations

import uuid

from schedfence.infra.adapters.destination.workflow import WORKFLOWS
from tests.contract.temporal_env import NS, temporal_env, wait_for  # noqa: F401


def test_the_worker_runs_the_sentinel_only():
    names = [getattr(wf, "__temporal_workflow_definition").name for wf in WORKFLOWS]
    assert names == ["temporal-sys-dummy-workflow"]


def test_a_sentinel_holds_its_id_while_it_sleeps_then_completes(temporal_env):
    wid = f"temporal-sys-scheduler:sentinel-{uuid.uuid4().hex[:12]}"
    run = temporal_env.ops.start_dummy(wid, sleep_seconds=1.5)
    assert temporal_env.destination.describe(NS, wid).status == "running"
    wait_for(lambda: temporal_env.destination.describe(NS, wid, run).status,
             lambda s: s == "completed", 15, "the sentinel completed")
