"""How a migration's older records read today: each stored version's upcaster, a function that
brings the stored fields (a dict, changed in place) up one version.

The event classes of aggregate.py name these as their ``upcast_vN_vN+1`` hooks, which
``domain.model.upcast`` runs in order on read (eventsourcing's convention); what each version
added is told on the event class itself. An upcaster only fills in what an older release did
not record, so every stored record keeps its meaning.
"""
from __future__ import annotations

from typing import Any, Callable

from schedfence.domain.source.action import upcast_handover_v1_v2

Upcaster = Callable[[dict[str, Any]], None]


# The Migration aggregate's snapshot state
def migration_state_v1_v2(state: dict[str, Any]) -> None:
    upcast_handover_v1_v2(state.get("handover"))


def no_job(state: dict[str, Any]) -> None:
    """A migration (its creation, or its snapshot state) from before a job was recorded: None,
    as a rollback asked by itself reads (RequestIdAssigned v5 to v6, the state v2 to v3,
    ForwardRequested v2 to v3)."""
    state.update(job_id=None)


def no_destination(state: dict[str, Any]) -> None:
    """A record from before destinations were bound (domain/destination_id.py): unknown,
    never guessed (RequestIdAssigned v6 to v7, the state v3 to v4; ForwardRequested v3 to v4,
    the forward's state v3 to v4; Job.Defined v1 to v2, the job's state v1 to v2;
    LegacyMigrationAdopted v1 to v2). A state that has one already keeps it (a recorded
    state, read with no version, is brought up by every hook: tests/replay/corpus.py)."""
    state.setdefault("destination", None)


# RequestIdAssigned: v1 (an identity-less record of an older release) to v5
def request_id_assigned_v1_v2(state: dict[str, Any]) -> None:
    state.update(request_id=None, origin="legacy", claim_armed=False, actor="")


def request_id_assigned_v2_v3(state: dict[str, Any]) -> None:
    state.update(epoch=0, sentinel_check=None)


def request_id_assigned_v3_v4(state: dict[str, Any]) -> None:
    state.update(handover=None)


def request_id_assigned_v4_v5(state: dict[str, Any]) -> None:
    upcast_handover_v1_v2(state.get("handover"))


# DestinationStartIssued
def start_issued_v1_v2(state: dict[str, Any]) -> None:
    upcast_handover_v1_v2((state.get("input") or {}).get("handover"))


# ChainVerified
def chain_verified_v1_v2(state: dict[str, Any]) -> None:
    state.update(head_create_request_id="")


# BoundarySettled
def boundary_settled_v1_v2(state: dict[str, Any]) -> None:
    state.update(pin=None)


def boundary_settled_v2_v3(state: dict[str, Any]) -> None:
    state.update(deleted_at=None)


def boundary_settled_v3_v4(state: dict[str, Any]) -> None:
    state.update(over_limit=None)


def boundary_settled_v4_v5(state: dict[str, Any]) -> None:
    state.update(after_delete=[])


# StartClaimRearmed
def claim_rearmed_v1_v2(state: dict[str, Any]) -> None:
    state.update(absence=None)
