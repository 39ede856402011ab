"""The forward migration's steps in the shared vocabulary (domain/process.py): which phases
decide on a fresh reading of the Temporal schedule (``needs_snapshot``), and the calls
``next_step`` names, all of them the forward migration's own."""
from __future__ import annotations

from dataclasses import replace

import pytest

from schedfence.domain.forward import steps as fs
from schedfence.domain.forward.aggregate import PHASES, ForwardState, forward_marker
from schedfence.domain.ports import ScheduleSnapshot
from schedfence.domain.process import FORWARD_CALLS, Step

NS, SID, RID = "ns", "s", "F1"


def state(phase: str, **over) -> ForwardState:
    return replace(ForwardState(NS, SID, RID, "caller", phase=phase), **over)


def snapshot(token: str = "1", paused: bool = False, notes: str = "") -> ScheduleSnapshot:
    return ScheduleSnapshot(NS, SID, token, paused, notes, {})


@pytest.mark.parametrize("phase", ["requested", "fence_issued", "source_created"])
def test_fencing_and_deleting_decide_on_a_fresh_reading(phase: str) -> None:
    assert fs.needs_snapshot(state(phase))


LOG_ONLY = ["fenced", "delete_issued", "completed", "aborted", "parked"]


@pytest.mark.parametrize("phase", LOG_ONLY)
def test_the_other_phases_decide_on_the_log_alone(phase: str) -> None:
    assert not fs.needs_snapshot(state(phase))


def test_every_phase_is_one_or_the_other() -> None:
    assert sorted(fs.SNAPSHOT_PHASES + tuple(LOG_ONLY)) == sorted(PHASES)


def test_a_phase_without_a_reading_never_needs_one_to_decide() -> None:
    """What the worker hands in for those phases (None) is all next_step reads there."""
    assert fs.next_step(state("fenced"), None) == fs.Decision(call=Step.CREATE_SOURCE)
    assert fs.next_step(state("delete_issued"), None) == fs.Decision(call=Step.DELETE)
    for phase in ("completed", "aborted", "parked"):
        assert fs.next_step(state(phase), None) == fs.Decision()


def test_the_fence_is_a_step_of_the_shared_vocabulary() -> None:
    first = fs.next_step(state("requested"), snapshot())
    assert first.call is Step.FENCE and first.call == "fence" and not first.wait
    again = fs.next_step(state("fence_issued", conflict_token="1", fence_issues=1), snapshot())
    assert again == fs.Decision(call=Step.FENCE, wait=True)


def test_the_delete_is_a_step_of_the_shared_vocabulary() -> None:
    st = state("source_created", conflict_token="2")
    step = fs.next_step(st, snapshot("2", True, forward_marker(RID)))
    assert step.call is Step.DELETE and [f.event.__name__ for f in step.facts] == \
        ["TemporalDeleteIssued"]


@pytest.mark.parametrize("call", sorted(FORWARD_CALLS))
def test_a_decision_names_a_forward_step(call: Step) -> None:
    assert fs.Decision(call=call).call is call


@pytest.mark.parametrize("call", [Step.CLOSE, Step.CLAIM_AND_START, Step.IDLE, Step.WAIT])
def test_a_decision_refuses_a_step_the_forward_migration_does_not_take(call: Step) -> None:
    with pytest.raises(ValueError, match="not a forward migration's step"):
        fs.Decision(call=call)
