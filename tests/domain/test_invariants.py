"""The invariant checker catches what it claims (docs/protocol.md, 'Invariants').

Each test takes a real, clean history written by the service, corrupts it the way a buggy
implementation would, and asserts the checker names exactly the broken invariant, the
migration, and the log positions of the offending events. Clean histories give nothing.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable

import pytest

from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.invariants import Violation, check_history
from schedfence.domain.migration import Migration
from schedfence.domain.ports import StartWorkflow
from schedfence.domain.schedule import MIGRATION_NOTE, Schedule
from schedfence.infra.demo.legacy import plant_legacy_v1
from schedfence.infra.service import MigrationService, open_service
from schedfence.infra.destination.simulator import SimulatedDestination

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


# -- clean histories -------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_clean_scenarios_have_no_violation(name):
    events, _ = SCENARIOS[name]()
    assert check_history(numbered(events)) == []


def test_all_scenarios_in_one_log_have_no_violation():
    log: list[Any] = []
    for name in sorted(SCENARIOS):
        log += SCENARIOS[name]()[0]
    assert check_history(numbered(log)) == []


# -- corruptions -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["created", "chain_head", "rearm"])
def test_i2_close_without_receipt(name):
    events, mid = SCENARIOS[name]()
    del events[index_of(events, M.OwnershipAccepted)]
    closed = index_of(events, M.SourceClosed)
    v = only(check_history(numbered(events)), "I2")
    assert (v.migration_id, v.positions) == (mid, (pos(closed),))


def test_i2_receipt_from_a_start_answer_that_is_not_ours():
    """AlreadyStarted with another start request id does not prove ownership."""
    events, mid = scenario_created()
    i = index_of(events, M.DestinationAnswered)
    events[i] = events[i].model_copy(update={"kind": "already_started",
                                             "start_request_id": "someone-else"})
    v = only(check_history(numbered(events)), "I2")
    assert (v.migration_id, v.positions) == (mid, (pos(i), pos(index_of(
        events, M.OwnershipAccepted))))


def test_i3_start_with_another_request_id():
    events, mid = scenario_created()
    i = index_of(events, M.DestinationStartIssued)
    events[i] = events[i].model_copy(update={"request_id": "random-per-attempt"})
    v = only(check_history(numbered(events)), "I3")
    created = index_of(events, M.RequestIdAssigned)
    assert (v.migration_id, v.positions) == (mid, (pos(created), pos(i)))


def test_i4_second_claim_and_start_without_rearm():
    events, mid = scenario_parked_lost()
    claim, start = index_of(events, M.StartClaimConsumed), index_of(events,
                                                                   M.DestinationStartIssued)
    parked = index_of(events, M.MigrationParked)
    version = events[parked].originator_version
    again = [events[claim].model_copy(update={"originator_version": version + 1}),
             events[start].model_copy(update={"originator_version": version + 2})]
    events[parked + 1:parked + 1] = again
    v = only(check_history(numbered(events)), "I4")
    assert (v.migration_id, v.positions) == (mid, (pos(parked + 1),))


def test_i4_start_issued_without_claim_directly_before():
    events, mid = scenario_parked_lost()
    start = index_of(events, M.DestinationStartIssued)
    parked = index_of(events, M.MigrationParked)
    events.insert(parked + 1, events[start])
    v = only(check_history(numbered(events)), "I4")
    assert (v.migration_id, v.positions) == (mid, (pos(parked), pos(parked + 1)))


def test_i4_rearm_dropped_makes_second_claim_illegal():
    events, mid = scenario_rearm()
    del events[index_of(events, M.StartClaimRearmed)]
    second_claim = index_of(events, M.StartClaimConsumed, nth=1)
    v = only(check_history(numbered(events)), "I4")
    assert (v.migration_id, v.positions) == (mid, (pos(second_claim),))


def test_i4_second_created_answer():
    events, mid = scenario_rearm()
    first = index_of(events, M.DestinationAnswered)
    second = index_of(events, M.DestinationAnswered, nth=1)
    assert events[second].kind == "created"
    # The first start (refused by the foreign run) claims to have created a chain as well.
    events[first] = events[first].model_copy(update={
        "kind": "created", "start_request_id": "", "proves_no_commit": False})
    violations = check_history(numbered(events))
    i4 = [v for v in violations if v.invariant == "I4"]
    assert [(v.migration_id, v.positions) for v in i4] == [(mid, (pos(first), pos(second)))]
    # Without the no-commit proof the re-arm itself is illegal too (I9); once our chain was
    # seen, the re-arm, claim, start and second creation all resurrect it (I5).
    assert sorted(set(v.invariant for v in violations)) == ["I4", "I5", "I9"]


def test_i6_identity_less_migration_issues_a_start():
    events, mid = scenario_legacy()
    created = index_of(events, M.RequestIdAssigned)
    base = events[created]
    ctx = dict(originator_id=base.originator_id, timestamp=base.timestamp, request_id=None,
               attempt=1, worker="old-binary")
    start = M.DestinationStartIssued(
        originator_version=2, workflow_id=base.workflow_id, workflow_type="t",
        id_reuse_policy="allow_duplicate", id_conflict_policy="fail",
        input={"paused": base.pre_paused, "notes": base.pre_notes}, **ctx)
    events.insert(created + 1, start)
    violations = check_history(numbered(events))
    i6 = [v for v in violations if v.invariant == "I6"]
    assert [(v.migration_id, v.positions) for v in i6] == [(mid, (pos(created),
                                                                  pos(created + 1)))]
    # A start with no claim before it also breaks the strong form of I4.
    assert sorted(v.invariant for v in violations) == ["I4", "I6"]


def test_i6_identity_less_migration_closes_the_source():
    events, mid = scenario_legacy()
    created = index_of(events, M.RequestIdAssigned)
    base = events[created]
    close = M.SourceClosed(originator_id=base.originator_id, originator_version=2,
                           timestamp=base.timestamp, request_id=None,
                           destination_first_run_id="guess")
    events.append(close)
    violations = check_history(numbered(events))
    i6 = [v for v in violations if v.invariant == "I6"]
    assert [(v.migration_id, v.positions) for v in i6] == [(mid, (pos(created), len(events)))]
    # No receipt (I2), and the source never closed with it (I10).
    assert sorted(v.invariant for v in violations) == ["I10", "I2", "I6"]


def test_i8_event_after_source_closed():
    events, mid = scenario_created()
    closed = index_of(events, M.SourceClosed)
    receipt = index_of(events, M.OwnershipAccepted)
    late = M.ChainVerified(originator_id=events[closed].originator_id,
                           originator_version=events[closed].originator_version + 1,
                           timestamp=events[closed].timestamp,
                           request_id=events[closed].request_id, verdict="foreign")
    events.append(late)
    violations = check_history(numbered(events))
    assert {v.invariant for v in violations} == {"I8"}
    assert {(v.migration_id, v.positions) for v in violations} == {
        (mid, (len(events),)), (mid, (pos(receipt), len(events)))}


def test_i8_receipt_rewritten():
    events, mid = scenario_chain_head()
    receipt = index_of(events, M.OwnershipAccepted)
    second = events[receipt].model_copy(update={
        "originator_version": events[receipt].originator_version + 1,
        "destination_first_run_id": "another-chain"})
    events.insert(receipt + 1, second)
    violations = check_history(numbered(events))
    i8 = [v for v in violations if v.invariant == "I8"]
    assert [(v.migration_id, v.positions) for v in i8] == [(mid, (pos(receipt),
                                                                  pos(receipt + 1)))]


def _abort_after(events: list[Any], i: int) -> tuple[list[Any], int]:
    """Append an abort (migration and source, one append) after event ``i``."""
    m = events[i]
    created = next(e for e in events if isinstance(e, M.RequestIdAssigned)
                   and e.originator_id == m.originator_id)
    fence = next(e for e in events if isinstance(e, S.FencedForMigration)
                 and e.migration_id == str(m.originator_id))
    source_version = max(e.originator_version for e in events
                         if e.originator_id == fence.originator_id)
    release = S.FenceReleased(originator_id=fence.originator_id,
                              originator_version=source_version + 1, timestamp=m.timestamp,
                              request_id=m.request_id, migration_id=str(m.originator_id),
                              restored_paused=created.pre_paused,
                              restored_notes=created.pre_notes)
    abort = M.MigrationAborted(originator_id=m.originator_id,
                               originator_version=m.originator_version + 1,
                               timestamp=m.timestamp, request_id=m.request_id, actor="ops",
                               reason="restore", restored_paused=created.pre_paused,
                               restored_notes=created.pre_notes)
    events[i + 1:i + 1] = [release, abort]  # the service's order: source, then migration
    return events, i + 2


def test_i9_abort_after_unproven_start():
    events, mid = scenario_parked_lost()
    events, abort_at = _abort_after(events, index_of(events, M.MigrationParked))
    v = only(check_history(numbered(events)), "I9")
    assert (v.migration_id, v.positions) == (mid, (pos(abort_at),))


def test_i9_abort_after_receipt():
    events, mid = scenario_chain_head()
    closed = index_of(events, S.ClosedByMigration)
    events = events[:closed]  # the receipt is recorded; the close has not happened yet
    events, abort_at = _abort_after(events, index_of(events, M.OwnershipAccepted))
    violations = check_history(numbered(events))
    i9 = [v for v in violations if v.invariant == "I9"]
    assert [(v.migration_id, v.positions) for v in i9] == [(mid, (pos(abort_at),))]
    # After the receipt only SourceClosed may follow (I8); restoring after our chain was
    # seen is a resurrection too (I5); nothing else is broken.
    assert sorted(v.invariant for v in violations) == ["I5", "I8", "I9"]


def test_i9_abort_after_proven_no_commit_is_clean():
    """The foreign scenario's real abort is the legal case the corruption above mirrors."""
    events, _ = scenario_foreign_abort()
    assert any(isinstance(e, M.MigrationAborted) for e in events)
    assert check_history(numbered(events)) == []


def test_i10_close_by_a_request_id_that_does_not_hold_the_fence():
    events, mid = scenario_created()
    i = index_of(events, S.ClosedByMigration)
    events[i] = events[i].model_copy(update={"request_id": "stale-task-request-id"})
    v = only(check_history(numbered(events)), "I10")
    assert (v.migration_id, v.positions) == (mid, (pos(i),))


def test_i10_close_by_a_migration_that_does_not_hold_the_fence():
    events, mid = scenario_created()
    i = index_of(events, S.ClosedByMigration)
    other = str(uuid.uuid4())
    events[i] = events[i].model_copy(update={"migration_id": other})
    violations = check_history(numbered(events))
    assert {v.invariant for v in violations} == {"I10"}
    closed = index_of(events, M.SourceClosed)
    # The impostor's close is flagged, and the real migration's close has no source side.
    assert sorted((v.migration_id, v.positions) for v in violations) == sorted(
        [(other, (pos(i),)), (mid, (pos(closed),))])


def test_i10_migration_closed_but_source_never_closed():
    events, mid = scenario_chain_head()
    del events[index_of(events, S.ClosedByMigration)]
    closed = index_of(events, M.SourceClosed)
    v = only(check_history(numbered(events)), "I10")
    assert (v.migration_id, v.positions) == (mid, (pos(closed),))


@pytest.mark.parametrize("mutation", [
    lambda sid, v, t: S.Paused(originator_id=sid, originator_version=v, timestamp=t,
                               paused=False),
    lambda sid, v, t: S.NotesUpdated(originator_id=sid, originator_version=v, timestamp=t,
                                     notes="edited while fenced"),
    lambda sid, v, t: S.Deleted(originator_id=sid, originator_version=v, timestamp=t),
], ids=["pause", "notes", "delete"])
def test_i1_source_mutated_while_fenced(mutation):
    events, mid = scenario_parked_lost()
    fence = index_of(events, S.FencedForMigration)
    f = events[fence]
    events.append(mutation(f.originator_id, f.originator_version + 1, f.timestamp))
    v = only(check_history(numbered(events)), "I1")
    assert (v.migration_id, v.positions) == (mid, (pos(fence), len(events)))


def test_i1_mutation_after_close_is_not_a_fence_violation():
    """The same mutation after the fence was released is ordinary (control for I1)."""
    events, _ = scenario_foreign_abort()
    released = index_of(events, S.FenceReleased)
    r = events[released]
    events.append(S.Paused(originator_id=r.originator_id,
                           originator_version=r.originator_version + 1, timestamp=r.timestamp,
                           paused=True))
    assert check_history(numbered(events)) == []


def test_i7_second_fence_while_one_is_open():
    events, _ = scenario_parked_lost()
    fence = index_of(events, S.FencedForMigration)
    f = events[fence]
    intruder = str(uuid.uuid4())
    events.append(f.model_copy(update={"originator_version": f.originator_version + 1,
                                       "request_id": "second-rollback",
                                       "migration_id": intruder}))
    violations = check_history(numbered(events))
    # The intruder is also a migration the log does not hold (I0), and nothing else.
    assert sorted(v.invariant for v in violations) == ["I0", "I7"]
    v = next(v for v in violations if v.invariant == "I7")
    assert (v.migration_id, v.positions) == (intruder, (pos(fence), len(events)))


def test_i11_start_input_carries_the_migration_pause():
    events, mid = scenario_created()
    i = index_of(events, M.DestinationStartIssued)
    start = events[i]
    assert (start.input["paused"], start.input["notes"]) == (False, PRE_NOTES)
    events[i] = start.model_copy(update={"input": dict(start.input, paused=True,
                                                       notes=MIGRATION_NOTE)})
    v = only(check_history(numbered(events)), "I11")
    created = index_of(events, M.RequestIdAssigned)
    assert (v.migration_id, v.positions) == (mid, (pos(created), pos(i)))


def test_i11_restore_with_the_migration_pause():
    events, mid = scenario_foreign_abort()
    i = index_of(events, M.MigrationAborted)
    events[i] = events[i].model_copy(update={"restored_paused": True,
                                             "restored_notes": MIGRATION_NOTE})
    v = only(check_history(numbered(events)), "I11")
    created = index_of(events, M.RequestIdAssigned)
    assert (v.migration_id, v.positions) == (mid, (pos(created), pos(i)))


# I13 (CaN-safe ownership): a chain-head receipt needs an owned ChainVerified that names the
# same head and records our request id as the head's *create* id (an attached id, or a v1
# record that kept no create id, proves nothing).
@pytest.mark.parametrize("corrupt", [
    "drop_chain_verified", "verdict_foreign", "head_without_our_id", "other_head",
    "our_id_only_attached", "v1_record_without_create_id",
])
def test_i13_chain_head_ownership_without_owned_verification(corrupt):
    events, mid = scenario_chain_head()
    chain, receipt = index_of(events, M.ChainVerified), index_of(events, M.OwnershipAccepted)
    c = events[chain]
    proof: tuple[int, ...] = (pos(chain), pos(receipt))
    if corrupt == "drop_chain_verified":
        del events[chain]
        receipt -= 1
        proof = (pos(receipt),)
    elif corrupt == "verdict_foreign":
        events[chain] = c.model_copy(update={"verdict": "foreign"})
    elif corrupt == "head_without_our_id":
        # What a current-run check after continue-as-new would see: a random request id.
        events[chain] = c.model_copy(update={"head_request_ids": [str(uuid.uuid4())],
                                             "head_create_request_id": str(uuid.uuid4())})
    elif corrupt == "our_id_only_attached":
        foreign = str(uuid.uuid4())
        events[chain] = c.model_copy(update={
            "head_request_ids": sorted([foreign, *c.head_request_ids]),
            "head_create_request_id": foreign})
    elif corrupt == "v1_record_without_create_id":
        events[chain] = c.model_copy(update={"head_create_request_id": ""})
    else:
        events[chain] = c.model_copy(update={"first_run_id": c.current_run_id})
    v = only(check_history(numbered(events)), "I13")
    assert (v.migration_id, v.positions) == (mid, proof)


def test_violations_are_reported_per_migration():
    """Two corrupted migrations in one log are named separately, each with its positions."""
    a, mid_a = scenario_created()
    b, mid_b = scenario_chain_head()
    ia = index_of(a, M.DestinationStartIssued)
    a[ia] = a[ia].model_copy(update={"request_id": "random"})
    del b[index_of(b, M.OwnershipAccepted)]
    log = a + b
    closed_b = len(a) + index_of(b, M.SourceClosed)
    got = sorted((v.invariant, v.migration_id, v.positions) for v in check_history(
        numbered(log)))
    assert got == sorted([("I3", mid_a, (pos(index_of(a, M.RequestIdAssigned)), pos(ia))),
                          ("I2", mid_b, (pos(closed_b),))])
