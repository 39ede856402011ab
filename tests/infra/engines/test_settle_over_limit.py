"""A settle that reports starts beyond the limit (a limited handover whose create came after
its pin, on a real server: tests/infra/adapters/destination/test_settle_pin.py) is recorded on
``BoundarySettled`` v4 and named by the checker, and a fresh process's ``verify`` reads it."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.ports import Settled
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service

NS, SID = "ns", "s"


class OverLimit(SimulatedDestination):
    def settle_handover(self, request, first_run_id) -> Settled:
        return replace(super().settle_handover(request, first_run_id), over_limit=2)


def test_an_overrun_the_settle_saw_is_recorded_and_named_by_verify(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    with open_service(store, OverLimit(), worker_id="w1") as svc:
        svc.create_schedule(NS, SID, spec=make_spec(intervals=[(60, 0)]), action=make_action(
            workflow_type="W", task_queue="q", workflow_id="act"),
            policies=make_policies(overlap="allow_all"), limit=5)
        assert svc.rollback(NS, SID, "R1").outcome == "accepted"
        svc.run_until_idle(retry_for=0)
        assert svc.migration(NS, SID).state == "completed"
        [settled] = [e.data for e in svc.history(NS, SID) if e.type.endswith("BoundarySettled")]
        assert settled["over_limit"] == 2
        [found] = svc.verify()
        assert found.invariant == "I21" and "2 action(s) beyond" in found.message
    out = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                          "verify", "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert "beyond the schedule's limit" in json.dumps(doc)
