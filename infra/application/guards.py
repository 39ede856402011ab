"""What a command checks before it acts (whether this store is the active one: asked of
replication/standby.py): what the destination shows at a schedule's workflow id (the
sentinel gate, I12; a source create, I1; with a rollback's search attribute check), and
what a rollback would answer (a batch job's dry run). The application service
(infra/application/service.py) hands them to the use cases that need them; none knows it.
"""
from __future__ import annotations

from typing import Any, Mapping

from schedfence.domain.ids import (destination_workflow_id, migration_aggregate_id,
                                   validate_destination_key)
from schedfence.domain.ports import (Destination, DestinationNotFound, DestinationUnavailable,
                                     NamespaceNotServed, SearchAttributeRegistry,
                                     command_error)
from schedfence.domain.rollback import decide as d
from schedfence.domain.source.action import check_registered
from schedfence.domain.source.program import program_of

from schedfence.infra.adapters.destination.identity import binding_for, check_destination
from schedfence.infra.adapters.store.aggregates import Aggregates


def require_served(destination: Destination, namespace: str) -> None:
    """A destination configured for other namespaces (``serves``: a Temporal adapter's URL)
    refuses a command for ``namespace`` up front: ``invalid_argument``, never one refusal per
    schedule of a batch job."""
    serves = getattr(destination, "serves", None)
    if callable(serves) and not serves(namespace):
        served = ", ".join(sorted(getattr(destination, "namespaces", ()))) or "others"
        raise command_error(NamespaceNotServed(
            f"this destination serves namespace(s) {served}, not {namespace!r}"), "the job")


def destination_check(destination: Destination, namespace: str, schedule_id: str,
                      what: str) -> dict[str, Any]:
    """What the destination shows at the schedule's workflow id, as recorded on the
    event it justifies (the sentinel gate, I12; a source create, I1)."""
    workflow_id = destination_workflow_id(schedule_id)
    try:
        current = destination.describe(namespace, workflow_id)
    except DestinationNotFound:
        current = None
    except DestinationUnavailable as exc:
        raise command_error(exc, f"the {what}") from exc
    return d.destination_check(workflow_id, current)


def predict_rollback(load: Aggregates, destination: Destination, namespace: str,
                     schedule_id: str, rid: str) -> str:
    """The rollback's admin gate and sentinel check, read only (a prediction: the real
    request decides again)."""
    validate_destination_key(namespace, schedule_id)
    st = load.source(namespace, schedule_id).state
    same = load.migration_state(migration_aggregate_id(namespace, schedule_id, rid))
    outcome = d.rollback_gate(st, rid, same, load.migration_state(st.fence_migration_id))
    if outcome == "accept":
        d.check_sentinel(destination_check(destination, namespace, schedule_id,
                                           "sentinel check"))
        return "accepted"
    return outcome


def accept_binding(destination: Destination, namespace: str) -> dict[str, str]:
    """What an accepted migration (or job) of ``namespace`` records as its destination
    (domain/destination_id.py): read with the checks that accept it, so every later step
    acts on the system they ran against. The cluster's id unreadable: ``unavailable``."""
    try:
        return binding_for(destination, namespace)
    except DestinationUnavailable as exc:
        raise command_error(exc, "the destination's identity") from exc


def check_bound(what: str, binding: Mapping[str, Any] | None, destination: Destination,
                bind_hint: str = "") -> None:
    """A command's destination gate (domain/destination_id.py): refused unless this process
    serves what ``what`` was accepted against; the cluster's id unreadable: ``unavailable``."""
    try:
        check_destination(what, binding, destination, bind_hint)
    except DestinationUnavailable as exc:
        raise command_error(exc, "the destination's identity") from exc


def rollback_check(destination: Destination, namespace: str, schedule_id: str,
                   state: Any) -> dict[str, Any]:
    """What a rollback asks the destination before its fence: the sentinel check, and, where
    the destination tells, whether its namespace registered the action's search attributes
    with their types (``invalid_argument`` naming ``search_attributes``: the server would
    refuse the create after the fence, and the rollback park ``start_rejected``)."""
    sentinel = destination_check(destination, namespace, schedule_id, "sentinel check")
    action, dest = program_of(state).action, destination
    if action is None or not action.search_attributes or \
            not isinstance(dest, SearchAttributeRegistry):
        return sentinel
    try:
        registered = dest.search_attribute_types(namespace)
    except DestinationNotFound:  # no such namespace: the create says so, as before
        return sentinel
    except DestinationUnavailable as exc:
        raise command_error(exc, "the search attribute check") from exc
    check_registered(action, registered)
    return sentinel
