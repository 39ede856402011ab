"""Three safety holes, closed, end to end against a real Temporal dev server.

1. The chain-head proof uses the head's *create* request id, never one attached to it later
   (USE_EXISTING + ``on_conflict_options.attach_request_id``): a foreign run that merely carries
   our request id is parked as ``foreign_destination``, with or without a continue-as-new.
2. A handed-over schedule cannot be created again at the source while its scheduler chain runs
   at the destination; once that chain has ended it can, and the new incarnation records what
   the destination showed.
3. A lagging standby, once promoted, never starts a second chain: a pre-failover migration
   accepts only the chain head's create id as proof, else parks ``failover_unverified``.

Every fact about the server is read from the server (describe, list), never from our records.
"""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from schedfence.domain.errors import AlreadyExists, StandbyNotPromoted
from schedfence.domain.ids import (SCHEDULER_WORKFLOW_TYPE, WORKFLOW_ID_PREFIX,
                                   destination_workflow_id)
from schedfence.domain.ports import DestinationNotFound
from schedfence.infra.application.service import MigrationService, open_service
from tests.contract.temporal_env import (NS, TemporalEnv, listing_query, temporal_env,  # noqa: F401
                                         wait_for)
from tests.contract.worlds import INPUT, ServerWorld
from tests.replica_helpers import CopyAt

CHAIN_VERIFIED = "schedfence.migration.ChainVerified"
ANSWERED = "schedfence.migration.DestinationAnswered"
ACCEPTED = "schedfence.migration.OwnershipAccepted"
CREATED = "schedfence.schedule.Created"
STARTS = ("schedfence.migration.StartClaimConsumed", "schedfence.migration.DestinationStartIssued")


@pytest.fixture
def sid() -> str:
    return f"safety-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def service(temporal_env: TemporalEnv, tmp_path: Path) -> MigrationService:
    svc = open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                       worker_id="e2e-safety")
    yield svc
    svc.close()


def events(svc: MigrationService, sid: str, topic: str) -> list[dict]:
    return [e.data for e in svc.history(NS, sid) if e.type == topic]


def start_workers(svc: MigrationService, sid: str) -> list[str]:
    """Who consumed a claim or issued a start, per the store's log."""
    return [e.data["worker"] for e in svc.history(NS, sid) if e.type in STARTS]


def foreign_run_with_our_id_attached(env: TemporalEnv, wid: str, foreign_rid: str,
                                     our_rid: str) -> str:
    """A foreign Temporal Schedule created with ``foreign_rid``, then ``our_rid`` attached to
    its scheduler workflow's run; the run id. Both requests go to the server raw, so the
    request ids are exactly these."""
    created = env.ops.create_schedule(wid.removeprefix(WORKFLOW_ID_PREFIX),
                                      request_id=foreign_rid)
    attached = env.ops.start_attaching(wid, our_rid, SCHEDULER_WORKFLOW_TYPE, INPUT)
    assert (attached.run_id, attached.started) == (created, False)
    run = env.destination.describe(NS, wid, created)
    # The server's own account: F created the run, R1 is only attached to it.
    assert run.create_request_id == foreign_rid
    assert run.attached_request_ids == {our_rid}
    return created


def assert_parked_foreign(env: TemporalEnv, svc: MigrationService, sid: str, foreign: str,
                          foreign_rid: str, our_rid: str) -> None:
    mig = svc.migration(NS, sid)
    assert (mig.state, mig.park_reason, mig.destination_first_run_id) == (
        "parked", "foreign_destination", None), mig
    assert mig.starts_issued == 1
    assert events(svc, sid, ACCEPTED) == []
    source = svc.schedule(NS, sid)
    assert not source.closed and source.migration_pending
    assert svc.verify() == []
    verified = events(svc, sid, CHAIN_VERIFIED)
    assert len(verified) == 1, verified
    (chain,) = verified
    assert (chain["verdict"], chain["first_run_id"]) == ("foreign", foreign)
    assert chain["head_create_request_id"] == foreign_rid != our_rid
    assert set(chain["head_request_ids"]) == {foreign_rid, our_rid}
    # The server still holds exactly the foreign chain: we started nothing.
    chains = env.ops.chains(destination_workflow_id(sid), 1)
    assert list(chains) == [foreign]


def test_an_attached_id_on_a_continued_foreign_chain_is_not_proof(temporal_env, service, sid):
    wid, f_rid, r1 = destination_workflow_id(sid), f"F-{uuid.uuid4()}", f"R1-{uuid.uuid4()}"
    service.create_schedule(NS, sid, notes="mine")
    foreign = foreign_run_with_our_id_attached(temporal_env, wid, f_rid, r1)
    continued = ServerWorld(temporal_env).continue_as_new(wid)
    assert continued != foreign
    current = temporal_env.destination.describe(NS, wid)
    assert (current.run_id, current.first_execution_run_id, current.status) == (
        continued, foreign, "running")

    assert service.rollback(NS, sid, r1).outcome == "accepted"
    service.run_until_idle()

    (answer,) = events(service, sid, ANSWERED)
    # Whatever the server answers the start with (a dedupe through the chain, or the running
    # run's random create id), the worker must go to the chain head and find F there.
    assert answer["kind"] in ("already_started", "deduplicated"), answer
    assert answer["first_execution_run_id"] in ("", foreign), answer
    assert_parked_foreign(temporal_env, service, sid, foreign, f_rid, r1)
    assert temporal_env.destination.describe(NS, wid).run_id == continued


def test_a_start_deduplicated_on_an_attached_id_is_verified_not_accepted(temporal_env,
                                                                        service, sid):
    wid, f_rid, r1 = destination_workflow_id(sid), f"F-{uuid.uuid4()}", f"R1-{uuid.uuid4()}"
    service.create_schedule(NS, sid)
    foreign = foreign_run_with_our_id_attached(temporal_env, wid, f_rid, r1)

    assert service.rollback(NS, sid, r1).outcome == "accepted"
    service.run_until_idle()

    (answer,) = events(service, sid, ANSWERED)
    # The server dedupes our start on the attached id and says it did not start the run.
    assert (answer["kind"], answer["run_id"], answer["proves_no_commit"]) == (
        "deduplicated", foreign, False), answer
    assert_parked_foreign(temporal_env, service, sid, foreign, f_rid, r1)
    assert temporal_env.destination.describe(NS, wid).status == "running"


def test_a_handed_over_schedule_is_not_created_again_while_its_chain_runs(temporal_env,
                                                                         service, sid):
    wid = destination_workflow_id(sid)
    service.create_schedule(NS, sid, notes="first")
    assert service.rollback(NS, sid).outcome == "accepted"
    wait_for(lambda: (service.run_until_idle(), service.migration(NS, sid).state)[1],
             lambda state: state == "completed", 30, "a completed rollback")
    assert service.schedule(NS, sid).closed
    ours = service.migration(NS, sid).destination_first_run_id
    # The server's own scheduler workflow runs the schedule we created.
    running = temporal_env.destination.describe(NS, wid)
    assert (running.run_id, running.status, running.workflow_type) == (
        ours, "running", SCHEDULER_WORKFLOW_TYPE)

    before = service.event_count()
    with pytest.raises(AlreadyExists) as refused:
        service.create_schedule(NS, sid, notes="second")
    assert running.run_id in str(refused.value)
    assert service.event_count() == before
    assert service.schedule(NS, sid).incarnation == 1 and service.verify() == []

    temporal_env.ops.terminate(wid)
    wait_for(lambda: temporal_env.destination.describe(NS, wid).status,
             lambda s: s == "terminated", 10, "the chain terminated")
    again = service.create_schedule(NS, sid, notes="second")
    assert (again.incarnation, again.closed, again.notes) == (2, False, "second")
    created = [e for e in events(service, sid, CREATED) if e["incarnation"] == 2]
    assert len(created) == 1, created
    check = created[0]["destination_check"]
    assert check["workflow_id"] == wid
    assert (check["current"]["run_id"], check["current"]["status"]) == (ours, "terminated")
    assert service.verify() == []


# -- a lagging standby, promoted: it never starts a second chain -----------------------------
def completed_on_the_active(env: TemporalEnv, tmp_path: Path, sid: str, rid: str,
                            lag_point: str) -> tuple[str, str, str]:
    """The active rolls ``sid`` back with ``rid`` and completes; the standby's copy stopped at
    ``lag_point``. Returns (active url, standby url, the chain's first run id)."""
    active_url = f"sqlite:///{tmp_path / 'active.db'}"
    standby_url = f"sqlite:///{tmp_path / 'standby.db'}"
    copy = CopyAt(lag_point, active_url, standby_url)
    with open_service(active_url, env.destination, worker_id="active", claim_grace=0,
                      crash_hook=copy) as active:
        active.create_schedule(NS, sid, notes="pre")
        assert active.rollback(NS, sid, rid).outcome == "accepted"
        active.run_until_idle()
        mig = active.migration(NS, sid)
        assert mig.state == "completed" and copy.done, mig
        assert active.verify() == []
    first = mig.destination_first_run_id
    # The server's account: our request created the chain.
    assert env.destination.describe(NS, destination_workflow_id(sid),
                                    first).create_request_id == rid
    return active_url, standby_url, first


def promoted(env: TemporalEnv, standby_url: str) -> MigrationService:
    standby = open_service(standby_url, env.destination, worker_id="standby", claim_grace=0)
    with pytest.raises(StandbyNotPromoted):
        standby.run_until_idle()  # not before the promotion
    assert standby.promote("oncall", "active lost") == 1
    standby.run_until_idle()
    return standby


def listed_run_ids(env: TemporalEnv, wid: str) -> list[str]:
    """Visibility only (a deleted run can no longer be described)."""
    async def listing() -> list[str]:
        return [wf.run_id async for wf in env.ops.client.list_workflows(listing_query(wid))]
    return env.ops.run(listing)


def delete_every_run(env: TemporalEnv, wid: str) -> None:
    """DeleteWorkflowExecution of each run at ``wid``; returns once the server holds none."""
    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
    for run_id in listed_run_ids(env, wid):
        rpc = DeleteWorkflowExecutionRequest(
            namespace=NS, workflow_execution=WorkflowExecution(workflow_id=wid, run_id=run_id))
        env.ops.run(lambda rpc=rpc: env.ops.client.workflow_service
                    .delete_workflow_execution(rpc))

    def gone() -> bool:
        try:
            env.destination.describe(NS, wid)
        except DestinationNotFound:
            return True
        return False
    wait_for(gone, bool, 30, f"every run at {wid} deleted")
    wait_for(lambda: listed_run_ids(env, wid), lambda runs: runs == [], 30,
             f"visibility without runs at {wid}")


def test_a_standby_lagging_before_the_claim_accepts_the_continued_chain(temporal_env,
                                                                       tmp_path, sid):
    env, wid, rid = temporal_env, destination_workflow_id(sid), f"R-{uuid.uuid4()}"
    active_url, standby_url, first = completed_on_the_active(env, tmp_path, sid, rid,
                                                             "claim.before_append")
    # The server's scheduler runs the chain: continue it as new, then end it.
    world = ServerWorld(env)
    continued = world.continue_as_new(wid)
    assert continued != first
    world.terminate(wid)

    standby = promoted(env, standby_url)
    try:
        mig = standby.migration(NS, sid)
        assert (mig.state, mig.destination_first_run_id) == ("completed", first), mig
        assert start_workers(standby, sid) == []  # reconciled via the chain head, no start
        assert [e["evidence"] for e in events(standby, sid, ACCEPTED)] == ["chain_head"]
        (chain,) = events(standby, sid, CHAIN_VERIFIED)
        assert (chain["verdict"], chain["head_create_request_id"]) == ("owned", rid)
        source = standby.schedule(NS, sid)
        assert source.closed and source.close_reason == "migrated"
        assert standby.verify() == []
        assert standby.verify(also=active_url) == []
    finally:
        standby.close()

    # The server holds exactly one chain: our two runs, the continued one still current.
    current = env.destination.describe(NS, wid)
    assert (current.run_id, current.first_execution_run_id, current.status) == (
        continued, first, "terminated")
    chains = env.ops.chains(wid, 2)
    assert list(chains) == [first]
    assert [r.run_id for r in chains[first]] == [first, continued]


def test_a_standby_lagging_after_the_claim_parks_when_the_chain_was_deleted(temporal_env,
                                                                          tmp_path, sid):
    env, wid, rid = temporal_env, destination_workflow_id(sid), f"R-{uuid.uuid4()}"
    active_url, standby_url, _ = completed_on_the_active(env, tmp_path, sid, rid,
                                                         "start.before_call")
    delete_every_run(env, wid)

    standby = promoted(env, standby_url)
    try:
        mig = standby.migration(NS, sid)
        assert (mig.state, mig.park_reason, mig.destination_first_run_id) == (
            "parked", "failover_unverified", None), mig
        # The copied claim and start are the active's; the standby started nothing.
        assert start_workers(standby, sid) == ["active", "active"]
        assert events(standby, sid, ACCEPTED) == []
        source = standby.schedule(NS, sid)
        assert not source.closed and source.migration_pending
        assert standby.verify() == []
        assert standby.verify(also=active_url) == []
    finally:
        standby.close()

    # Nothing was started at the id: Describe (strongly consistent) and visibility agree.
    with pytest.raises(DestinationNotFound):
        env.destination.describe(NS, wid)
    assert listed_run_ids(env, wid) == []
