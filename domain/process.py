"""The words both migration processes share (the rollback, domain/rollback/; the forward
migration, domain/forward/): one step vocabulary the engines dispatch on, what one attempt
comes to, and the answer to a request repeated for a migration that exists.

A process manager in the domain says which ``Step`` comes next (``decide.next_step`` and
``steps.task_step`` for the rollback, ``steps.next_step``'s ``call`` for the forward
migration); an engine (infra/engines/attempt.py, infra/engines/forward.py) makes the calls
that step names and records what the domain decides of their answers. Every step is named
here once: a step no process names is not a step.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Literal


class Step(StrEnum):
    """What one attempt at a migration does next. A ``StrEnum``: each step is its name as
    the log, the replay documents and the on-call views have always shown it."""

    # nothing now ---------------------------------------------------------------------------
    DROP = "drop"  # closed: nothing left to do, ever
    FAIL_CLOSED = "fail_closed"  # no durable id (legacy): only an operator moves it
    IDLE = "idle"  # nothing now: an operator, or a later look, moves it on
    WAIT = "wait"  # another worker's call may still land: look again after its grace
    # the rollback's -------------------------------------------------------------------------
    CLAIM_AND_START = "claim_and_start"  # consume the claim, then the one start call
    RECONCILE = "reconcile"  # read the chain head: ours, or park
    FAILOVER_RECONCILE = "failover_reconcile"  # a claim from before the latest failover
    CHECK_FOREIGN = "check_foreign"  # has the foreign run that refused us closed?
    SETTLE = "settle"  # before the close: the times at the handover's boundary
    CLOSE = "close"  # close the source with the receipt, complete the migration
    # the forward migration's ---------------------------------------------------------------
    FENCE = "fence"  # pause the Temporal schedule under our marker (its token)
    CREATE_SOURCE = "create_source"  # the dormant source incarnation
    DELETE = "delete"  # delete the Temporal schedule, then complete

    @property
    def rests(self) -> bool:
        """No call and no record: the attempt ends here."""
        return self in RESTING


RESTING = frozenset({Step.DROP, Step.FAIL_CLOSED, Step.IDLE, Step.WAIT})
ROLLBACK_STEPS = frozenset({Step.DROP, Step.FAIL_CLOSED, Step.IDLE, Step.WAIT,
                            Step.CLAIM_AND_START, Step.RECONCILE, Step.FAILOVER_RECONCILE,
                            Step.CHECK_FOREIGN, Step.SETTLE, Step.CLOSE})
FORWARD_CALLS = frozenset({Step.FENCE, Step.CREATE_SOURCE, Step.DELETE})

# What one attempt came to: it moved the migration on, there was nothing to do, the
# destination must be looked at later (back off), another's call may still land (wait), or
# this process may not act on it: it serves another destination than the one the migration
# was accepted against, or that one is unknown (refused; domain/destination_id.py).
AttemptResult = Literal["progress", "idle", "backoff", "wait", "refused"]
RetryOutcome = Literal["already_completed", "already_pending"]


def rest_result(step: Step) -> AttemptResult:
    """What an attempt that rests on ``step`` comes to: ``wait`` for a call that may still
    land (a drain waits it out), ``idle`` for the rest."""
    if not step.rests:
        raise ValueError(f"step {step} acts; it does not rest")
    return "wait" if step is Step.WAIT else "idle"


def retry_outcome(phase: str) -> RetryOutcome:
    """The answer to a request whose id names a migration that exists (either direction):
    ``already_completed`` once it completed, ``already_pending`` in any other phase (open,
    parked or aborted alike: the caller's request was taken, nothing new is written)."""
    return "already_completed" if phase == "completed" else "already_pending"
