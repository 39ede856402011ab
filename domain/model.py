"""Pydantic base classes for event-sourced aggregates (eventsourcing 9.5 ships none).

Events are frozen pydantic models; every concrete event class declares an explicit ``TOPIC``
(stable across renames) and a ``class_version`` (its schema version, upcast on read).
An aggregate keeps one immutable ``state`` value, and every event's ``apply`` runs the
aggregate's pure ``evolve`` reducer: the same function replay and the invariant checker use.

``EvolvingAggregate.Snapshot`` stores that state (a frozen dataclass) at one version, so a
long history loads from the snapshot plus the events after it. A snapshot is a cache of the
fold, never a source of truth: it holds only JSON-exact values, so loading it gives exactly
the state a full replay gives.
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import typing
from datetime import datetime
from typing import Any, ClassVar, NamedTuple
from uuid import UUID

from eventsourcing.domain import (
    BaseAggregate,
    CanInitAggregate,
    CanMutateAggregate,
    CanSnapshotAggregate,
    datetime_now_with_tzinfo,
)
from eventsourcing.utils import get_topic, register_topic
from pydantic import BaseModel, ConfigDict, Field

from schedfence.domain.topics import resolve_stored


def upcast(owner: type, state: dict[str, Any], version: int) -> None:
    """Bring ``state``, written at schema ``version``, up to ``owner.class_version`` in place,
    through the owner's ``upcast_vN_vN+1`` hooks, in order."""
    while version < getattr(owner, "class_version", 1):
        getattr(owner, f"upcast_v{version}_v{version + 1}")(state)
        version += 1


class Fact(NamedTuple):
    """One event a pure decision returns: its class and its fields. The aggregate it is
    recorded on (``EvolvingAggregate.record``) adds id, version and time."""

    event: type
    fields: dict[str, Any]


Facts = list[Fact]


class Immutable(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DomainEvent(Immutable):
    originator_id: UUID
    originator_version: int
    timestamp: datetime = Field(default_factory=datetime_now_with_tzinfo)

    class_version: ClassVar[int] = 1

    def payload(self) -> dict[str, Any]:
        """The event's own fields (without id, version and timestamp)."""
        skip = {"originator_id", "originator_version", "timestamp", "originator_topic"}
        return self.model_dump(mode="json", exclude=skip)


class EvolvingAggregate(BaseAggregate[UUID]):
    """An aggregate whose whole state is ``self.state``, folded by ``evolve``."""

    @staticmethod
    def evolve(state: Any, event: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    class Event(DomainEvent, CanMutateAggregate[UUID]):
        def apply(self, aggregate: Any) -> None:
            aggregate.state = type(aggregate).evolve(getattr(aggregate, "state", None), self)

    class Created(Event, CanInitAggregate[UUID]):
        originator_topic: str

    def __init__(self) -> None:
        self.state: object = None  # each aggregate narrows it to its state class

    def record(self, facts: Facts | list[tuple[type, dict[str, Any]]]) -> None:
        """Append the events a pure decision returned, in order."""
        for event_class, fields in facts:
            self.trigger_event(event_class, **fields)

    class Snapshot(DomainEvent, CanSnapshotAggregate[UUID]):
        """The aggregate's state at ``originator_version``, for ``Application.take_snapshot``.

        ``topic`` names the aggregate class (its explicit TOPIC); ``state`` holds the state
        dataclass's fields; ``state_version`` is the aggregate's ``class_version`` when taken,
        upcast on load by the aggregate's ``upcast_vN_vN+1(fields)`` hooks (eventsourcing's
        convention for snapshot state). ``class_version`` below versions this envelope.
        """

        TOPIC: ClassVar[str] = "schedfence.Snapshot"
        class_version: ClassVar[int] = 1
        topic: str
        state: dict[str, Any]
        state_version: int = 1
        created_on: datetime
        modified_on: datetime

        @classmethod
        def take(cls, aggregate: Any) -> EvolvingAggregate.Snapshot:
            aggregate_class: type = type(aggregate)  # `type`, not type[Any]: hashable for the cache
            state_class = state_class_of(aggregate_class)
            if type(aggregate.state) is not state_class:
                raise TypeError(f"{aggregate_class.__name__}.state is a "
                                f"{type(aggregate.state).__name__}, not {state_class.__name__}")
            return cls(originator_id=aggregate.id, originator_version=aggregate.version,
                       timestamp=cls.create_timestamp(), topic=get_topic(aggregate_class),
                       state=state_fields(aggregate.state),
                       state_version=getattr(aggregate_class, "class_version", 1),
                       created_on=aggregate.created_on, modified_on=aggregate.modified_on)

        def mutate(self, _: None) -> Any:
            aggregate_class = resolve_stored(self.topic)
            fields = copy.deepcopy(self.state)  # the state must not share dicts with us
            version, current = self.state_version, getattr(aggregate_class, "class_version", 1)
            if version > current:
                # Written by newer code: refuse rather than guess (drop the snapshots table
                # to fall back to full replay after downgrading).
                raise ValueError(f"snapshot of {self.topic} v{self.originator_version} has "
                                 f"state v{version}, newer than this code's v{current}")
            upcast(aggregate_class, fields, version)
            aggregate = object.__new__(aggregate_class)
            aggregate.__dict__.update(
                _id=self.originator_id, _version=self.originator_version,
                _created_on=self.created_on, _modified_on=self.modified_on,
                _pending_events=[], state=state_class_of(aggregate_class)(**fields))
            return aggregate


# Resolvable by its explicit topic before the first snapshot is written in this process.
register_topic(EvolvingAggregate.Snapshot.TOPIC, EvolvingAggregate.Snapshot)


@functools.cache
def state_class_of(aggregate_class: type) -> type:
    """The state dataclass an aggregate folds to: its ``evolve``'s declared return type.

    Read from the reducer rather than stored in the snapshot, so a renamed or moved state
    class does not strand the snapshots already written.
    """
    hints = typing.get_type_hints(getattr(aggregate_class, "evolve"))  # any class with one
    state_class = hints.get("return")
    if not (isinstance(state_class, type) and dataclasses.is_dataclass(state_class)):
        raise TypeError(f"{aggregate_class.__name__}.evolve must declare a dataclass return "
                        f"type to be snapshotted, not {state_class!r}")
    return state_class


def state_fields(state: Any) -> dict[str, Any]:
    """The state's fields by name, each checked to survive JSON unchanged.

    Not ``dataclasses.asdict``: that silently turns nested dataclasses into dicts and keeps
    tuples that JSON turns into lists; either would make a snapshot load differ from a replay.
    """
    fields = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    for name, value in fields.items():
        _check_json_exact(value, f"{type(state).__name__}.{name}")
    return copy.deepcopy(fields)


def _check_json_exact(value: Any, where: str) -> None:
    if value is None or isinstance(value, (str, bool, int, float)):
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json_exact(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{where} has a non-string key {key!r}: not snapshot-safe")
            _check_json_exact(item, f"{where}[{key!r}]")
        return
    raise TypeError(f"{where} is a {type(value).__name__}: not snapshot-safe "
                    "(a JSON round trip would not give it back unchanged)")


S = typing.TypeVar("S")


def updated(state: S, **changes: Any) -> S:
    """``dataclasses.replace`` for the aggregates' frozen state dataclasses, several times
    cheaper: a reducer makes one per event, and ``replace`` runs the generated ``__init__``
    again (one ``object.__setattr__`` per field, on ~30 fields). Equal to ``replace``'s result
    because the copy keeps every field and a state class may have no ``__post_init__``, no
    ``init=False`` field and no ``__slots__`` (``_field_names`` refuses such a class)."""
    state_class: type = type(state)  # `type`, not type[S]: hashable for the cache
    names = _field_names(state_class)
    if not changes.keys() <= names:
        raise TypeError(f"{type(state).__name__} has no field(s) "
                        f"{', '.join(sorted(changes.keys() - names))}")
    new = object.__new__(type(state))
    fields = vars(new)
    fields.update(vars(state))
    fields.update(changes)
    return new


@functools.cache
def _field_names(state_class: type) -> frozenset[str]:
    fields = dataclasses.fields(state_class)
    if (hasattr(state_class, "__post_init__") or hasattr(state_class, "__slots__")
            or not all(f.init for f in fields)):
        raise TypeError(f"{state_class.__name__}: updated() copies fields; use "
                        "dataclasses.replace for a class that computes any on init")
    return frozenset(f.name for f in fields)
