"""The words both migration processes share (domain/process.py): one step vocabulary, named
as the log and the views have always shown it, which steps rest, what a resting attempt comes
to, and the answer to a request repeated for a migration that exists."""
from __future__ import annotations

import json
import pytest

from schedfence.domain import job as j
from schedfence.domain import process as p
from schedfence.domain.forward.aggregate import PHASES as FORWARD_PHASES
from schedfence.domain.process import Step
from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback.phases import PHASES as ROLLBACK_PHASES
from tests.domain.rollback import decision_givens as g

LEGACY_NAMES = ["drop", "fail_closed", "idle", "wait", "claim_and_start", "reconcile",
                "failover_reconcile", "check_foreign", "settle", "close", "fence",
                "create_source", "delete"]


def test_every_step_is_named_once_as_before() -> None:
    assert [s.value for s in Step] == LEGACY_NAMES
    assert len(set(Step)) == len(LEGACY_NAMES)


@pytest.mark.parametrize("step", list(Step))
def test_a_step_shows_as_its_old_name_everywhere(step: Step) -> None:
    assert step == step.value and str(step) == step.value and f"{step}" == step.value
    assert json.dumps({"next_step": step}) == json.dumps({"next_step": step.value})
    assert Step(step.value) is step  # a name read back (replay, JSON) is the step


def test_the_two_processes_split_the_vocabulary() -> None:
    assert p.ROLLBACK_STEPS | p.FORWARD_CALLS == set(Step)
    assert not p.ROLLBACK_STEPS & p.FORWARD_CALLS
    assert p.RESTING <= p.ROLLBACK_STEPS


def test_only_the_four_resting_steps_rest() -> None:
    assert {s for s in Step if s.rests} == {Step.DROP, Step.FAIL_CLOSED, Step.IDLE, Step.WAIT}


@pytest.mark.parametrize("step, result", [(Step.DROP, "idle"), (Step.FAIL_CLOSED, "idle"),
                                          (Step.IDLE, "idle"), (Step.WAIT, "wait")])
def test_a_resting_attempt_comes_to_idle_or_wait(step: Step, result: str) -> None:
    assert p.rest_result(step) == result


@pytest.mark.parametrize("step", [s for s in Step if not s.rests])
def test_an_acting_step_has_no_resting_result(step: Step) -> None:
    with pytest.raises(ValueError, match="acts"):
        p.rest_result(step)


@pytest.mark.parametrize("given", [g.pending, g.claimed, g.claimed_unknown, g.receipted,
                                   g.completed, g.parked_foreign, g.parked_head_missing,
                                   g.aborted, g.legacy, g.rearmed])
@pytest.mark.parametrize("epoch", [0, 1])
def test_the_rollback_names_only_its_own_steps(given, epoch: int) -> None:
    step = d.next_step(given().state, epoch)
    assert isinstance(step, Step) and step in p.ROLLBACK_STEPS
    assert step not in (Step.WAIT, Step.SETTLE)  # task_step adds those two


def test_due_reads_the_shared_vocabulary() -> None:
    assert d.due(g.pending().state) == "now"
    assert d.due(g.completed().state) == "closed"
    assert d.due(g.claimed().state) == "now"
    assert d.due(g.parked_rejected().state) == "after_failover"  # idle until a failover
    assert d.due(g.legacy().state) == "operator"


def test_a_repeat_of_a_completed_migration_is_already_completed() -> None:
    assert "completed" in ROLLBACK_PHASES and "completed" in FORWARD_PHASES
    assert p.retry_outcome("completed") == "already_completed"


@pytest.mark.parametrize("phase", sorted(set(FORWARD_PHASES + ROLLBACK_PHASES) - {"completed"}))
def test_a_repeat_in_any_other_phase_is_already_pending(phase: str) -> None:
    """Open, parked or aborted alike: the request was taken; nothing new is written."""
    assert p.retry_outcome(phase) == "already_pending"


@pytest.mark.parametrize("phase", sorted(set(FORWARD_PHASES + ROLLBACK_PHASES)))
def test_a_repeat_counts_as_requested_in_a_job(phase: str) -> None:
    """A job's page re-read after a crash records the repeat as requested (domain/job.py)."""
    decided = j.requested("s1", "R1", p.retry_outcome(phase))
    assert (decided["decision"], decided["outcome"]) == ("requested", p.retry_outcome(phase))
    assert p.retry_outcome(phase) in j.REQUESTED_OUTCOMES
