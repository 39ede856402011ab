"""Issue 10, items 3 and 4, end to end: a destination outage in which nothing reached the
server leaves no migration parked, and a read inside the claim grace parks nothing."""
from __future__ import annotations

from typing import Any
from uuid import UUID

from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.ports import (DestinationNotReached, RunDescription, StartAccepted,
                                     StartWorkflow)
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.engines.attempt import RollbackEngine

from tests.helpers import NS, new_world

N = 40


class Outage:
    """The simulator behind a switch: while ``down``, every call is refused before it is
    sent (connection refused), as the Temporal adapter reports a dead server."""

    def __init__(self, inner: SimulatedDestination) -> None:
        self.inner, self.down, self.refused = inner, False, 0

    def _gate(self, what: str) -> None:
        if self.down:
            self.refused += 1
            raise DestinationNotReached(f"{what} not sent: UNAVAILABLE: tcp connect error")

    def start_workflow(self, request: StartWorkflow) -> StartAccepted:
        self._gate("start")
        return self.inner.start_workflow(request)

    def describe(self, namespace: str, workflow_id: str,
                 run_id: str | None = None) -> RunDescription:
        self._gate("describe")
        return self.inner.describe(namespace, workflow_id, run_id)


def test_an_outage_where_nothing_was_sent_parks_nothing(store_url: str) -> None:
    sim = SimulatedDestination()
    dest = Outage(sim)
    with open_service(store_url, dest, worker_id="w", claim_grace=0) as svc:  # type: Any
        for i in range(N):
            svc.create_schedule(NS, f"s{i}")
            svc.rollback(NS, f"s{i}")
        dest.down = True  # the server dies before any worker ran
        for _ in range(3):
            svc.run_until_idle()
        assert dest.refused >= N
        states = {svc.migration(NS, f"s{i}").state for i in range(N)}
        assert states == {"pending"}  # each refused start re-armed its claim
        dest.down = False  # the server is back
        svc.run_until_idle()
        assert {svc.migration(NS, f"s{i}").state for i in range(N)} == {"completed"}
        assert all(sim.created_count(NS, destination_workflow_id(f"s{i}")) == 1
                   for i in range(N))
        assert svc.verify() == []


def test_an_absent_chain_inside_the_grace_parks_nothing_and_is_found_after() -> None:
    w = new_world(claim_grace=3600)  # any read now is "inside the grace"
    w.service.create_schedule(NS, "s1")
    w.service.rollback(NS, "s1", "R1")
    w.dest.inject("start", "unavailable")  # nothing committed, but the worker cannot know
    w.service.run_until_idle()
    w.service.run_until_idle()  # reconcile finds no run: inside the grace, it waits
    mig = w.service.migration(NS, "s1")
    assert (mig.state, mig.park_reason) == ("claimed", None)
    assert not [e for e in w.service.history(NS, "s1") if e.type.endswith("ChainVerified")]
    w.service.worker.claim_grace = 0  # the grace has passed
    w.service.run_until_idle()
    mig = w.service.migration(NS, "s1")
    assert (mig.state, mig.park_reason) == ("parked", "head_missing")
    assert w.service.verify() == []
    assert w.dest.runs(NS, destination_workflow_id("s1")) == []  # indeed nothing landed
    w.service.close()


def test_an_answer_that_loses_a_race_is_still_recorded() -> None:
    """Another worker reconciles while our start is on its way (no grace), finds nothing and
    parks; the start then creates our chain. Its answer is recorded on top, and proves it."""
    w = new_world()
    w.service.create_schedule(NS, "s1")
    mid = w.service.rollback(NS, "s1", "R1").migration_id
    rival = RollbackEngine(w.service.app, w.dest, "rival", claim_grace=0)  # same store
    w.hooks.once("start.before_call", lambda: rival.attempt(UUID(mid)))
    w.service.run_until_idle()
    kinds = [e.type.rsplit(".", 1)[1] for e in w.service.history(NS, "s1")]
    assert "MigrationParked" in kinds  # the rival parked first ...
    assert kinds.index("DestinationAnswered") > kinds.index("MigrationParked")  # ... then ours
    mig = w.service.migration(NS, "s1")
    assert mig.state == "completed" and w.service.verify() == []
    w.service.close()
