"""Failover: the active store dies mid-migration, its log is replicated to a standby in another
PostgreSQL database, and the standby's workers finish from the replicated state alone, against
the same destination (the simulator kept in a third database, ``sim+postgresql://``).

The standby is promoted first (a failover epoch): every migration from before it, and every
rollback of a source from before it, reconciles before it may start, since the lost tail may
have used its claim. Checked on the standby: each migration whose start reached the
destination completes on the chain head's create id; each whose start never did parks
``failover_unverified`` for an operator (nothing proves the lost tail did not start and then
lose that chain); the same request ids (derived ids are a function of the incarnation, so even
a rollback that never replicated is re-issued with the same id); exactly one destination chain
per schedule, ever; and the invariant checker over the standby's whole log.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator
from uuid import UUID

import pytest

from schedfence.domain.ids import destination_workflow_id
from schedfence.infra.adapters.replication.follower import ReplicationRefused, replicate
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.shared_sim import SharedSimDestination
from schedfence.infra.adapters.store.eventstore import parse_store_url
from tests import pgtools
from tests.replica_helpers import databases

ROOT = Path(__file__).resolve().parents[2]
NS = "payments"
N = 27
# Where the active dies in each migration's attempt; None: it completes; "untouched": no
# worker of the active ever ran it.
POINTS = (None, "claim.after_append", "start.before_call", "start.after_call",
          "answer.before_append", "answer.after_append", "close.before_append",
          "close.after_append", "untouched")
NEVER_STARTED = ("claim.after_append", "start.before_call")  # the start call never left


class Crash(Exception):
    """The active process dying at a boundary."""


class DiesAt:
    """The crash hook: the active dies at ``point`` (set per migration)."""

    point: str | None = None

    def __call__(self, at: str) -> None:
        if at == self.point:
            raise Crash(at)


@pytest.fixture(scope="module")
def dbs() -> Iterator[list[str]]:
    yield from databases("sf_fo_active", "sf_fo_standby", "sf_fo_dest")


@pytest.fixture
def stores(dbs: list[str]) -> dict[str, str]:
    return {"active": pgtools.new_schema_url(dbs[0]),
            "standby": pgtools.new_schema_url(dbs[1]),
            "dest": "sim+" + pgtools.new_schema_url(dbs[2])}


@pytest.fixture
def dest(stores: dict[str, str]) -> Iterator[SharedSimDestination]:
    destination = SharedSimDestination(stores["dest"])
    yield destination
    destination.close()


def sid(i: int) -> str:
    return f"sched-{i:02d}"


def head(url: str) -> int:
    target = parse_store_url(url).pg
    assert target is not None
    with target.connect() as conn:
        return conn.execute(f'SELECT max(notification_id) FROM "{target.schema}".'
                            '"schedfence_events"').fetchone()[0] or 0


def run_active(url: str, dest: SharedSimDestination) -> tuple[dict[str, str], list[int]]:
    """Create, roll back and partly migrate N schedules; the active dies in each migration
    at its point. Returns the request ids and the log positions after each phase."""
    dies = DiesAt()
    with open_service(url, dest, crash_hook=dies, worker_id="active", claim_grace=0) as svc:
        for i in range(N):
            svc.create_schedule(NS, sid(i), notes=f"schedule {i}")
        marks = [svc.event_count()]
        results = {sid(i): svc.rollback(NS, sid(i)) for i in range(N)}
        marks.append(svc.event_count())
        for i in range(N):
            dies.point = POINTS[i % len(POINTS)]
            if dies.point == "untouched":
                continue
            try:
                svc.worker.attempt(UUID(results[sid(i)].migration_id))
            except Crash:
                pass
        marks.append(svc.event_count())
    for i in range(0, N, 3):  # some chains move on (continue-as-new) before the failover
        wid = destination_workflow_id(sid(i))
        if any(run.status == "running" for run in dest.simulator.runs(NS, wid)):
            dest.simulator.continue_as_new(NS, wid)
    return {key: r.request_id for key, r in results.items()}, marks


def take_over(url: str, dest: SharedSimDestination,
              request_ids: dict[str, str]) -> tuple[MigrationService, dict[str, str | None]]:
    """The standby's operator re-issues rollbacks that did not replicate, then its workers
    run. Returns the service and each migration's state as replicated (None: no rollback)."""
    svc = open_service(url, dest, worker_id="standby", claim_grace=0)
    svc.promote("oncall", "the active died")
    replicated: dict[str, str | None] = {}
    for i in range(N):
        try:
            replicated[sid(i)] = svc.migration(NS, sid(i)).state
        except Exception:  # noqa: BLE001 - NotFound: the rollback never replicated
            replicated[sid(i)] = None
            again = svc.rollback(NS, sid(i))
            assert (again.outcome, again.request_id) == ("accepted", request_ids[sid(i)])
    svc.run_until_idle()
    return svc, replicated


def started(dest: SharedSimDestination) -> set[str]:
    """Schedules whose start reached the destination (taken before the standby runs)."""
    return {key for key in map(sid, range(N))
            if dest.start_log(NS, destination_workflow_id(key))}


def check_outcomes(svc: MigrationService, dest: SharedSimDestination,
                   request_ids: dict[str, str], replicated: dict[str, str | None],
                   started_before: set[str]) -> dict:
    seen = {"reissued": 0, "chain_head": 0, "parked": 0}
    for key in map(sid, range(N)):
        wid = destination_workflow_id(key)
        mig, source = svc.migration(NS, key), svc.schedule(NS, key)
        assert mig.request_id == request_ids[key], key
        starts = [(req.request_id, outcome) for req, outcome in dest.start_log(NS, wid)]
        assert {rid for rid, _ in starts} <= {request_ids[key]}, key
        if key not in started_before:
            # The start never reached the destination, but nothing the standby can see
            # proves that: the lost tail may have started it and the chain may be gone.
            assert (mig.state, mig.park_reason) == ("parked", "failover_unverified"), key
            assert dest.chains(NS, wid) == [] and not source.closed, key
            assert starts == [], key  # no start after the failover
            seen["parked"] += 1
            continue
        assert mig.state == "completed", (key, replicated[key], mig)
        assert source.closed and source.close_reason == "migrated", key
        assert dest.chains(NS, wid) == [mig.destination_first_run_id], key
        assert dest.created_count(NS, wid) == 1, key  # exactly one chain, ever
        seen["reissued"] += len(starts) > 1
        evidence = [e.data["evidence"] for e in svc.history(NS, key)
                    if e.type.endswith("OwnershipAccepted")]
        seen["chain_head"] += evidence == ["chain_head"]
    assert svc.verify() == []
    return seen


def outcomes(svc: MigrationService) -> dict[str, tuple[str, str | None]]:
    return {sid(i): (svc.migration(NS, sid(i)).state, svc.migration(NS, sid(i)).park_reason)
            for i in range(N)}


def test_a_caught_up_standby_reaches_the_outcome_the_active_would_have(
        dbs: list[str], stores: dict[str, str], dest: SharedSimDestination) -> None:
    request_ids, _ = run_active(stores["active"], dest)
    report = replicate(stores["active"], stores["standby"])
    assert report.caught_up
    started_before = started(dest)
    assert started_before == {sid(i) for i in range(N)
                              if POINTS[i % len(POINTS)] not in NEVER_STARTED + ("untouched",)}
    svc, replicated = take_over(stores["standby"], dest, request_ids)
    with svc:
        seen = check_outcomes(svc, dest, request_ids, replicated, started_before)
        standby_outcomes = outcomes(svc)
    assert seen["parked"] == len({sid(i) for i in range(N)} - started_before)
    assert seen["chain_head"] >= 1

    # The reference: the same deaths on another store, no failover: the active's own
    # workers resume after the crash. Same ids (derived); the same outcomes, except that
    # what the active would have started, the promoted standby parks for an operator.
    reference = pgtools.new_schema_url(dbs[0])
    reference_dest = SharedSimDestination("sim+" + pgtools.new_schema_url(dbs[2]))
    try:
        reference_ids, _ = run_active(reference, reference_dest)
        with open_service(reference, reference_dest, worker_id="active-restarted",
                          claim_grace=0) as restarted:
            restarted.run_until_idle()
            expected = {key: ("parked", "failover_unverified") if key not in started_before
                        else state for key, state in outcomes(restarted).items()}
            assert expected == standby_outcomes
        assert reference_ids == request_ids
    finally:
        reference_dest.close()


def test_a_lagging_standby_re_issues_with_the_same_ids_and_no_second_chain(
        stores: dict[str, str], dest: SharedSimDestination) -> None:
    request_ids, marks = run_active(stores["active"], dest)
    cut = (marks[1] + marks[2]) // 2  # half of the workers' steps never replicated
    report = replicate(stores["active"], stores["standby"], stop_at=cut)
    assert not report.caught_up and report.position <= cut
    started_before = started(dest)
    svc, replicated = take_over(stores["standby"], dest, request_ids)
    with svc:
        seen = check_outcomes(svc, dest, request_ids, replicated, started_before)
    # Nothing from before the failover starts again: proof at the chain head, or a park.
    assert seen["reissued"] == 0 and seen["chain_head"] >= 1
    with pytest.raises(ReplicationRefused):  # the old active can never overwrite it now
        replicate(stores["active"], stores["standby"])


def test_a_standby_missing_rollbacks_re_issues_them_with_the_same_ids(
        stores: dict[str, str], dest: SharedSimDestination) -> None:
    request_ids, marks = run_active(stores["active"], dest)
    cut = (marks[0] + marks[1]) // 2  # half of the rollbacks never replicated
    replicate(stores["active"], stores["standby"], stop_at=cut)
    started_before = started(dest)
    svc, replicated = take_over(stores["standby"], dest, request_ids)
    with svc:
        seen = check_outcomes(svc, dest, request_ids, replicated, started_before)
    assert sum(state is None for state in replicated.values()) >= N // 3
    # Re-issued rollbacks of pre-failover sources are the same migrations (the same derived
    # ids): they reconcile too, and never start a second time.
    assert seen["reissued"] == 0 and seen["chain_head"] >= 1


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "schedfence.infra.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_failover_after_sigkill_of_a_real_worker_process(
        stores: dict[str, str], dest: SharedSimDestination) -> None:
    """The same through the CLI: `schedfence worker` on the active is killed with SIGKILL
    wherever it is, `schedfence replicate` copies the log, and `schedfence worker` on the
    standby finishes, both against `--destination sim+postgresql://...`."""
    active, standby = stores["active"], stores["standby"]
    with open_service(active, dest, worker_id="admin") as svc:
        for i in range(N):
            svc.create_schedule(NS, sid(i))
        request_ids = {sid(i): svc.rollback(NS, sid(i)).request_id for i in range(N)}
    before = head(active)
    worker = subprocess.Popen(
        [sys.executable, "-m", "schedfence.infra.cli", "--store", active, "--destination", stores["dest"],
         "--worker-id", "active-process", "worker", "--poll-interval", "0.05"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while head(active) < before + 25 and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    died_at = head(active)
    assert before < died_at, "the worker made progress before it was killed"

    copy = cli("replicate", "--from", active, "--to", standby, "--json")
    assert copy.returncode == 0, copy.stderr
    doc = json.loads(copy.stdout)
    assert (doc["position"], doc["caught_up"]) == (died_at, True)
    started_before = started(dest)
    with open_service(standby, dest, claim_grace=0) as svc:
        replicated = {key: svc.migration(NS, key).state for key in map(sid, range(N))}
    promoted = cli("--store", standby, "promote", "--actor", "oncall", "--reason", "SIGKILL")
    assert promoted.returncode == 0, promoted.stderr
    run = cli("--store", standby, "--destination", stores["dest"], "--worker-id", "standby",
              "worker", "--until-idle", "--claim-grace", "0", "--json")
    assert run.returncode == 0, run.stderr
    with open_service(standby, dest, claim_grace=0) as svc:
        check_outcomes(svc, dest, request_ids, replicated, started_before)
        with pytest.raises(ReplicationRefused):  # the old active cannot overwrite it now
            replicate(active, standby)
