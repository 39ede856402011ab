"""The two directions a schedule's ownership moves, named once.

- ``rollback``: the source (the embedded scheduler) hands the schedule to the destination's
  workflows (domain/rollback/: the ``Migration`` aggregate);
- ``forward``: a Temporal Schedule hands it to the source (domain/forward/).

These are the canonical names, and what the metrics label (``direction="rollback"``). A batch
job names a direction by the side its schedules go *to*: ``--to workflow`` (rollback) or
``--to source`` (forward), as the CLI's ``migrate --to``, the HTTP API's ``to`` and a job's
stored ``direction`` spell it; those words are ``SIDES`` and stay as they are (a job's request
ids are derived from them).
"""
from __future__ import annotations

from typing import Literal, get_args

Direction = Literal["rollback", "forward"]
ROLLBACK: Direction = "rollback"
FORWARD: Direction = "forward"
DIRECTIONS: tuple[Direction, ...] = get_args(Direction)

# The side a job moves its schedules to: the job's spelling of a direction.
Side = Literal["workflow", "source"]
TO_WORKFLOW: Side = "workflow"
TO_SOURCE: Side = "source"
SIDES: tuple[Side, ...] = get_args(Side)


def direction_of(side: str) -> Direction:
    """The direction a job moving schedules to ``side`` takes (its metrics label)."""
    return ROLLBACK if side == TO_WORKFLOW else FORWARD
