"""Identifier rules: validation of caller input and the derived (fallback) request id."""
from __future__ import annotations

import unicodedata
import uuid

from .errors import InvalidArgument

MAX_ID_LENGTH = 1000
# A fixed namespace for every id this project derives; changing it would change derived ids.
SCHEDFENCE_NAMESPACE = uuid.UUID("6f1c1a52-5d0e-4c65-9a44-3f0f3a1f9e10")
WORKFLOW_ID_PREFIX = "temporal-sys-scheduler:"
SCHEDULER_WORKFLOW_TYPE = "temporal-sys-scheduler-workflow"
DUMMY_WORKFLOW_TYPE = "temporal-sys-dummy-workflow"


def validate_id(kind: str, value: object) -> str:
    """Return ``value`` if it is a usable identifier, else raise InvalidArgument."""
    if not isinstance(value, str) or value == "":
        raise InvalidArgument(f"{kind} is required")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgument(f"{kind} is longer than {MAX_ID_LENGTH} characters ({len(value)})")
    # C0/C1 controls and line/paragraph separators break logs, terminals and one-line errors.
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in value):
        raise InvalidArgument(f"{kind} contains a control character")
    if value != value.strip():
        raise InvalidArgument(f"{kind} has leading or trailing white space")
    return value


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
