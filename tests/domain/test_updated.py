"""``updated`` (domain/model.py) is ``dataclasses.replace`` for the aggregates' states: given a
state and changes, then the result equals ``replace``'s, the original is unchanged, and a bad
field name or a class that computes fields on init is refused as ``replace`` would refuse it."""
from __future__ import annotations

import dataclasses

import pytest

from schedfence.domain.rollback.aggregate import Migration, MigrationState
from schedfence.domain.model import state_class_of, updated
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.key import ScheduleKey


def _sample(cls: type) -> object:
    values = {"str": "x", "int": 1, "bool": False}
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kind = next((k for k in values if k in str(f.type)), "str")
            kwargs[f.name] = values[kind]
    return cls(**kwargs)


@pytest.mark.parametrize("aggregate", [Migration, Schedule, ScheduleKey])
def test_updated_equals_replace_field_by_field(aggregate) -> None:
    cls = state_class_of(aggregate)
    state = _sample(cls)
    before = dataclasses.astuple(state)
    for f in dataclasses.fields(cls):
        changed = {f.name: ("changed", 7)}
        new = updated(state, **changed)
        assert new == dataclasses.replace(state, **changed)
        assert type(new) is cls and getattr(new, f.name) == ("changed", 7)
    assert dataclasses.astuple(state) == before  # the original is untouched
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(updated(state), "namespace", "y")  # the copy is as frozen as the original


def test_updated_refuses_an_unknown_field() -> None:
    state = _sample(MigrationState)
    with pytest.raises(TypeError, match="no field"):
        updated(state, no_such_field=1)
    assert isinstance(_sample(ScheduleState), ScheduleState)


def test_updated_refuses_a_class_that_computes_fields_on_init() -> None:
    @dataclasses.dataclass(frozen=True)
    class Computed:
        a: int
        b: int = dataclasses.field(init=False, default=0)

    @dataclasses.dataclass(frozen=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            object.__setattr__(self, "a", abs(self.a))

    for state in (Computed(1), PostInit(-1)):
        with pytest.raises(TypeError, match="dataclasses.replace"):
            updated(state, a=2)
