"""The two directions, named once: the canonical names and the job's ``--to`` words."""
from __future__ import annotations

from schedfence.domain.direction import (DIRECTIONS, FORWARD, ROLLBACK, SIDES, TO_SOURCE,
                                         TO_WORKFLOW)


def test_each_direction_has_one_canonical_name_and_one_side_word() -> None:
    assert DIRECTIONS == ("rollback", "forward") and SIDES == ("workflow", "source")
    assert (ROLLBACK, FORWARD, TO_WORKFLOW, TO_SOURCE) == DIRECTIONS + SIDES
