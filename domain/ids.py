"""Identifier rules: validation of caller input and the derived (fallback) request id."""
from __future__ import annotations

import uuid

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.text import MAX_ID_LENGTH
from schedfence.domain.text import validate_id as validate_id  # re-exported: the one set of rules

# A fixed namespace for every id this project derives; changing it would change derived ids.
SCHEDFENCE_NAMESPACE = uuid.UUID("6f1c1a52-5d0e-4c65-9a44-3f0f3a1f9e10")
WORKFLOW_ID_PREFIX = "temporal-sys-scheduler:"
SCHEDULER_WORKFLOW_TYPE = "temporal-sys-scheduler-workflow"
DUMMY_WORKFLOW_TYPE = "temporal-sys-dummy-workflow"


# Temporal refuses ids longer than its ``limit.maxIDLength`` (default 1000), counted in bytes
# (Go's len): a workflow id, a request id, a namespace. The destination workflow id is
# WORKFLOW_ID_PREFIX + schedule id, so a schedule id gets what the prefix leaves.
MAX_DESTINATION_ID_BYTES = 1000
MAX_SCHEDULE_ID_BYTES = MAX_DESTINATION_ID_BYTES - len(WORKFLOW_ID_PREFIX.encode("utf-8"))


def _fits_destination(kind: str, value: str, limit: int, why: str = "") -> str:
    size = len(value.encode("utf-8"))
    if size > limit:
        raise InvalidArgument(f"{kind} is {size} bytes in UTF-8; the destination (Temporal) "
                              f"takes at most {limit}{why}")
    return value


def validate_destination_key(namespace: object, schedule_id: object) -> tuple[str, str]:
    """A key a rollback can hand over: the generic id rules, and what Temporal accepts for the
    namespace and the workflow id ``temporal-sys-scheduler:<schedule id>``. Checked where a key
    is created or handed over; reads of keys stored earlier use ``validate_id`` only."""
    ns = validate_id("namespace", namespace)
    sid = validate_id("schedule id", schedule_id)
    return (_fits_destination("namespace", ns, MAX_DESTINATION_ID_BYTES),
            _fits_destination("schedule id", sid, MAX_SCHEDULE_ID_BYTES,
                              f" (its workflow id {WORKFLOW_ID_PREFIX}<schedule id> at most "
                              f"{MAX_DESTINATION_ID_BYTES})"))


def validate_request_id(value: object, kind: str = "request id") -> str:
    """A request id sent to the destination as StartWorkflowExecution's request id."""
    return _fits_destination(kind, validate_id(kind, value), MAX_DESTINATION_ID_BYTES)


def derive_request_id(namespace: str, schedule_id: str, incarnation: int) -> str:
    """The request id used when a caller omits one.

    A pure function of the source *incarnation*, so external retries of one logical rollback agree
    (F5), while a later incarnation of the same key never reuses it (which would let the
    destination dedupe against the previous rollback's chain and close the new source).
    """
    key = f"rollback/{len(namespace)}:{namespace}/{len(schedule_id)}:{schedule_id}/{incarnation}"
    return str(uuid.uuid5(SCHEDFENCE_NAMESPACE, key))


def schedule_key_id(namespace: str, schedule_id: str) -> uuid.UUID:
    return uuid.uuid5(SCHEDFENCE_NAMESPACE, f"key/{len(namespace)}:{namespace}/{schedule_id}")


def schedule_aggregate_id(namespace: str, schedule_id: str, incarnation: int) -> uuid.UUID:
    base = f"schedule/{len(namespace)}:{namespace}/{len(schedule_id)}:{schedule_id}"
    return uuid.uuid5(SCHEDFENCE_NAMESPACE, f"{base}/{incarnation}")


def migration_aggregate_id(namespace: str, schedule_id: str, request_id: str) -> uuid.UUID:
    """One migration per (key, request id): reusing an id on the same key finds the old one."""
    base = f"migration/{len(namespace)}:{namespace}/{len(schedule_id)}:{schedule_id}"
    return uuid.uuid5(SCHEDFENCE_NAMESPACE, f"{base}/{request_id}")


def destination_workflow_id(schedule_id: str) -> str:
    return WORKFLOW_ID_PREFIX + schedule_id
