"""The operator projection: eventsourcing's ``Projection`` dispatch over the fence's events.

``process_event(event, tracking)`` dispatches on the aggregate an event belongs to (every event
class nested in an aggregate subclasses that aggregate's ``Event``, so new event types land in
the right branch). Each branch stages its view rows and ends with ``insert_tracking`` — the
runner commits a batch of them in one transaction. Migrations are folded with
``evolve_migration``, the one reducer: the view never re-implements a transition.
"""
from __future__ import annotations

import json
from typing import Any

from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from eventsourcing.utils import get_topic

from schedfence.domain.forward.aggregate import ForwardMigration, ForwardState
from schedfence.domain.rollback.aggregate import Migration, evolve_migration
from schedfence.domain.source.action import parse_nominal
from schedfence.domain.source.runs import ActionStarted
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.key import KeyState, ScheduleKey
from schedfence.domain.source.state import ScheduleState

from .batch import FoldedMigration
from .names import PROJECTION
from .narration import actor_name
from .records import to_us
from .view import FenceViews


def actor_of(event: Any) -> str | None:
    """Who acted (narration.actor_name), from a pydantic event's fields."""
    return actor_name(_fields(event))  # its __dict__: a missing field costs no exception


def _fields(event: Any) -> dict[str, Any]:
    """The event's attributes (pydantic keeps an event's fields in its ``__dict__``)."""
    return getattr(event, "__dict__", None) or {}


_TYPES: dict[type, tuple[str, str]] = {}
# kind -> the aggregate whose reducer folds it, and its state class (folded rows, tables.py).
# v6: a forward migration's row too (its ForwardState), keyed by the (namespace, id) it moves.
_FOLDED: dict[str, tuple[Any, type]] = {"schedule": (Schedule, ScheduleState),
                                        "key": (ScheduleKey, KeyState),
                                        "forward": (ForwardMigration, ForwardState)}


def _type_of(cls: type) -> tuple[str, str]:
    """An event class's audit ``event_type`` and ``topic``, worked out once per class."""
    known = _TYPES.get(cls)
    if known is None:
        known = _TYPES[cls] = (cls.__name__, getattr(cls, "TOPIC", None) or get_topic(cls))
    return known


class FenceProjection(Projection[FenceViews]):
    name = PROJECTION
    topics = ()  # every event: the audit index holds the whole log

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """An event the branches below do not fold in their own way (a job's, an epoch's, the
        scheduler's run events, which are not nested in the schedule's class: domain/source/
        runs.py; or an aggregate this code does not model): indexed, never skipped, and folded
        into its key's or schedule's row where it has one."""
        self._indexed(domain_event, tracking)

    def _indexed(self, domain_event: Any, tracking: Tracking) -> None:
        aid = str(domain_event.originator_id)
        known = self.view.aggregate(aid) or {}
        if known.get("kind") in _FOLDED:
            self._fold(aid, known["kind"], known.get("folded"), domain_event)
        self._audit(domain_event, tracking, aid, known.get("kind", "other"),
                    known.get("namespace"), known.get("schedule_id"))
        self.view.insert_tracking(tracking)

    def handler(self, event_class: type) -> Any:
        """``process_event``'s branch for ``event_class``, bound (the same dispatch, without
        building a new dispatching wrapper per call as the descriptor does)."""
        handlers = self.__dict__.setdefault("_handlers", {})
        bound = handlers.get(event_class)
        if bound is None:
            self.process_event  # noqa: B018 - the descriptor registers deferred branches
            descriptor = next(vars(k)["process_event"] for k in type(self).__mro__
                              if "process_event" in vars(k))
            bound = handlers[event_class] = \
                descriptor.dispatcher.dispatch(event_class).__get__(self)
        return bound

    @process_event.register(Migration.Event)
    def _migration(self, domain_event: Any, tracking: Tracking) -> None:
        mid = str(domain_event.originator_id)
        before = self.view.migration(mid)
        # The reducer raises on an event it does not know: the runner stops at this position.
        state = evolve_migration(before.state if before else None, domain_event)
        ts = to_us(domain_event.timestamp)
        folded = FoldedMigration(state, before.created_us if before else ts,
                                 before.created_position if before else tracking.notification_id,
                                 ts, tracking.notification_id, domain_event.originator_version)
        self.view.put_migration(mid, folded, before.state if before else None)
        self._audit(domain_event, tracking, mid, "migration", state.namespace, state.schedule_id,
                    migration_id=mid, request_id=state.request_id)
        self.view.insert_tracking(tracking)

    @process_event.register(ActionStarted)
    def _action_started(self, domain_event: Any, tracking: Tracking) -> None:
        """An action the source scheduler started: counted by its lag, and indexed."""
        late = domain_event.timestamp - parse_nominal(domain_event.nominal)
        self.view.add_start_lag(late.total_seconds())
        self._indexed(domain_event, tracking)

    @process_event.register(Schedule.Event)
    def _schedule(self, domain_event: Any, tracking: Tracking) -> None:
        # An incarnation begins with Created, or, made by a forward migration, with
        # CreatedByMigration: either names its key, so ``list`` finds the key's current one.
        self._keyed(domain_event, tracking, "schedule",
                    (Schedule.Created, Schedule.CreatedByMigration))

    @process_event.register(ScheduleKey.Event)
    def _key(self, domain_event: Any, tracking: Tracking) -> None:
        self._keyed(domain_event, tracking, "key", (ScheduleKey.Created,))

    @process_event.register(ForwardMigration.Event)
    def _forward(self, domain_event: Any, tracking: Tracking) -> None:
        self._keyed(domain_event, tracking, "forward", ForwardMigration.ForwardRequested)

    def _keyed(self, event: Any, tracking: Tracking, kind: str,
               created: type[Any] | tuple[type[Any], ...]) -> None:
        """Schedule, key and forward migration events: only their creation names the
        (namespace, id) key. A forward migration's events index under its own id."""
        aid = str(event.originator_id)
        if isinstance(event, created):
            self.view.register_aggregate(aid, kind=kind, namespace=event.namespace,
                                         schedule_id=event.schedule_id,
                                         incarnation=getattr(event, "incarnation", None),
                                         job_id=getattr(event, "job_id", None))
        known = self.view.aggregate(aid) or {}
        if known:
            self._fold(aid, kind, known.get("folded"), event)
        fields = _fields(event)
        self._audit(event, tracking, aid, kind, known.get("namespace"), known.get("schedule_id"),
                    migration_id=fields.get("migration_id") or (aid if kind == "forward"
                                                                else None),
                    request_id=fields.get("request_id"))
        self.view.insert_tracking(tracking)

    def _fold(self, aggregate_id: str, kind: str, before: str | None, event: Any) -> None:
        """The key's or schedule's state after ``event``, by its aggregate's own reducer."""
        aggregate, state_class = _FOLDED[kind]
        state = aggregate.evolve(None if before is None else state_class(**json.loads(before)),
                                 event)
        self.view.put_folded(aggregate_id, event.originator_version, json.dumps(vars(state)))

    def _audit(self, event: Any, tracking: Tracking, aggregate_id: str, aggregate: str,
               namespace: str | None,
               schedule_id: str | None, *, migration_id: str | None = None,
               request_id: str | None = None) -> None:
        event_type, topic = _type_of(type(event))
        self.view.add_audit({
            "position": tracking.notification_id, "ts_us": to_us(event.timestamp),
            "namespace": namespace, "schedule_id": schedule_id, "aggregate": aggregate,
            "aggregate_id": aggregate_id, "version": event.originator_version,
            "migration_id": migration_id, "request_id": request_id or None,
            "actor": actor_of(event), "event_type": event_type, "topic": topic})
