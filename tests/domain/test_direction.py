"""The two directions, named once: the canonical names and the job's ``--to`` words."""
from __future__ import annotations

import pytest

from schedfence.domain.direction import (DIRECTIONS, FORWARD, ROLLBACK, SIDE_OF, SIDES,
                                         direction_of)
from schedfence.domain.errors import InvalidArgument


def test_each_direction_has_one_canonical_name_and_one_side_word() -> None:
    assert DIRECTIONS == ("rollback", "forward") and SIDES == ("workflow", "source")
    assert SIDE_OF == {ROLLBACK: "workflow", FORWARD: "source"}


@pytest.mark.parametrize("word,direction", [("rollback", ROLLBACK), ("workflow", ROLLBACK),
                                            ("forward", FORWARD), ("source", FORWARD)])
def test_either_vocabulary_reads_as_the_canonical_direction(word: str, direction: str) -> None:
    assert direction_of(word) == direction


def test_another_word_is_refused_naming_both_vocabularies() -> None:
    with pytest.raises(InvalidArgument, match="rollback, forward, workflow, source"):
        direction_of("sideways")
