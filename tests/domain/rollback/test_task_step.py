"""One attempt's step (``steps.task_step``) in the shared vocabulary: ``wait`` while another
worker's start may land, ``settle`` before the close when the destination takes the whole
schedule; and which receipted migrations a batch closes in its one save (``batch_closable``)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from schedfence.domain.process import Step
from schedfence.domain.rollback import steps as h
from tests.domain.rollback import decision_givens as g

HANDOVER = {"namespace": g.NS, "schedule_id": g.SID}  # needs_settle reads only its presence


def owed():
    """Receipted, with a handover whose boundary was never settled."""
    return replace(g.receipted().state, handover=HANDOVER)


def test_a_receipted_handover_settles_before_it_closes_on_a_handover_target() -> None:
    assert h.task_step(owed(), 0, False, settles=True) is Step.SETTLE


def test_a_destination_that_takes_no_schedule_closes_at_once() -> None:
    assert h.task_step(owed(), 0, False, settles=False) is Step.CLOSE
    assert h.task_step(owed(), 0, False) is Step.CLOSE  # not a HandoverTarget: the default


@pytest.mark.parametrize("state", [
    pytest.param(replace(g.receipted().state, handover=None), id="no handover"),
    pytest.param(replace(owed(), boundary_settled=True), id="settled already")])
def test_nothing_owed_closes(state) -> None:
    assert h.task_step(state, 0, False, settles=True) is Step.CLOSE


def test_settle_never_replaces_a_step_that_is_not_the_close() -> None:
    assert h.task_step(replace(g.claimed().state, handover=HANDOVER), 0, False,
                       settles=True) is Step.RECONCILE
    assert h.task_step(replace(g.completed().state, handover=HANDOVER), 0, False,
                       settles=True) is Step.DROP


def test_a_claim_in_flight_waits_before_a_reconcile() -> None:
    assert h.task_step(g.claimed().state, 0, True) is Step.WAIT
    assert h.task_step(g.claimed().state, 1, True) is Step.WAIT  # failover reconcile too
    assert h.task_step(g.claimed().state, 0, False) is Step.RECONCILE
    assert h.task_step(g.pending().state, 1, True) is Step.FAILOVER_RECONCILE  # no claim
    assert h.task_step(g.receipted().state, 0, True) is Step.CLOSE  # nothing to wait for


# -- batch_closable -----------------------------------------------------------------------------
def test_a_receipted_open_migration_with_no_head_to_prove_closes_in_the_batch() -> None:
    assert h.batch_closable(g.receipted().state, None, settles=False)
    assert h.batch_closable(g.receipted().state, None, settles=True)  # no handover: none owed


def test_a_head_left_to_prove_keeps_it_out_of_the_close() -> None:
    assert not h.batch_closable(g.receipted().state, "A", settles=False)


@pytest.mark.parametrize("given", [g.pending, g.claimed, g.claimed_unknown, g.parked_foreign])
def test_no_receipt_no_close(given) -> None:
    assert not h.batch_closable(given().state, None, settles=False)


def test_a_closed_migration_is_not_closed_again() -> None:
    st = g.completed().state
    assert st.receipt is not None and not st.is_open
    assert not h.batch_closable(st, None, settles=False)


def test_a_settle_owed_leaves_the_close_to_its_own_attempt() -> None:
    assert not h.batch_closable(owed(), None, settles=True)
    assert h.batch_closable(owed(), None, settles=False)  # the destination settles nothing
    assert h.batch_closable(replace(owed(), boundary_settled=True), None, settles=True)
