"""Shared by the simulator's tests: the start policies and their valid pairs, a start
request, a fresh simulator (the ``dest`` fixture) and the outcome of its last start."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from schedfence.domain.ports import StartWorkflow
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

NS, WID = "default", "temporal-sys-scheduler:s1"
REUSE = ("allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate", "terminate_if_running")
CONFLICT = ("fail", "use_existing", "terminate_existing")
# A real server refuses these pairs (tests/contract); the simulator must too.
INVALID_COMBOS = [("terminate_if_running", "use_existing"),
                  ("terminate_if_running", "terminate_existing"),
                  ("reject_duplicate", "terminate_existing")]
VALID_COMBOS = [combo for combo in itertools.product(REUSE, CONFLICT) if combo not in INVALID_COMBOS]
CLOSED = ("completed", "failed", "canceled", "terminated", "timed_out")
REPO = Path(__file__).resolve().parents[4]


def req(request_id, reuse="allow_duplicate", conflict="fail", *, wid=WID, wtype="T", input=None):
    return StartWorkflow(NS, wid, request_id, wtype, input or {}, reuse, conflict)


@pytest.fixture
def dest() -> SimulatedDestination:
    return SimulatedDestination()


def last_outcome(d: SimulatedDestination) -> str:
    return d.start_log()[-1][1]
