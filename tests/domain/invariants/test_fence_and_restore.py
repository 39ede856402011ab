"""The invariant checker, continued (see test_invariants.py): a restore only with proof
(I9), the fence held by whoever closes (I10), the source frozen while fenced (I1), one
fence at a time (I7), the migration's pause carried (I11), the chain head's ownership
(I13), and violations named per migration."""
from __future__ import annotations

import uuid
from typing import Any

import pytest

from schedfence.domain.invariants.checker import check_history
from schedfence.domain.source.schedule import MIGRATION_NOTE

from tests.domain.invariants.invariant_histories import (M, PRE_NOTES, S, index_of, numbered, only, pos,
                                              scenario_chain_head, scenario_created,
                                              scenario_foreign_abort, scenario_parked_lost)


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
