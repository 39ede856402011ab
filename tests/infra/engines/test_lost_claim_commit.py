"""A claim whose commit answer is lost (the connection drops at COMMIT): on reload the claim
that names this worker and attempt is recognized as ours and its one start goes out, instead
of a reconcile that finds no run and parks head_missing. A save that really failed is not
mistaken for ours."""
from __future__ import annotations

import psycopg
import pytest

from schedfence.domain.ids import destination_workflow_id
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from tests.helpers import Hooks

NS, SID = "ns", "s"


def dropped() -> None:
    raise psycopg.OperationalError("server closed the connection unexpectedly")


def test_a_committed_claim_whose_answer_was_lost_still_starts_once(pg_store: str) -> None:
    dest, hooks = SimulatedDestination(), Hooks()
    with open_service(pg_store, dest, crash_hook=hooks, worker_id="w") as svc:
        svc.create_schedule(NS, SID)
        svc.rollback(NS, SID, "R1")
        hooks.once("claim.after_append", dropped)  # committed, but the client never heard
        svc.run_until_idle()
        assert svc.migration(NS, SID).state == "completed"
        assert dest.created_count(NS, destination_workflow_id(SID)) == 1
        assert svc.verify() == []


def test_a_claim_save_that_really_failed_is_not_taken_for_ours(pg_store: str) -> None:
    dest, hooks = SimulatedDestination(), Hooks()
    with open_service(pg_store, dest, crash_hook=hooks, worker_id="w") as svc:
        svc.create_schedule(NS, SID)
        svc.rollback(NS, SID, "R1")
        hooks.once("claim.before_append", dropped)  # nothing was written
        with pytest.raises(psycopg.OperationalError):
            svc.worker.attempt(svc.open_migration_ids()[0])
        assert svc.migration(NS, SID).state == "pending"
        assert dest.created_count(NS, destination_workflow_id(SID)) == 0
        svc.run_until_idle()
        assert svc.migration(NS, SID).state == "completed" and svc.verify() == []
