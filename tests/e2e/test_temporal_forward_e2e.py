"""Forward migration on a real Temporal dev server: a schedule every 2 s runs on the source,
is handed to a real Temporal Schedule, runs there, is taken back by a forward migration (the
server's schedule fenced, read, deleted), runs on the source again; the action workflows the
server lists are every owed nominal time exactly once (I14)."""
from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from schedfence.domain.action import make_action, make_policies, parse_nominal
from schedfence.domain.exactly_once import Owed, check_exactly_once
from schedfence.domain.forward import forward_marker
from schedfence.domain.ports import DestinationNotFound
from schedfence.infra.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env  # noqa: F401
from tests.e2e.test_temporal_handover_e2e import SPEC, listed, run_source


def test_a_schedule_goes_to_temporal_and_back_running_each_time_once(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    sid, wtype, prefix = f"forward-{tag}", f"Report{tag}", f"act-{tag}"
    with open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                      worker_id="e2e") as svc:
        svc.create_schedule(NS, sid, notes="nightly", spec=SPEC,
                            action=make_action(workflow_type=wtype, task_queue=f"q-{tag}",
                                               workflow_id=prefix),
                            policies=make_policies(overlap="allow_all"))
        first = parse_nominal(svc.load.source(NS, sid).state.cursor)
        run_source(svc, 4)
        svc.rollback(NS, sid, f"R-{tag}")
        svc.run_until_idle(retry_for=10.0)
        assert svc.migration(NS, sid).state == "completed"
        time.sleep(6)  # the server runs it
        assert svc.forward(NS, sid, f"F-{tag}").outcome == "accepted"
        svc.run_until_idle(retry_for=20.0)
        st = svc.forward_state(NS, sid, f"F-{tag}")
        assert st.phase == "completed", st
        with pytest.raises(DestinationNotFound):
            temporal_env.destination.describe_schedule(NS, sid)
        source = svc.load.source(NS, sid).state
        assert (source.incarnation, source.paused, source.notes) == (2, False, "nightly")
        assert source.notes != forward_marker(f"F-{tag}")
        run_source(svc, 6)
        assert svc.verify() == []
    until = datetime.now(timezone.utc) - timedelta(seconds=3)
    ids = listed(temporal_env, wtype)  # both sides start action workflows on the server
    assert len(ids) == len(set(ids))
    on_server = [parse_nominal(w.removeprefix(f"{prefix}-")) for w in ids]
    verdict = check_exactly_once(Owed(SPEC, first, until), [], [t for t in on_server
                                                                  if t <= until])
    assert verdict.ok, verdict.describe()
