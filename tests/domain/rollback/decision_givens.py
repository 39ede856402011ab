"""Givens for the pure decider's tests: migration states folded from events with
``evolve_migration``, runs at the destination, and the names of decided facts."""
from __future__ import annotations

import uuid
from dataclasses import replace

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback.decide import ChainObservation, StartOutcome
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.rollback.aggregate import Migration, evolve_migration
from schedfence.domain.ports import RunDescription
from schedfence.domain.source.state import ScheduleState

M = Migration
NS, SID, WID, RID = "default", "s1", "temporal-sys-scheduler:s1", "R1"
MID = uuid.UUID(int=1)
SOURCE_ID = str(uuid.UUID(int=2))
W = "w1"
CLOSED_STATUSES = ("completed", "failed", "canceled", "terminated", "timed_out")


# -- given: states folded from events --------------------------------------------------------
class Given:
    """A migration's event history and the state ``evolve_migration`` folds from it."""

    def __init__(self, created: M.Created) -> None:
        self.events = [created]
        self.state = evolve_migration(None, created)

    def then(self, facts: d.Facts) -> Given:
        """Append decided facts as events (validating them) and fold them in."""
        for cls, fields in facts:
            event = cls(originator_id=MID, originator_version=len(self.events) + 1, **fields)
            self.events.append(event)
            self.state = evolve_migration(self.state, event)
        return self


def assigned(**over) -> Given:
    fields = dict(namespace=NS, schedule_id=SID, source_id=SOURCE_ID, incarnation=1,
                  workflow_id=WID, request_id=RID, origin="caller", pre_paused=True,
                  pre_notes="pre", claim_armed=True, actor="admin")
    fields.update(over)
    return Given(M.RequestIdAssigned(originator_id=MID, originator_version=1,
                                     originator_topic=M.TOPIC, **fields))


def legacy() -> Given:
    """An older release's v1 RequestIdAssigned (no request id), upcast as the codec does."""
    v1 = dict(originator_id=MID, originator_version=1, originator_topic=M.TOPIC, namespace=NS,
              schedule_id=SID, source_id=SOURCE_ID, incarnation=1, workflow_id=WID,
              pre_paused=False, pre_notes="legacy")
    M.RequestIdAssigned.upcast_v1_v2(v1)
    return Given(M.RequestIdAssigned(**v1))


def run(run_id: str, first: str | None = None, *, status: str = "running",
        ids: tuple[str, ...] = (RID,), wtype: str = SCHEDULER_WORKFLOW_TYPE,
        creator: str | None = None) -> RunDescription:
    """A run whose create request id is ``creator`` (default: the first of ``ids``); the
    other ids are attached."""
    return RunDescription(run_id, first or run_id, wtype, status, frozenset(ids),
                          ids[0] if creator is None else creator)


def answer(g: Given, out: StartOutcome) -> Given:
    facts, _ = d.decide_start_outcome(g.state, out, 1, W)
    return g.then(facts)


def pending() -> Given:
    return assigned()


def claimed() -> Given:
    g = pending()
    return g.then(d.claim_facts(g.state, 1, W))


def claimed_unknown() -> Given:
    return answer(claimed(), StartOutcome("unavailable", detail="timeout"))


def receipted() -> Given:
    return answer(claimed(), StartOutcome("created", "A", "A", status="running"))


def completed() -> Given:
    g = receipted()
    return g.then(d.close_facts(g.state, 1, W))


def parked_foreign() -> Given:
    """AlreadyStarted by a foreign run, then the chain head verified foreign."""
    g = answer(claimed(), StartOutcome("already_started", "F", "F", "other", "running"))
    obs = ChainObservation(current_run_id="F", current_status="running", first_run_id="F",
                           head=run("F", ids=("other",)))
    return g.then(d.decide_chain(g.state, obs, 1, W))


def parked_foreign_unknown() -> Given:
    """The answer was lost; reconcile then found a foreign chain."""
    g = claimed_unknown()
    obs = ChainObservation(current_run_id="F", current_status="running", first_run_id="F",
                           head=run("F", ids=("other",)))
    return g.then(d.decide_chain(g.state, obs, 2, W))


def parked_head_missing() -> Given:
    g = claimed_unknown()
    obs = ChainObservation(failure="head_missing", current_run_id="B", first_run_id="A")
    return g.then(d.decide_chain(g.state, obs, 2, W))


def parked_rejected() -> Given:
    return answer(claimed(), StartOutcome("rejected", detail="InvalidStartRequest: bad"))


def rearmed() -> Given:
    g = parked_foreign()
    return g.then(d.decide_foreign_check(g.state, run("F", status="completed"), 2, W))


def reclaimed() -> Given:
    g = rearmed()
    return g.then(d.claim_facts(g.state, 3, W))


def aborted() -> Given:
    g = pending()
    return g.then(d.decide_abort(g.state, "ops", "cancel"))


def names(facts: d.Facts) -> list[str]:
    return [cls.__name__ for cls, _ in facts]


def source(**over) -> ScheduleState:
    return replace(ScheduleState(NS, SID, 1, paused=False, notes="pre"), **over)
