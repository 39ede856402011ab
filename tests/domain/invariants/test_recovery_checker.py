"""The invariant checker accepts every history operator recovery writes, and flags the same
steps when they are forged without the operator's events (I2, I3, I6, I9, I10 of
docs/protocol.md, 'Invariants')."""
from __future__ import annotations

from typing import Any

from schedfence.domain.invariants.checker import Violation, check_history
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.source.schedule import Schedule

from tests.domain.invariants.invariant_histories import numbered
from tests.helpers import NS, SID, World, world  # noqa: F401
from tests.infra.application import test_recovery as tr

M, S = Migration, Schedule
OP = tr.OP


def events(w: World) -> list[Any]:
    return [w.service.app.mapper.to_domain_event(n) for n in w.service.app.notifications()]


def check(evs: list[Any]) -> list[Violation]:
    return check_history(numbered(evs))  # a forged history keeps its versions contiguous


def without(evs: list[Any], cls: type) -> list[Any]:
    kept = [e for e in evs if type(e) is not cls]
    assert len(kept) == len(evs) - 1, f"expected exactly one {cls.__name__}"
    return kept


def position(evs: list[Any], cls: type) -> int:
    return next(i for i, e in enumerate(evs, start=1) if type(e) is cls)


def named(violations: list[Violation]) -> list[tuple[str, tuple[int, ...]]]:
    return [(v.invariant, v.positions) for v in violations]


def test_source_kept_needs_the_operator_attestation(world):
    w = tr.parked_unproven(world)
    w.service.recover("resolve", NS, SID, resolution="source_kept", **OP)
    evs = events(w)
    assert check(evs) == []
    forged = without(evs, M.MigrationResolved)  # the same restore, no attestation
    assert named(check(forged)) == [("I9", (position(forged, M.MigrationAborted),))]


def test_destination_owns_needs_the_operator_receipt(world):
    w = tr.adopted(world)
    run_id = tr.old_release_run(w)
    w.service.recover("resolve", NS, SID, resolution="destination_owns", first_run_id=run_id,
                      **OP)
    evs = events(w)
    assert check(evs) == []
    forged = without(evs, M.MigrationResolved)
    assert named(check(forged)) == [("I2", (position(forged, M.SourceClosed),))]


def test_resolution_of_a_migration_that_is_not_parked_is_flagged(world):
    w = tr.parked_unproven(world)
    w.service.recover("resolve", NS, SID, resolution="source_kept", **OP)
    evs = events(w)
    parked = position(evs, M.MigrationParked)
    forged = [e for i, e in enumerate(evs, start=1) if i != parked]  # still claimed
    flagged = check(forged)
    assert [v.invariant for v in flagged] == ["I9"]
    assert "operator resolution (source_kept) of a claimed migration" in flagged[0].message


def test_confirmed_rearm_of_an_adopted_migration_needs_the_confirmation(world):
    w = tr.adopted(world)
    w.service.recover("rearm", NS, SID, confirm_no_destination_run=True, **OP)
    evs = events(w)
    assert check(evs) == []
    at = position(evs, M.StartClaimRearmed)
    for evidence in ({}, dict(evs[at - 1].evidence, confirm_no_destination_run=False)):
        forged = list(evs)
        forged[at - 1] = evs[at - 1].model_copy(update={"evidence": evidence})
        assert named(check(forged)) == [("I9", (at,))]


def test_restore_of_an_adopted_migration_needs_the_attestation(world):
    w = tr.adopted(world)
    w.service.recover("resolve", NS, SID, resolution="source_kept", **OP)
    evs = events(w)
    assert check(evs) == []
    forged = without(evs, M.MigrationResolved)  # what a plain abort would have written
    assert named(check(forged)) == [("I9", (position(forged, M.MigrationAborted),))]


def test_adoption_needs_the_fence_and_the_migration_together(world):
    w = tr.adopted(world)
    evs = events(w)
    assert check(evs) == []
    flagged = check(without(evs, S.FenceAdopted))
    assert [v.invariant for v in flagged] == ["I10"]
    assert "LegacyMigrationAdopted recorded on one side only" in flagged[0].message


def test_steps_of_an_unadopted_legacy_migration_are_identity_less_actions(world):
    """Without the adoption, the operator's later events act on an identity-less migration."""
    w = tr.adopted(world)
    w.service.recover("rearm", NS, SID, confirm_no_destination_run=True, **OP)
    w.service.run_until_idle()
    evs = events(w)
    assert check(evs) == []
    forged = [e for e in evs if type(e) not in (M.LegacyMigrationAdopted, S.FenceAdopted)]
    invariants = {v.invariant for v in check(forged)}
    assert {"I3", "I6"} <= invariants


def test_worker_rearm_after_an_unproven_start_is_flagged(world):
    w = tr.parked_unproven(world)
    evs = events(w)
    assert check(evs) == []
    parked = evs[position(evs, M.MigrationParked) - 1]
    rearm = M.StartClaimRearmed(originator_id=parked.originator_id,
                                originator_version=parked.originator_version + 1,
                                request_id=parked.request_id, actor="oncall-ann",
                                reason="forged", evidence={})
    assert named(check(evs + [rearm])) == [("I9", (len(evs) + 1,))]
