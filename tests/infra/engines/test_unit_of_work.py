"""The unit of work's conflict policy, run by the one retry loop as the use cases run it."""
from __future__ import annotations

import pytest

from eventsourcing.persistence import IntegrityError

from schedfence.infra.adapters.store.eventstore import OCC_RETRIES
from schedfence.infra.engines.unit_of_work import UnitOfWork
from schedfence.infra.pacing import retry_call


class Racing(Exception):
    pass


def test_a_lost_race_runs_the_use_case_again_until_it_saves() -> None:
    tries: list[int] = []

    def once() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise IntegrityError("another writer appended first")
        return "saved"

    assert retry_call(once, **UnitOfWork(app=None).on_conflict(Racing("kept changing"))) == "saved"
    assert len(tries) == 3


def test_races_that_never_end_raise_the_use_cases_own_error() -> None:
    tries: list[int] = []

    def once() -> None:
        tries.append(1)
        raise IntegrityError("another writer appended first")

    with pytest.raises(Racing, match="kept changing"):
        retry_call(once, **UnitOfWork(app=None).on_conflict(Racing("kept changing")))
    assert len(tries) == OCC_RETRIES


def test_an_error_other_than_a_conflict_is_not_retried() -> None:
    tries: list[int] = []

    def once() -> None:
        tries.append(1)
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        retry_call(once, **UnitOfWork(app=None).on_conflict(Racing("kept changing")))
    assert len(tries) == 1
