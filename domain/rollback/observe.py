"""What the destination's readings of a workflow id show of its chain (a reconcile's
evidence): which run is the chain head to judge, and what a failed or empty reading means.

The worker (infra/engines/attempt.py) makes the describe calls and hands each answer in as
data (``Reading``: the run, None when no run is there, or the ``DestinationUnavailable`` it
raised); these functions say what the answers amount to, as the ``ChainObservation``
``decide.decide_chain`` judges. Pure: no call is made here.
"""
from __future__ import annotations

from typing import Any

from schedfence.domain.ports import DestinationUnavailable, RunDescription
from schedfence.domain.rollback.decide import ChainObservation

Reading = RunDescription | DestinationUnavailable | None


def observe_current(workflow_id: str, current: Reading) -> ChainObservation | None:
    """The chain as the current run at ``workflow_id`` shows it; None when its head is an
    earlier run (its ``first_execution_run_id``), which must be read next (``observe_head``).

    No answer: ``unavailable`` (nothing is decided from it). No run: ``no_current_run``
    (absence, which only retention can make proof). A run without its chain's first run id:
    ``no_first_run_identity`` (the head cannot be named). A run that is its own first run:
    it is the head."""
    if isinstance(current, DestinationUnavailable):
        return ChainObservation(failure="unavailable", detail=str(current))
    if current is None:
        return ChainObservation(failure="no_current_run",
                                detail=f"no current run at {workflow_id}")
    if not current.first_execution_run_id:
        return ChainObservation(failure="no_first_run_identity",
                                current_run_id=current.run_id,
                                current_status=current.status)
    if current.first_execution_run_id == current.run_id:
        return ChainObservation(current_run_id=current.run_id,
                                current_status=current.status,
                                first_run_id=current.run_id, head=current)
    return None


def head_to_read(first: str) -> bool:
    """Whether a chain head named ``first`` is worth reading: an empty name names no run
    (``observe_head`` answers ``no_first_run_identity`` without a call)."""
    return bool(first)


def observe_head(first: str, current_run_id: str, current_status: str,
                 head: Reading = None) -> ChainObservation:
    """The chain head ``first`` as read (``head``; never read when ``first`` is empty), with
    the current run it was reached from. No name: ``no_first_run_identity``. No answer:
    ``unavailable``. Gone (retention, a delete): ``head_missing``. Otherwise the head, for
    ``decide_chain`` to judge by its create request id."""
    seen: dict[str, Any] = {"current_run_id": current_run_id, "current_status": current_status,
            "first_run_id": first}
    if not head_to_read(first):
        return ChainObservation(failure="no_first_run_identity", **seen)
    if isinstance(head, DestinationUnavailable):
        return ChainObservation(failure="unavailable", detail=str(head), **seen)
    if head is None:
        return ChainObservation(failure="head_missing",
                                detail=f"first run {first} is gone (retention or delete)",
                                **seen)
    return ChainObservation(head=head, **seen)
