"""Fault injection at every retry boundary of the happy-path rollback (docs/protocol.md).

Each case crashes once (a ``SimulatedCrash`` raised by the crash hook) or lets the destination
fail once, then "restarts" and drains the worker. Whatever the boundary, the outcome must be
one of the two the protocol allows: the source closed with exactly one destination chain and a
receipt, or the migration parked (the source still paused and fenced) with no second chain.
The file-store variant reopens the service from its URL after the crash, so nothing the
outcome depends on can live only in process memory. Every case runs on SQLite and PostgreSQL.
"""
from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

import pytest

from schedfence.domain.errors import Unavailable
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE, destination_workflow_id
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.source.schedule import MIGRATION_NOTE
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

NS, SID = "default", "fault-sched"
WID = destination_workflow_id(SID)
PRE_PAUSED, PRE_NOTES = False, "pre-migration notes"


class SimulatedCrash(Exception):
    """The process dies at a boundary: nothing after the raise happens."""


class CrashOnce:
    """Crash hook that raises the first time ``point`` is reached, then never again."""

    def __init__(self, point: str | None) -> None:
        self.point, self.fired, self.seen = point, False, []

    def __call__(self, point: str) -> None:
        self.seen.append(point)
        if point == self.point and not self.fired:
            self.fired = True
            raise SimulatedCrash(point)


class Harness:
    """One store and one destination; ``restart`` drops the service as a crash would."""

    def __init__(self, store: Store, hook: CrashOnce) -> None:
        self.sim = SimulatedDestination(seed=7)
        self.file = store.reopen
        self.url = store.url
        self.service = open_service(self.url, self.sim, worker_id="w1", crash_hook=hook,
                                    retry_for=0)
        self.generation = 1

    def restart(self) -> MigrationService:
        """A new service without the hook: reopened from the URL, or on the same app.

        It runs after the dead worker's claim grace has passed (claim_grace=0): it may
        reconcile the dead worker's consumed claim at once."""
        self.generation += 1
        worker = f"w{self.generation}"
        if self.file:
            self.service.close()
            self.service = open_service(self.url, self.sim, worker_id=worker, claim_grace=0,
                                        retry_for=0)
        else:
            self.service = MigrationService(self.service.app, self.sim, worker_id=worker,
                                            claim_grace=0)
        return self.service

    def drain(self) -> None:
        """Run the worker until a whole pass appends nothing (back-offs end each pass)."""
        for _ in range(10):
            before = self.service.event_count()
            self.service.run_until_idle()
            if self.service.event_count() == before:
                return
        raise AssertionError("the worker never went idle")


@dataclass(frozen=True)
class Store:
    url: str
    reopen: bool  # restart by reopening the store from its URL, not on the same app


@pytest.fixture(params=["memory", "file"])
def store(request, store_kind: str, store_url: str, tmp_path) -> Store:
    """``memory``: the restart keeps the app; ``file``: it reopens the store from its URL.

    On SQLite these are an in-memory database and a file; on PostgreSQL both are a fresh
    schema (a schema persists across opens as a file does), run once per restart kind."""
    if request.param == "file" and store_kind == "sqlite":
        return Store(f"sqlite:///{tmp_path / 'store.db'}", reopen=True)
    return Store(store_url, reopen=request.param == "file")


def _rollback(h: Harness) -> str:
    """Admin rollback; if the crash hit it, restart and retry (same derived id, F5)."""
    try:
        first = h.service.rollback(NS, SID)
    except SimulatedCrash:
        h.restart()
        retry = h.service.rollback(NS, SID)
        assert retry.outcome in ("accepted", "already_pending")
        assert retry.request_id_origin == "derived"
        return retry.request_id
    assert first.outcome == "accepted"
    return first.request_id


def _migration_events(service: MigrationService) -> list:
    return [service.app.mapper.to_domain_event(n) for n in service.app.notifications()
            if n.topic.startswith("schedfence.migration.")]


def _assert_outcome(h: Harness, request_id: str, expect: str, park_reason: str | None,
                    evidence: str | None) -> None:
    svc, sim = h.service, h.sim
    mig, src = svc.migration(NS, SID), svc.schedule(NS, SID)
    events = _migration_events(svc)
    receipts = [e for e in events if isinstance(e, Migration.OwnershipAccepted)]

    # One destination chain at most, and no second run created by this migration.
    assert len(sim.chains(NS, WID)) <= 1
    assert sim.created_count(NS, WID) <= 1
    # Every start the destination ever saw used the durable id and the pre-migration pause.
    for request, _kind in sim.start_log(NS, WID):
        assert request.request_id == request_id == mig.request_id
        assert request.workflow_type == SCHEDULER_WORKFLOW_TYPE
        assert (request.input["paused"], request.input["notes"]) == (PRE_PAUSED, PRE_NOTES)
        assert (request.id_reuse_policy, request.id_conflict_policy) == ("allow_duplicate",
                                                                          "fail")
    # Closed iff a receipt exists, and then it names the one chain, created by our id.
    assert src.closed == bool(receipts)
    if expect == "closed":
        assert src.closed and src.close_reason == "migrated"
        assert [e.evidence for e in receipts] == [evidence]
        assert mig.state == "completed" and mig.destination_first_run_id
        assert sim.chains(NS, WID) == [mig.destination_first_run_id]
        assert sim.created_count(NS, WID, request_id) == 1
        head = sim.describe(NS, WID, mig.destination_first_run_id)
        assert request_id in head.request_ids
    else:
        assert not receipts
        assert (mig.state, mig.park_reason) == ("parked", park_reason)
        assert src.paused and src.migration_pending and not src.closed
        assert src.notes == MIGRATION_NOTE
        assert sim.chains(NS, WID) == [] and sim.created_count(NS, WID) == 0
    assert svc.verify() == []
    # A further task delivery is dropped (closed) or stays reconcile-only (parked): no writes.
    before = svc.event_count()
    svc.worker.attempt(UUID(mig.migration_id))
    svc.run_until_idle()
    assert svc.event_count() == before
    assert len(sim.start_log(NS, WID)) <= 1


# point, expected outcome, park reason, evidence of the receipt
CRASHES = [
    ("rollback.before_append", "closed", None, "start_created"),
    ("rollback.after_append", "closed", None, "start_created"),
    ("claim.before_append", "closed", None, "start_created"),
    # Claim consumed, start never sent: no proof either way survives, so the operator decides
    # (a quarantine). Reconcile finds no run and parks; nothing is started again.
    ("claim.after_append", "parked", "head_missing", None),
    ("start.before_call", "parked", "head_missing", None),
    # The start committed but its answer was never recorded: reconcile proves the chain head.
    ("start.after_call", "closed", None, "chain_head"),
    ("answer.before_append", "closed", None, "chain_head"),
    ("answer.after_append", "closed", None, "start_created"),
    ("close.before_append", "closed", None, "start_created"),
    ("close.after_append", "closed", None, "start_created"),
]


@pytest.mark.parametrize("point,expect,park_reason,evidence", CRASHES,
                         ids=[c[0] for c in CRASHES])
def test_crash_at_every_boundary(store, point, expect, park_reason, evidence):
    hook = CrashOnce(point)
    h = Harness(store, hook)
    h.service.create_schedule(NS, SID, paused=PRE_PAUSED, notes=PRE_NOTES)
    request_id = _rollback(h)
    try:
        h.service.run_until_idle()
    except SimulatedCrash:
        pass
    assert hook.fired, f"{point} was never reached (seen: {hook.seen})"
    h.restart()
    h.drain()
    _assert_outcome(h, request_id, expect, park_reason, evidence)
    h.service.close()


START_FAULTS = [
    # Nothing committed, but the worker cannot know that: the claim stays consumed.
    ("fail_before_commit", "parked", "head_missing", None),
    ("lose_response", "closed", None, "chain_head"),
    ("unavailable", "parked", "head_missing", None),
]


@pytest.mark.parametrize("fault,expect,park_reason,evidence", START_FAULTS,
                         ids=[f[0] for f in START_FAULTS])
def test_start_fault(store, fault, expect, park_reason, evidence):
    h = Harness(store, CrashOnce(None))
    h.service.create_schedule(NS, SID, paused=PRE_PAUSED, notes=PRE_NOTES)
    request_id = _rollback(h)
    h.sim.inject("start", fault)
    h.service.run_until_idle()
    answers = [e for e in _migration_events(h.service)
               if isinstance(e, Migration.DestinationAnswered)]
    assert [a.kind for a in answers] == ["unavailable"]
    h.restart()
    h.drain()
    assert len(h.sim.start_log(NS, WID)) == 1  # reconcile only: never a second start
    _assert_outcome(h, request_id, expect, park_reason, evidence)
    h.service.close()


@pytest.mark.parametrize("fault", ["fail_before_commit", "lose_response", "unavailable"])
def test_describe_fault_in_sentinel_gate_writes_nothing(store, fault):
    h = Harness(store, CrashOnce(None))
    h.service.create_schedule(NS, SID, paused=PRE_PAUSED, notes=PRE_NOTES)
    before = h.service.event_count()
    h.sim.inject("describe", fault)
    with pytest.raises(Unavailable):
        h.service.rollback(NS, SID)
    assert h.service.event_count() == before
    assert not h.service.schedule(NS, SID).migration_pending
    request_id = _rollback(h)
    h.drain()
    _assert_outcome(h, request_id, "closed", None, "start_created")
    h.service.close()


@pytest.mark.parametrize("fault", ["fail_before_commit", "lose_response", "unavailable"])
def test_describe_fault_during_reconcile(store, fault):
    h = Harness(store, CrashOnce(None))
    h.service.create_schedule(NS, SID, paused=PRE_PAUSED, notes=PRE_NOTES)
    request_id = _rollback(h)
    h.sim.inject("start", "lose_response")
    h.sim.inject("describe", fault)
    h.service.run_until_idle()  # start committed, answer lost: back off
    h.service.run_until_idle()  # reconcile cannot read the chain: back off again
    verdicts = [e.verdict for e in _migration_events(h.service)
                if isinstance(e, Migration.ChainVerified)]
    assert verdicts == ["unavailable"]
    assert not h.service.schedule(NS, SID).closed
    h.restart()
    h.drain()
    _assert_outcome(h, request_id, "closed", None, "chain_head")
    h.service.close()


@pytest.mark.parametrize("point", ["describe.before_call", "describe.after_call",
                                   "chain.before_append", "chain.after_append"])
def test_crash_during_reconcile(store, point):
    """A crash anywhere in the reconcile of a lost start still ends with the one chain owned."""
    hook = CrashOnce(point)
    h = Harness(store, hook)
    h.service.create_schedule(NS, SID, paused=PRE_PAUSED, notes=PRE_NOTES)
    request_id = _rollback(h)
    h.sim.inject("start", "lose_response")
    h.service.run_until_idle()
    try:
        h.service.run_until_idle()
    except SimulatedCrash:
        pass
    assert hook.fired
    h.restart()
    h.drain()
    _assert_outcome(h, request_id, "closed", None, "chain_head")
    h.service.close()
