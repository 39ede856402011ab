"""Real, clean histories written by the service for the invariant checker's tests, and
the helpers that edit them (log positions, versions renumbered per aggregate)."""
from __future__ import annotations

from typing import Any, Callable

from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.invariants.checker import Violation
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.ports import StartWorkflow
from schedfence.domain.source.schedule import Schedule
from schedfence.infra.demo.legacy import plant_legacy_v1
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

M, S = Migration, Schedule
NS = "inv"
PRE_NOTES = "before the migration"


# -- building real histories -----------------------------------------------------------------

def _service() -> tuple[MigrationService, SimulatedDestination]:
    sim = SimulatedDestination(seed=3)
    return open_service("sqlite:///:memory:", sim, worker_id="w", claim_grace=0,
                        retry_for=0), sim


def _events(svc: MigrationService) -> list[Any]:
    return [svc.app.mapper.to_domain_event(n) for n in svc.app.notifications()]


def _new(svc: MigrationService, sid: str, request_id: str | None = None) -> str:
    svc.create_schedule(NS, sid, paused=False, notes=PRE_NOTES)
    return svc.rollback(NS, sid, request_id=request_id).migration_id


def scenario_created() -> tuple[list[Any], str]:
    """Start created, receipt from the start's answer, source closed."""
    svc, _ = _service()
    mid = _new(svc, "created")
    svc.run_until_idle()
    return _events(svc), mid


def scenario_chain_head() -> tuple[list[Any], str]:
    """Start committed with its answer lost, chain continued-as-new, owned via its head."""
    svc, sim = _service()
    mid = _new(svc, "head")
    sim.inject("start", "lose_response")
    svc.run_until_idle()
    sim.continue_as_new(NS, destination_workflow_id("head"))
    svc.run_until_idle()
    return _events(svc), mid


def scenario_foreign_abort() -> tuple[list[Any], str]:
    """A foreign run answers AlreadyStarted (no commit); parked; the operator aborts."""
    svc, sim = _service()
    svc.create_schedule(NS, "foreign", paused=False, notes=PRE_NOTES)
    sim.start_workflow(StartWorkflow(NS, destination_workflow_id("foreign"), "someone-else",
                                     "user-workflow"))
    mid = svc.rollback(NS, "foreign", request_id="rid-foreign").migration_id
    svc.run_until_idle()
    svc.abort(NS, "foreign", reason="operator decision", actor="ops")
    return _events(svc), mid


def scenario_rearm() -> tuple[list[Any], str]:
    """Parked on a foreign run, which then completes: the claim is re-armed and used once."""
    svc, sim = _service()
    svc.create_schedule(NS, "rearm", paused=True, notes=PRE_NOTES)
    wid = destination_workflow_id("rearm")
    sim.start_workflow(StartWorkflow(NS, wid, "someone-else", "user-workflow"))
    mid = svc.rollback(NS, "rearm").migration_id
    svc.run_until_idle()
    sim.complete(NS, wid)
    svc.run_until_idle()
    return _events(svc), mid


def scenario_parked_lost() -> tuple[list[Any], str]:
    """Start committed, answer lost, then the run was deleted: parked head_missing."""
    svc, sim = _service()
    mid = _new(svc, "lost")
    sim.inject("start", "lose_response")
    svc.run_until_idle()
    sim.delete(NS, destination_workflow_id("lost"))
    svc.run_until_idle()
    return _events(svc), mid


def scenario_legacy() -> tuple[list[Any], str]:
    """An identity-less migration written by an old release; the worker never acts on it."""
    svc, _ = _service()
    svc.create_schedule(NS, "legacy", paused=False, notes=PRE_NOTES)
    mid = plant_legacy_v1(svc, NS, "legacy")  # the v1 record an older release stored
    svc.run_until_idle()
    return _events(svc), mid


SCENARIOS: dict[str, Callable[[], tuple[list[Any], str]]] = {
    "created": scenario_created, "chain_head": scenario_chain_head,
    "foreign_abort": scenario_foreign_abort, "rearm": scenario_rearm,
    "parked_lost": scenario_parked_lost, "legacy": scenario_legacy,
}


# -- editing histories -----------------------------------------------------------------------

def numbered(events: list[Any]) -> list[tuple[int, Any]]:
    """Log positions, and versions renumbered 1, 2, ... per aggregate: an edit that drops or
    adds an event is about the rule under test, not about a version gap (I0, tested apart)."""
    seen: dict[Any, int] = {}
    out = []
    for pos, e in enumerate(events, start=1):
        seen[e.originator_id] = seen.get(e.originator_id, 0) + 1
        if e.originator_version != seen[e.originator_id]:
            e = e.model_copy(update={"originator_version": seen[e.originator_id]})
        out.append((pos, e))
    return out


def index_of(events: list[Any], cls: type, nth: int = 0) -> int:
    hits = [i for i, e in enumerate(events) if type(e) is cls]
    assert len(hits) > nth, f"no {cls.__name__} #{nth} in the scenario"
    return hits[nth]


def pos(i: int) -> int:
    return i + 1


def only(violations: list[Violation], invariant: str) -> Violation:
    assert [v.invariant for v in violations] == [invariant], violations
    return violations[0]
