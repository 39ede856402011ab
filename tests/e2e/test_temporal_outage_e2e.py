"""A Temporal outage before any worker ran: no migration is lost or parked.

A private dev server (not the session's shared one: this test kills it) persists to a SQLite
file in ``tmp_path``. Forty rollbacks are accepted while it is up; then the server and its
destination worker are SIGKILLed before any store worker runs. Every start attempted during the
outage provably never left this process (connection refused), so each migration records a
``not_sent`` answer and goes back to ``pending`` with its claim armed. Once the server is
restarted on the same port and database, the workers start each migration again and every
schedule ends with exactly one chain at ``temporal-sys-scheduler:<id>``, judged by listing the
server's runs, not our own records.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from schedfence.domain.ids import destination_workflow_id
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.temporal import TemporalDestination
from tests.temporal_server import DevServer, ServerError, start_dev_server, wait_ready
from tests.contract.temporal_env import NS, ServerOps, start_destination_worker, stop_process

SCHEDULES = 40


class OwnServer:
    """One dev server on a fixed port and database file, plus its destination worker."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port: int | None = None
        self.server: DevServer | None = None
        self.worker: subprocess.Popen | None = None

    @property
    def target(self) -> str:
        assert self.server is not None
        return self.server.target

    def start(self) -> None:
        self.server = start_dev_server(self.workdir, port=self.port)
        self.port = self.server.port  # a restart reuses the port and temporal.db
        self.worker, _ = start_destination_worker(f"temporal://{self.target}/{NS}")

    def kill(self) -> None:
        """SIGKILL the server and its worker, by pid; wait until both are gone."""
        for proc in (self.server.process, self.worker):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def stop(self) -> None:
        if self.worker is not None:
            stop_process(self.worker)
        if self.server is not None:
            self.server.stop()


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[OwnServer]:
    env = OwnServer(tmp_path / "temporal")
    try:
        env.start()
    except (ServerError, OSError) as exc:
        env.stop()
        reason = f"no Temporal dev server: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    yield env
    env.stop()


def answers(svc, sid: str) -> list[dict]:
    return [e.data for e in svc.history(NS, sid) if e.type.endswith("DestinationAnswered")]


def rearms(svc, sid: str) -> list[dict]:
    return [e.data for e in svc.history(NS, sid) if e.type.endswith("StartClaimRearmed")]


def test_an_outage_before_the_workers_ran_loses_and_parks_nothing(own_server, tmp_path):
    began = time.monotonic()
    sids = [f"outage-{i:02d}-{uuid.uuid4().hex[:8]}" for i in range(SCHEDULES)]
    destination = TemporalDestination(own_server.target, NS, rpc_timeout=3.0)
    svc = open_service(f"sqlite:///{tmp_path / 'fence.db'}", destination,
                       worker_id="outage-e2e", claim_grace=1.0)
    ops: ServerOps | None = None
    try:
        for sid in sids:  # both check the destination for a running chain: the server is up
            svc.create_schedule(NS, sid, notes=f"job {sid}")
            assert svc.rollback(NS, sid).outcome == "accepted"
        assert {svc.migration(NS, sid).state for sid in sids} == {"pending"}

        own_server.kill()  # before any worker ran: nothing was ever sent for these

        for _ in range(2):
            svc.run_until_idle()
        for sid in sids:
            mig = svc.migration(NS, sid)
            assert (mig.state, mig.claim_armed, mig.park_reason) == ("pending", True, None), mig
            assert mig.destination_first_run_id is None
            seen = answers(svc, sid)
            assert seen and {a["kind"] for a in seen} == {"not_sent"}, seen
            assert all(a["proves_no_commit"] for a in seen)
            assert len(rearms(svc, sid)) == len(seen)
            assert {r["reason"] for r in rearms(svc, sid)} == {"start_not_sent"}
        assert svc.migrations_by_state("parked") == []
        assert svc.migrations_by_state("claimed") == []
        assert svc.verify() == []

        own_server.start()  # same port, same temporal.db; start() waited for 'default'
        wait_ready(own_server.target, NS)
        for _ in range(5):  # the adapter reconnects lazily; a pass may still back off
            svc.run_until_idle()
            if all(svc.migration(NS, sid).state == "completed" for sid in sids):
                break

        states = {sid: svc.migration(NS, sid).state for sid in sids}
        assert set(states.values()) == {"completed"}, states
        assert svc.migrations_by_state("parked") == []
        assert svc.verify() == []
        ops = ServerOps(own_server.target)
        for sid in sids:
            mig = svc.migration(NS, sid)
            assert svc.schedule(NS, sid).closed
            kinds = [a["kind"] for a in answers(svc, sid)]
            assert kinds[-1] == "created" and set(kinds[:-1]) == {"not_sent"}, kinds
            evidence = [e.data["evidence"] for e in svc.history(NS, sid)
                        if e.type.endswith("OwnershipAccepted")]
            assert evidence == ["start_created"]
            chains = ops.chains(destination_workflow_id(sid), 1)
            assert list(chains) == [mig.destination_first_run_id], (sid, chains)
            assert len(chains[mig.destination_first_run_id]) == 1
    finally:
        if ops is not None:
            ops.close()
        svc.close()
        destination.close()  # sdk-python#300: drop the client on its loop before exit
    print(f"\noutage e2e: {SCHEDULES} schedules in {time.monotonic() - began:.1f}s")
