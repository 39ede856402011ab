"""Pydantic base classes for event-sourced aggregates (eventsourcing 9.5 ships none).

Events are frozen pydantic models; every concrete event class declares an explicit ``TOPIC``
(stable across renames) and a ``class_version`` (its schema version, upcast on read).
An aggregate keeps one immutable ``state`` value, and every event's ``apply`` runs the
aggregate's pure ``evolve`` reducer: the same function replay and the invariant checker use.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.domain import (
    BaseAggregate,
    CanInitAggregate,
    CanMutateAggregate,
    datetime_now_with_tzinfo,
)
from pydantic import BaseModel, ConfigDict, Field


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
        self.state = None
