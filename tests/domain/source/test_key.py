"""A key a forward migration holds (domain/source/key.py, ``check_not_forwarding``): no new
incarnation is created on it and no second forward migration opens (I19), with one refusal,
``migration_pending``, wherever it is asked."""
from __future__ import annotations

from dataclasses import replace

import pytest

from schedfence.domain.errors import MigrationPending
from schedfence.domain.forward import steps as fs
from schedfence.domain.source.key import KeyState, ScheduleKey, check_not_forwarding

NS, SID, HELD_BY = "ns", "s", "7f0c5a8e-0000-0000-0000-000000000001"
REFUSAL = f"schedule {NS}/{SID} is being taken in by forward migration {HELD_BY}"


def test_no_key_and_a_free_key_refuse_nothing() -> None:
    check_not_forwarding(None)
    check_not_forwarding(KeyState(NS, SID))
    check_not_forwarding(KeyState(NS, SID, incarnation=3))


def test_a_held_key_refuses_with_migration_pending() -> None:
    with pytest.raises(MigrationPending) as refused:
        check_not_forwarding(KeyState(NS, SID, 1, forward_migration_id=HELD_BY))
    assert refused.value.message == REFUSAL and refused.value.code == "migration_pending"


def test_a_key_released_by_its_forward_migration_is_free_again() -> None:
    key = ScheduleKey.create(NS, SID)
    key.open_forward(HELD_BY)
    with pytest.raises(MigrationPending, match="being taken in"):
        check_not_forwarding(key.state)
    key.close_forward(HELD_BY)
    check_not_forwarding(key.state)


def test_a_second_forward_migration_meets_the_same_refusal() -> None:
    key = ScheduleKey.create(NS, SID)
    key.open_forward(HELD_BY)
    with pytest.raises(MigrationPending) as refused:
        key.open_forward("another")
    assert refused.value.message == REFUSAL
    assert key.state.forward_migration_id == HELD_BY  # nothing recorded


def test_a_forward_request_on_a_held_key_meets_the_same_refusal() -> None:
    with pytest.raises(MigrationPending) as refused:
        fs.request_check(replace(KeyState(NS, SID), forward_migration_id=HELD_BY), None)
    assert refused.value.message == REFUSAL
