"""Issue 27, item 11, on the simulator: a start whose outcome was unknown and that created
nothing (the server died before committing, or the worker died between the claim and the
start) is re-armed once the claim grace has passed, because the describe finds no run at
all at the workflow id inside the namespace's retention; it then completes with one chain.
Anything at the id (even a closed run), or a claim older than retention less the margin,
still parks. A chain deleted by hand defeats the rule, as docs/protocol.md (F16) says."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.rollback.evidence import REARM_REASON
from schedfence.infra.application import jobs
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import MigrationService, open_service
from tests.helpers import start_foreign
from tests.infra.engines.pool_helpers import store  # noqa: F401 (fixture: SQLite, PostgreSQL)

NS = "default"
GRACE = 0.3  # the claim grace: long enough to be a grace, short enough for a test


def _service(url: str, sim: SimulatedDestination, worker: str = "w1",
             hook=None) -> MigrationService:
    return open_service(url, sim, worker_id=worker, crash_hook=hook, claim_grace=GRACE,
                        retry_for=3 * GRACE)


def _accept(svc: MigrationService, sids: list[str]) -> None:
    for sid in sids:
        svc.create_schedule(NS, sid, paused=False, notes=f"notes {sid}")
        assert svc.rollback(NS, sid).outcome == "accepted"


def _kinds(svc: MigrationService, sid: str, suffix: str, key: str) -> list[str]:
    return [e.data[key] for e in svc.history(NS, sid) if e.type.endswith(suffix)]


def _one_chain_each(svc: MigrationService, sim: SimulatedDestination, sids: list[str]) -> None:
    assert svc.migrations_by_state("parked") == []
    for sid in sids:
        mig = svc.migration(NS, sid)
        assert mig.state == "completed", mig
        assert svc.schedule(NS, sid).closed
        assert sim.chains(NS, destination_workflow_id(sid)) == [mig.destination_first_run_id]
        assert sim.created_count(NS, destination_workflow_id(sid)) == 1
    assert svc.verify() == []


def test_a_start_lost_with_the_server_re_arms_on_absence_and_completes(store: str):
    sim = SimulatedDestination(seed=11)
    sids = [f"crash-{i}" for i in range(6)]
    with _service(store, sim) as svc:
        _accept(svc, sids)
        sim.inject("start", "unavailable", times=len(sids))  # died before committing
        svc.run_until_idle()
        _one_chain_each(svc, sim, sids)
        for sid in sids:
            assert _kinds(svc, sid, "DestinationAnswered", "kind") == ["unavailable", "created"]
            history = svc.history(NS, sid)
            rearm = [e.data for e in history if e.type.endswith("StartClaimRearmed")]
            claims = [e for e in history if e.type.endswith("StartClaimConsumed")]
            # A loaded machine may hold a claim past half the grace before its start: the
            # worker then never sends it (attempt.py, start_in_time), and that claim is
            # re-armed on absence too. Every claim but the last is re-armed, for this reason.
            assert len(rearm) == len(claims) - 1 >= 1
            assert {r["reason"] for r in rearm} == {REARM_REASON}
            seen = rearm[0]["absence"]
            assert (seen["answer"], seen["run_found"]) == ("unavailable", False)
            assert seen["step_age"] >= GRACE and seen["claim_age"] >= seen["step_age"]
            assert seen["retention_seconds"] == sim.retention


def test_a_worker_killed_between_claim_and_start_leaves_nothing_parked(store: str):
    class Die(Exception):
        pass

    def die_before_start(point: str) -> None:
        if point == "start.before_call":
            raise Die(point)

    sim, url = SimulatedDestination(seed=12), store
    sids = [f"killed-{i}" for i in range(4)]
    svc = _service(url, sim, "w1", die_before_start)
    _accept(svc, sids)
    try:
        svc.run_until_idle()
    except Die:
        pass
    svc.close()  # the process is gone: its claims stay consumed, no start was sent
    assert sim.start_log(NS, destination_workflow_id(sids[0])) == []
    with _service(url, sim, "w2") as rerun:
        rerun.run_until_idle()
        _one_chain_each(rerun, sim, sids)
        claimed = [sid for sid in sids
                   if _kinds(rerun, sid, "StartClaimRearmed", "reason") == [REARM_REASON]]
        assert claimed and all(_kinds(rerun, sid, "DestinationAnswered", "kind") == ["created"]
                               for sid in claimed)


def test_a_run_at_the_id_even_closed_still_parks(tmp_path: Path):
    sim = SimulatedDestination(seed=13)
    with _service(f"sqlite:///{tmp_path / 'f.db'}", sim) as svc:
        _accept(svc, ["closed"])
        start_foreign(sim, "closed")  # someone's run at the id ...
        sim.complete(NS, destination_workflow_id("closed"))  # ... closed, still visible
        sim.inject("start", "unavailable")
        svc.run_until_idle()
        mig = svc.migration(NS, "closed")
        assert (mig.state, mig.park_reason) == ("parked", "foreign_destination")
        assert _kinds(svc, "closed", "StartClaimRearmed", "reason") == []
        assert sim.created_count(NS, destination_workflow_id("closed")) == 1  # the foreign one
        assert svc.verify() == []


def test_a_claim_older_than_retention_less_the_margin_still_parks(tmp_path: Path):
    sim = SimulatedDestination(seed=14, retention=GRACE + 0.2)
    with _service(f"sqlite:///{tmp_path / 'f.db'}", sim) as svc:
        svc.worker.retention_margin = 0.1  # absence proves something only up to 0.4 s
        _accept(svc, ["old"])
        sim.inject("start", "unavailable")
        svc.run_until_idle(max_attempts=1)
        time.sleep(GRACE + 0.3)
        svc.run_until_idle()
        mig = svc.migration(NS, "old")
        assert (mig.state, mig.park_reason) == ("parked", "head_missing")
        assert "not younger than retention" in mig.park_detail
        assert svc.verify() == []


def test_a_chain_deleted_by_hand_defeats_the_rule_as_documented(tmp_path: Path):
    """The caveat, pinned: the start committed (its answer lost), the run was deleted by
    hand, so nothing at the destination remembers it; the absence re-arms and a second
    chain is made. Nothing in our log can tell; docs/protocol.md (F16) says so."""
    sim = SimulatedDestination(seed=15)
    with _service(f"sqlite:///{tmp_path / 'f.db'}", sim) as svc:
        _accept(svc, ["deleted"])
        wid = destination_workflow_id("deleted")
        sim.inject("start", "lose_response")
        svc.run_until_idle(max_attempts=1)
        sim.delete(NS, wid)
        svc.run_until_idle()
        assert svc.migration(NS, "deleted").state == "completed"
        assert sim.created_count(NS, wid) == 2


def test_a_job_killed_between_claim_and_start_reruns_at_once_to_completion(tmp_path: Path):
    """The rerun comes at once, inside the dead run's claim grace: its drain waits the grace
    out (``wait``) rather than giving up (``not_drained``), then re-arms each claim on absence
    and starts it once. The report: every schedule completed, none parked."""
    class Die(Exception):
        pass

    def die(point: str) -> None:
        if point == "start.before_call":
            raise Die(point)

    sim, url = SimulatedDestination(seed=16), f"sqlite:///{tmp_path / 'f.db'}"
    sids = [f"job-{i}" for i in range(5)]
    svc = _service(url, sim, "job-run-1", die)
    for sid in sids:
        svc.create_schedule(NS, sid)
    with pytest.raises(Die):
        jobs.run_job(svc, "j1", NS, "workflow", match="job-*")
    svc.close()
    assert sim.workflow_ids() == []  # the kill came before any start
    with _service(url, sim, "job-run-2") as rerun:
        rerun.retry_for = 0.1  # less than the grace: only the wait for it drains the rerun
        report = jobs.run_job(rerun, "j1", NS, "workflow", match="job-*")
        assert report["drain"]["drained"], report["drain"]
        assert report["counts"]["completed"] == len(sids) and report["counts"]["parked"] == 0
        _one_chain_each(rerun, sim, sids)
        assert any(_kinds(rerun, sid, "StartClaimRearmed", "reason") == [REARM_REASON]
                   for sid in sids)


def test_the_re_arm_on_absence_is_narrated_and_explained(tmp_path: Path):
    from schedfence.domain.rollback.aggregate import Migration
    from schedfence.infra.application.replay.explain import _rearm
    from schedfence.projections.narration import narrate

    sim = SimulatedDestination(seed=17)
    with _service(f"sqlite:///{tmp_path / 'f.db'}", sim) as svc:
        _accept(svc, ["told"])
        sim.inject("start", "unavailable")
        svc.run_until_idle()
        [data] = [e.data for e in svc.history(NS, "told")
                  if e.type.endswith("StartClaimRearmed")]
        line = narrate("StartClaimRearmed", data).text
        assert "no run at the workflow id" in line and "answer was unavailable" in line
        events = [svc.app.mapper.to_domain_event(n) for n in svc.app.notifications()]
    rearm = next(e for e in events if isinstance(e, Migration.StartClaimRearmed))
    state = type("S", (), {"unproven_starts": 1})()
    assert all(c["equal"] for c in _rearm(rearm, state, {}))


def test_a_start_that_would_go_out_late_is_not_sent_and_is_re_armed(tmp_path: Path):
    """A worker frozen between its claim and its start for more than half the grace does
    not send it: another worker's reconcile may already have waited out the grace, found
    nothing and re-armed (F16). The claim stays consumed; the wait and the re-arm follow."""
    sim, frozen = SimulatedDestination(seed=18), []

    def freeze(point: str) -> None:
        if point == "claim.after_append" and not frozen:
            frozen.append(point)
            time.sleep(GRACE * 0.7)

    with _service(f"sqlite:///{tmp_path / 'f.db'}", sim, "frozen", freeze) as svc:
        _accept(svc, ["late"])
        svc.run_until_idle()
        wid = destination_workflow_id("late")
        assert len(sim.start_log(NS, wid)) == 1  # only the start after the re-arm went out
        _one_chain_each(svc, sim, ["late"])
        assert _kinds(svc, "late", "StartClaimRearmed", "reason") == [REARM_REASON]
        assert _kinds(svc, "late", "DestinationAnswered", "kind") == ["created"]
