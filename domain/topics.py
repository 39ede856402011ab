"""Every topic a stored record may carry, and the module that defines it.

A stored event names its class by its explicit ``TOPIC`` (domain/model.py), and eventsourcing
finds the class by that name only once the module defining it has been imported: its
aggregate's class statement registers the topic. A process imports what its command needs, so
without this table a process that never imported, say, domain/job.py could not read a job's
record, and stopped at it (``undecodable_event``, issue 28). ``resolve_stored`` imports the
defining module on first use of a topic, so start-up stays small and every process reads every
record. Every decode path resolves through it: the mapper (infra/adapters/store/codec.py) for events and
snapshots, and ``EvolvingAggregate.Snapshot`` for the aggregate class a snapshot names.

The aggregate topics are listed too: a creation event's ``originator_topic`` and a snapshot's
``topic`` name them.

Old topics: every event class has had an explicit topic since the first release, and none was
renamed, so no alias is needed. Older shapes keep their topic and are upcast on read (the v1
``RequestIdAssigned`` of an identity-less migration, infra/demo/legacy.py). The one retired
class, ``schedfence.migration.LegacyRollbackRequested`` (removed before any release stored
it), stays unknown on purpose: reading it is an ``undecodable_event`` naming it
(tests/infra/adapters/store/test_legacy.py). A topic is never reused for another class.

tests/domain/test_topics.py walks every module for event and aggregate classes and fails if
one is missing here, and resolves every entry in a fresh interpreter.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any

from eventsourcing.utils import TopicError, resolve_topic

_MODEL = "schedfence.domain.model"
_SCHEDULE = "schedfence.domain.source.schedule"
_RUNS = "schedfence.domain.source.runs"
_KEY = "schedfence.domain.source.key"
_MIGRATION = "schedfence.domain.rollback.aggregate"
_FORWARD = "schedfence.domain.forward.aggregate"
_JOB = "schedfence.domain.job"
_FAILOVER = "schedfence.domain.failover"
_OWNERS = "schedfence.domain.owners.audit"


def _family(module: str, prefix: str, *names: str) -> dict[str, str]:
    return {f"{prefix}.{name}": module for name in names}


STORED_TOPICS: dict[str, str] = {
    "schedfence.Snapshot": _MODEL,
    # aggregates (a creation event's originator_topic, a snapshot's topic)
    "schedfence.Schedule": _SCHEDULE,
    "schedfence.ScheduleKey": _KEY,
    "schedfence.Migration": _MIGRATION,
    "schedfence.ForwardMigration": _FORWARD,
    "schedfence.Job": _JOB,
    "schedfence.StoreEpoch": _FAILOVER,
    "schedfence.OwnershipAudits": _OWNERS,
    # the source schedule: its lifecycle and fences
    **_family(_SCHEDULE, "schedfence.schedule", "Created", "CreatedByMigration", "Paused",
              "NotesUpdated", "Deleted", "FencedForMigration", "ClosedByMigration",
              "FenceAdopted", "FenceReleased", "OwnershipTaken", "TakeoverAbandoned"),
    # the source schedule: its runs, actions, triggers, backfills and program updates
    **_family(_RUNS, "schedfence.schedule", "TimesProcessed", "ActionStartIssued",
              "ActionStarted", "ActionStartRetrying", "ActionStartFailed", "ActionClosed",
              "StopRequested", "PausedOnFailure", "Triggered", "BackfillRequested",
              "BackfillProcessed", "ProgramUpdated"),
    # a schedule key: its incarnations and forward migrations
    **_family(_KEY, "schedfence.schedule_key", "Created", "IncarnationStarted",
              "ForwardOpened", "ForwardClosed"),
    # a rollback (source -> workflow), its recovery and failover reconciliation
    **_family(_MIGRATION, "schedfence.migration", "Created", "RequestIdAssigned",
              "StartClaimConsumed", "DestinationStartIssued", "DestinationAnswered",
              "ChainVerified", "FailoverReconciled", "OwnershipAccepted", "BoundarySettled",
              "MigrationParked", "LegacyMigrationAdopted", "MigrationResolved",
              "StartClaimRearmed", "SourceClosed", "MigrationAborted", "DestinationBound"),
    # a forward migration (workflow -> source)
    **_family(_FORWARD, "schedfence.forward", "Created", "ForwardRequested",
              "TemporalFenceIssued", "TemporalFenced", "SourceCreated", "TemporalDeleteIssued",
              "ForwardCompleted", "ForwardParked", "ForwardAborted"),
    # a batch job
    **_family(_JOB, "schedfence.job", "Created", "Defined", "PageDecided", "BlockedAsked",
              "CancelRequested"),
    # the store's failover epoch
    **_family(_FAILOVER, "schedfence.store_epoch", "Created", "FailoverRecorded"),
    # the ownership audits of a namespace
    **_family(_OWNERS, "schedfence.ownership", "Created", "AuditRecorded"),
}


# The event types an operator may name (``audit --type``): every event topic above (the
# aggregates' and the snapshot's are no events), and its class name, which is its last part.
EVENT_TOPICS = frozenset(t for t in STORED_TOPICS if t.count(".") == 2)
EVENT_CLASS_NAMES = frozenset(t.rsplit(".", 1)[1] for t in EVENT_TOPICS)


def is_event_type(name: str) -> bool:
    """``name`` is a stored event's class name (``MigrationAborted``) or topic."""
    return name in EVENT_TOPICS or name in EVENT_CLASS_NAMES


def resolve_stored(topic: str) -> Any:
    """The class a stored record's topic names, importing its defining module on first use.

    A topic not in ``STORED_TOPICS`` resolves only to a class registered under exactly that
    topic (a test's own event class); anything else raises ``TopicError``, as an unknown
    topic always did.
    """
    module = STORED_TOPICS.get(topic)
    if module is not None and module not in sys.modules:
        importlib.import_module(module)
    found = resolve_topic(topic)
    if module is None and getattr(found, "TOPIC", None) != topic:
        raise TopicError(f"{topic!r} is not the topic of a stored event type")
    return found
