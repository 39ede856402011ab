"""Operator recovery through the service: each command's allowed and refused cases.

Allowed paths leave a history the invariant checker accepts; refusals write nothing. The
checker tests live in tests/domain/invariants/test_recovery_checker.py, the CLI in
tests/infra/cli/test_recovery_cli.py.
"""
from __future__ import annotations

import pytest

from schedfence.domain.errors import AlreadyExists, InvalidArgument, RecoveryRefused, Unavailable
from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE, derive_request_id
from schedfence.domain.ports import StartWorkflow

from tests.helpers import (NS, SID, WID, Crash, World, nothing_written, plant_legacy, refused,
                           start_foreign, world)  # noqa: F401

OP = dict(actor="oncall-ann", reason="ticket-42")


# -- states to recover from ------------------------------------------------------------------
def pending(w: World) -> World:
    w.service.create_schedule(NS, SID, paused=False, notes="pre")
    w.service.rollback(NS, SID, "R1")
    return w


def parked_foreign(w: World) -> World:
    """AlreadyStarted by somebody else's running workflow: proves our start committed nothing."""
    start_foreign(w.dest)
    pending(w).service.run_until_idle()
    assert w.service.migration(NS, SID).park_reason == "foreign_destination"
    return w


def claimed_unproven(w: World) -> World:
    """The start's response was lost: it may have committed."""
    w.dest.inject("start", "lose_response")
    pending(w).service.run_until_idle()
    assert w.service.migration(NS, SID).state == "claimed"
    return w


def parked_unproven(w: World) -> World:
    """Lost response, then our run was deleted: head missing, commit not disproven."""
    claimed_unproven(w)
    w.dest.delete(NS, WID)
    w.service.run_until_idle()
    assert w.service.migration(NS, SID).park_reason == "head_missing"
    return w


def receipted(w: World) -> World:
    w.hooks.crash_once("close.before_append")
    with pytest.raises(Crash):
        pending(w).service.run_until_idle()
    assert w.service.migration(NS, SID).state == "receipted"
    return w


def completed(w: World) -> World:
    pending(w).service.run_until_idle()
    return w


def legacy(w: World) -> World:
    w.service.create_schedule(NS, SID, paused=False, notes="pre")
    plant_legacy(w.service)
    return w


def adopted(w: World) -> World:
    legacy(w).service.recover("adopt", NS, SID, **OP)
    return w


def old_release_run(w: World) -> str:
    """A scheduler run an older release started with an id nobody recorded."""
    return w.dest.start_workflow(StartWorkflow(NS, WID, "old-random-id",
                                               SCHEDULER_WORKFLOW_TYPE)).run_id


def types(w: World) -> list[str]:
    return w.migration_events()


# -- rearm -----------------------------------------------------------------------------------
def test_rearm_after_a_foreign_already_started(world):
    w = parked_foreign(world)
    view = w.service.recover("rearm", NS, SID, **OP)
    assert (view.state, view.claim_armed, view.park_reason) == ("pending", True, None)
    rearm = w.migration_entries()[-1]
    assert rearm.type.endswith("StartClaimRearmed")
    assert (rearm.data["actor"], rearm.data["reason"]) == ("oncall-ann", "ticket-42")
    assert rearm.data["evidence"]["basis"] == "no_commit_proven"
    w.dest.terminate(NS, WID)  # the foreign run ends; the re-armed claim starts ours
    w.service.run_until_idle()
    assert w.service.migration(NS, SID).state == "completed" and w.created(request_id="R1") == 1
    assert w.service.verify() == []


@pytest.mark.parametrize("state, message", [
    (claimed_unproven, "does not prove that nothing committed"),
    (parked_unproven, "does not prove that nothing committed"),
    (receipted, "ownership was already accepted"),
    (pending, "nothing to re-arm"),
    (completed, "no open migration"),
    (legacy, "adopt it first"),
    (adopted, "--confirm-no-destination-run"),
])
def test_rearm_refused(world, state, message):
    w = state(world)
    with nothing_written(w.service), pytest.raises(RecoveryRefused) as info:
        w.service.recover("rearm", NS, SID, **OP)
    assert message in info.value.message and info.value.code == "failed_precondition"


# -- abort -----------------------------------------------------------------------------------
def test_abort_restores_the_source_when_no_start_committed(world):
    w = parked_foreign(world)
    assert w.service.recover("abort", NS, SID, **OP).state == "aborted"
    source = w.service.schedule(NS, SID)
    assert (source.paused, source.notes, source.migration_pending) == (False, "pre", False)
    assert w.service.verify() == []


@pytest.mark.parametrize("state", [claimed_unproven, parked_unproven, receipted, legacy,
                                   adopted])
def test_abort_refused(world, state):
    w = state(world)
    with refused(w.service, RecoveryRefused):
        w.service.recover("abort", NS, SID, **OP)


# -- adopt -----------------------------------------------------------------------------------
def test_adopt_gives_a_durable_id_and_parks_without_acting(world):
    w = adopted(world)
    rid = derive_request_id(NS, SID, 1)
    view = w.service.migration(NS, SID)
    assert (view.state, view.park_reason, view.request_id, view.request_id_origin,
            view.claim_armed) == ("parked", "adopted_unverified", rid, "adopted", False)
    assert w.schedule_state().fence_request_id == rid  # saved with the adoption, atomically
    assert types(w)[-1] == "LegacyMigrationAdopted"
    with nothing_written(w.service):
        w.service.run_until_idle()
    assert w.hooks.seen("start.") == [] and w.dest.start_log() == []
    # A caller-less rollback of this incarnation now finds it; another id is refused.
    assert w.service.rollback(NS, SID).outcome == "already_pending"
    with refused(w.service, AlreadyExists):
        w.service.rollback(NS, SID, "other")
    assert w.service.verify() == []


def test_adopt_with_an_explicit_request_id(world):
    w = legacy(world)
    assert w.service.recover("adopt", NS, SID, request_id="NEW-1", **OP).request_id == "NEW-1"
    assert w.schedule_state().fence_request_id == "NEW-1"


@pytest.mark.parametrize("state", [parked_foreign, adopted, pending])
def test_adopt_refused_unless_identity_less(world, state):
    w = state(world)
    with refused(w.service, RecoveryRefused):
        w.service.recover("adopt", NS, SID, **OP)


def test_adopt_refused_for_an_id_already_used_on_the_key(world):
    w = completed(world)  # incarnation 1 used R1
    w.dest.terminate(NS, WID)  # its chain ended: the key may start a new incarnation
    w.service.create_schedule(NS, SID)
    plant_legacy(w.service)
    with refused(w.service, RecoveryRefused):
        w.service.recover("adopt", NS, SID, request_id="R1", **OP)


def test_a_crash_before_the_adoption_append_leaves_nothing(world):
    w = legacy(world)
    w.hooks.crash_once("adopt.before_append")
    with nothing_written(w.service), pytest.raises(Crash):
        w.service.recover("adopt", NS, SID, **OP)
    assert w.service.recover("adopt", NS, SID, **OP).state == "parked"
    assert w.service.verify() == []


# -- rearm of an adopted migration: confirmed and checked live ---------------------------------
@pytest.mark.parametrize("destination, observed", [
    ("empty", "no_current_run"), ("closed_user_workflow", "closed_foreign_run")])
def test_confirmed_rearm_of_an_adopted_migration(world, destination, observed):
    w = adopted(world)
    if destination == "closed_user_workflow":
        start_foreign(w.dest)
        w.dest.terminate(NS, WID)
    view = w.service.recover("rearm", NS, SID, confirm_no_destination_run=True, **OP)
    assert (view.state, view.claim_armed) == ("pending", True)
    evidence = w.migration_entries()[-1].data["evidence"]
    assert (evidence["basis"], evidence["observed"], evidence["confirm_no_destination_run"]) \
        == ("operator_confirmed_no_destination_run", observed, True)
    w.service.run_until_idle()
    assert w.service.migration(NS, SID).state == "completed"
    assert w.created(request_id=view.request_id) == 1
    assert w.service.verify() == []


@pytest.mark.parametrize("destination", ["running_user_workflow", "closed_old_release_run",
                                         "running_old_release_run"])
def test_confirmed_rearm_refused_when_the_destination_shows_a_run(world, destination):
    w = adopted(world)
    if destination == "running_user_workflow":
        start_foreign(w.dest)
    else:
        old_release_run(w)
        if destination == "closed_old_release_run":
            w.dest.complete(NS, WID)
    with refused(w.service, RecoveryRefused):
        w.service.recover("rearm", NS, SID, confirm_no_destination_run=True, **OP)


def test_confirmed_rearm_refused_while_the_destination_is_unreachable(world):
    w = adopted(world)
    w.dest.inject("describe", "unavailable")
    with refused(w.service, Unavailable):
        w.service.recover("rearm", NS, SID, confirm_no_destination_run=True, **OP)


# -- resolve ---------------------------------------------------------------------------------
def test_resolve_destination_owns_closes_the_source_on_the_named_chain(world):
    w = adopted(world)
    run_id = old_release_run(w)
    view = w.service.recover("resolve", NS, SID, resolution="destination_owns",
                             first_run_id=run_id, **OP)
    assert (view.state, view.destination_first_run_id) == ("completed", run_id)
    assert types(w)[-2:] == ["MigrationResolved", "SourceClosed"]
    assert w.service.schedule(NS, SID).close_reason == "migrated"
    assert w.service.verify() == []


@pytest.mark.parametrize("named", ["missing", "user_workflow", "not_the_head"])
def test_resolve_destination_owns_refused_for_a_wrong_run(world, named):
    w = adopted(world)
    if named == "user_workflow":
        run_id = start_foreign(w.dest).run_id
    else:
        run_id = old_release_run(w)
        if named == "not_the_head":
            run_id = w.dest.continue_as_new(NS, WID)
        else:
            run_id = "no-such-run"
    with refused(w.service, RecoveryRefused):
        w.service.recover("resolve", NS, SID, resolution="destination_owns",
                          first_run_id=run_id, **OP)


def test_resolve_source_kept_restores_without_no_commit_proof(world):
    w = parked_unproven(world)
    view = w.service.recover("resolve", NS, SID, resolution="source_kept", **OP)
    assert view.state == "aborted"
    assert types(w)[-2:] == ["MigrationResolved", "MigrationAborted"]
    resolved = w.migration_entries()[-2].data
    assert resolved["resolution"] == "source_kept" and "operator verified" in \
        resolved["attestation"] and resolved["observation"] == {"current": None}
    source = w.service.schedule(NS, SID)
    assert (source.paused, source.notes, source.migration_pending) == (False, "pre", False)
    assert w.service.verify() == []


def test_resolve_source_kept_refused_while_a_scheduler_run_runs(world):
    """Our run continued-as-new and its head was deleted: parked, but the chain still runs."""
    w = claimed_unproven(world)
    first = w.runs()[0].run_id
    w.dest.continue_as_new(NS, WID)
    w.dest.delete(NS, WID, first)
    w.service.run_until_idle()
    assert w.service.migration(NS, SID).park_reason == "head_missing"
    with refused(w.service, RecoveryRefused):
        w.service.recover("resolve", NS, SID, resolution="source_kept", **OP)
    w.dest.terminate(NS, WID)  # the operator stops it: now the source may be kept
    assert w.service.recover("resolve", NS, SID, resolution="source_kept", **OP).state == \
        "aborted"
    assert w.service.verify() == []


def test_resolve_source_kept_of_an_adopted_migration(world):
    w = adopted(world)
    old_release_run(w)
    with refused(w.service, RecoveryRefused):
        w.service.recover("resolve", NS, SID, resolution="source_kept", **OP)
    w.dest.terminate(NS, WID)
    assert w.service.recover("resolve", NS, SID, resolution="source_kept", **OP).state == \
        "aborted"
    assert w.service.verify() == []


@pytest.mark.parametrize("state", [pending, claimed_unproven, receipted, legacy, completed])
def test_resolve_refused_unless_parked(world, state):
    w = state(world)
    with refused(w.service, RecoveryRefused):
        w.service.recover("resolve", NS, SID, resolution="source_kept", **OP)


# -- input and concurrency -------------------------------------------------------------------
@pytest.mark.parametrize("kind, kwargs", [
    ("rearm", dict(actor="", reason="r")),
    ("rearm", dict(actor="a", reason="two\nlines")),
    ("abort", dict(actor=" a", reason="r")),
    ("explode", dict(actor="a", reason="r")),
    ("resolve", dict(actor="a", reason="r", resolution="maybe")),
    ("resolve", dict(actor="a", reason="r", resolution="destination_owns")),
    ("resolve", dict(actor="a", reason="r", resolution="source_kept", first_run_id="x")),
    ("adopt", dict(actor="a", reason="r", request_id="")),
])
def test_invalid_input_is_refused_before_anything(world, kind, kwargs):
    w = parked_foreign(world)
    with refused(w.service, InvalidArgument):
        w.service.recover(kind, NS, SID, **kwargs)


def test_a_concurrent_abort_makes_the_rearm_decide_again(world):
    w = parked_foreign(world)
    w.hooks.once("rearm.before_append",
                 lambda: w.service.recover("abort", NS, SID, actor="bob", reason="other"))
    with pytest.raises(RecoveryRefused, match="no open migration"):
        w.service.recover("rearm", NS, SID, **OP)
    assert types(w).count("MigrationAborted") == 1 and "StartClaimRearmed" not in types(w)
    assert w.service.verify() == []
