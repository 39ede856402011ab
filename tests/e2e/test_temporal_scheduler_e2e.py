"""End to end on a real Temporal dev server: the source scheduler runs a schedule every 2 s for
about 10 s, and the server lists exactly the action workflows expected (listed through the
server's visibility, not our records), each created once, with the server's naming; then a
rollback fences the schedule and no source action happens after the fence."""
from __future__ import annotations

import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from schedfence.domain.source.action import make_action, make_policies, nominal_text
from schedfence.domain.source.spec import make_spec, times_between
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env, wait_for  # noqa: F401


def listed(env: TemporalEnv, workflow_type: str) -> list[str]:
    async def listing() -> list[str]:
        return [wf.id async for wf in env.ops.client.list_workflows(
            f'WorkflowType = "{workflow_type}"')]
    return sorted(env.ops.run(listing))


def test_a_schedule_runs_on_temporal_and_stops_at_the_fence(temporal_env: TemporalEnv,
                                                            tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    sid, wtype, prefix = f"every2s-{tag}", f"Report{tag}", f"act-{tag}"
    spec = make_spec(intervals=[(2, 0)])
    with open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                      worker_id="e2e") as svc:
        svc.create_schedule(NS, sid, spec=spec,
                            action=make_action(workflow_type=wtype, task_queue=f"q-{tag}",
                                               workflow_id=prefix, input={"tag": tag}),
                            policies=make_policies(overlap="allow_all"))
        created = svc.load.source(NS, sid).state.cursor
        deadline = time.monotonic() + 10
        last = None
        while time.monotonic() < deadline:
            last = datetime.now(timezone.utc)
            svc.run_scheduler(now=last)
            time.sleep(0.5)
        assert not svc.load.source(NS, sid).state.issued  # every start answered
        expected = sorted(f"{prefix}-{nominal_text(t)}" for t in times_between(
            spec, datetime.fromisoformat(created.replace("Z", "+00:00")), last))
        assert 4 <= len(expected) <= 6
        server = wait_for(lambda: listed(temporal_env, wtype),
                          lambda ids: len(ids) >= len(expected), 15, "action workflows listed")
        assert server == expected  # exactly these, each once, named as the server names them
        for wid in expected:
            assert temporal_env.ops.describe(wid).workflow_type == wtype

        assert svc.rollback(NS, sid, f"R-{tag}").outcome == "accepted"
        fenced_at = svc.event_count()
        for _ in range(8):  # 4 s more of passes: the fence holds every one of them
            report = svc.run_scheduler()
            assert report.ticks == report.started == 0
            time.sleep(0.5)
        assert listed(temporal_env, wtype) == expected
        after = [e for e in svc.history(NS, sid) if e.position > fenced_at and
                 e.aggregate == "schedule"]
        assert not any(e.type.rsplit(".", 1)[-1].startswith(("Action", "Times"))
                       for e in after)
        assert svc.verify() == []
