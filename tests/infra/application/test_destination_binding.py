"""A migration is bound to its destination (issue 45, item 1): every migration and job records
what it was accepted against; a step on another destination, or on an unknown one (an older
release's record), is refused, writing nothing and calling nothing there."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from uuid import UUID

import pytest

from schedfence.domain.destination_id import DestinationId
from schedfence.domain.errors import DomainError, RecoveryRefused
from schedfence.domain.job import job_aggregate_id
from schedfence.domain.ports import DestinationUnavailable
from schedfence.domain.rollback.aggregate import Migration
from schedfence.infra.application.jobs import RunOptions, run_job
from schedfence.infra.application.service import MigrationService, open_service
from tests.helpers import start_foreign
from tests.infra.cli.cli_runs import subprocess_cli

NS = "default"
SIM = {"kind": "sim", "address": "store", "namespace": NS, "cluster_id": ""}
OP = {"actor": "ann", "reason": "INC-45"}


class Stranger:
    """Another destination (a Temporal cluster): every call it is asked is recorded."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def destination_identity(self, with_cluster: bool = False) -> DestinationId:
        return DestinationId("temporal", "10.0.0.9:7233", (NS,), "other")

    def serves(self, namespace: str) -> bool:  # asked before a job reads a page
        return namespace == NS

    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            self.calls.append(name)
            raise DestinationUnavailable(f"stranger: {name}")
        return call


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fence.db'}"


def test_every_kind_records_what_it_was_accepted_against(store: str) -> None:
    with open_service(store, "sim") as svc:
        svc.create_schedule(NS, "back")
        svc.rollback(NS, "back", "R1")
        assert svc.migration(NS, "back").destination_binding == SIM
        assert svc.migration(NS, "back").destination == "sim"
        svc.run_until_idle()
        forward = svc.forward(NS, "back", "F1")
        assert svc.forward_state(NS, "back", "F1").destination == SIM
        svc.create_schedule(NS, "j1")
        run_job(svc, "J", NS, "workflow", options=RunOptions(wait=False))
        job = svc.app.repository.get(job_aggregate_id("J"))
        assert job.state.destination == SIM and forward.outcome == "accepted"


def test_a_worker_serving_another_destination_writes_and_calls_nothing(store: str) -> None:
    with open_service(store, "sim") as svc:
        svc.create_schedule(NS, "c")
        svc.rollback(NS, "c")
        svc.create_schedule(NS, "p")
        start_foreign(svc.destination, "p")  # somebody else's run: it parks, re-armable
        svc.rollback(NS, "p")
        svc.run_until_idle()  # c completed, p parked
        assert svc.migration(NS, "p").state == "parked"
        svc.forward(NS, "c", "F1")  # c handed back: a forward is open
        for sid in ("a", "b"):  # two rollbacks pending
            svc.create_schedule(NS, sid)
            svc.rollback(NS, sid)
    stranger = Stranger()
    with MigrationService(open_service(store, "sim").app, stranger) as other:
        before = other.event_count()
        report = other.run_until_idle(retry_for=0)
        assert other.event_count() == before and stranger.calls == []
        assert len(report.refused) == len(report.blocked) == 4  # a, b, p (parked), c's forward
        assert all(line.startswith("destination_mismatch: ") for line in report.refused)
        assert any("forward migration default/c" in line for line in report.refused)
        assert "migration default/a was accepted against sim; this process serves " \
               "temporal://10.0.0.9:7233/default (cluster other)" in "\n".join(report.refused)
        # A retry of the same request from there is refused too, and a job's rerun.
        rid = other.migration(NS, "a").request_id
        with pytest.raises(DomainError) as retry:
            other.rollback(NS, "a", rid)
        assert retry.value.code == "destination_mismatch"
        for kind, options in (("rearm", {}), ("resolve", {"resolution": "source_kept"})):
            with pytest.raises(DomainError) as refused:
                other.recover(kind, NS, "p", **OP, **options)  # allowed on its own one
            assert refused.value.code == "destination_mismatch", refused.value
        assert other.event_count() == before and stranger.calls == []
    with open_service(store, "sim") as svc:  # its own destination: every one completes
        assert svc.run_until_idle().drained
        assert {svc.migration(NS, s).state for s in ("a", "b")} == {"completed"}
        assert svc.recover("rearm", NS, "p", **OP).state == "pending"


def test_a_job_resumes_only_on_its_own_destination(store: str) -> None:
    with open_service(store, "sim") as svc:
        svc.create_schedule(NS, "j1")
        run_job(svc, "J", NS, "workflow", options=RunOptions(wait=False))
    stranger = Stranger()
    with MigrationService(open_service(store, "sim").app, stranger) as other:
        before = other.event_count()
        with pytest.raises(DomainError) as refused:
            run_job(other, "J", NS, "workflow", options=RunOptions(wait=False))
        assert refused.value.code == "destination_mismatch"
        assert refused.value.message.startswith("job J was accepted against sim;")
        assert other.event_count() == before and stranger.calls == []


def as_older_release(store: str, topic: str, version: int) -> None:
    """Rewrite the stored records of ``topic`` as the release before bindings wrote them
    (no ``destination``, ``class_version`` ``version``): the test stands in for that
    release's process; the product never rewrites a stored event."""
    path = store.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT rowid, state FROM stored_events WHERE topic = ?",
                          (topic,)).fetchall()
        assert rows
        for rowid, state in rows:
            doc = json.loads(state)
            doc.pop("destination")
            doc["class_version"] = version
            db.execute("UPDATE stored_events SET state = ? WHERE rowid = ?",
                       (json.dumps(doc, separators=(",", ":"), sort_keys=True).encode(), rowid))


def test_an_older_release_rollback_is_unknown_until_an_operator_binds_it(store: str) -> None:
    with open_service(store, "sim") as svc:
        svc.create_schedule(NS, "old")
        svc.rollback(NS, "old", "R-old")
    as_older_release(store, Migration.RequestIdAssigned.TOPIC, 6)
    with open_service(store, "sim") as svc:
        view = svc.migration(NS, "old")
        assert view.destination_binding is None and view.destination.startswith("unknown")
        before = svc.event_count()
        report = svc.run_until_idle(retry_for=0)
        assert svc.event_count() == before and view.state == "pending"
        [line] = report.refused
        assert line.startswith("destination_unknown: migration default/old was accepted by a "
                               "release that recorded no destination; this process serves sim")
        assert "schedfence recover bind default old" in line
        bound = svc.recover("bind", NS, "old", **OP)
        assert bound.destination_binding == SIM
        with pytest.raises(RecoveryRefused, match="already bound to sim"):
            svc.recover("bind", NS, "old", **OP)
        assert svc.run_until_idle().drained
        assert svc.migration(NS, "old").state == "completed" and svc.verify() == []
        kinds = [type(e).__name__ for e in svc.app.events.get(UUID(view.migration_id))]
        assert kinds[:2] == ["RequestIdAssigned", "DestinationBound"]


def test_the_cli_worker_on_another_destination_says_so_in_one_line(store: str,
                                                                   tmp_path: Path) -> None:
    """The issue's report, each command its own process: accepted on ``sim``, a worker on
    another simulator (one of its own store) refuses it and exits ``not_drained``, and
    ``status`` and ``history`` show where it was accepted."""
    other = f"sim+sqlite:///{tmp_path / 'other-sim.db'}"
    assert subprocess_cli(store, "schedule", "create", NS, "pin1").returncode == 0
    done = subprocess_cli(store, "--destination", "sim", "rollback", NS, "pin1")
    assert done.returncode == 0, done.stderr
    worked = subprocess_cli(store, "--destination", other, "worker", "--until-idle",
                            "--retry-for", "0")
    assert worked.returncode == 1 and "Traceback" not in worked.stderr
    assert "error: not_drained: destination_mismatch: migration default/pin1 was accepted " \
           f"against sim; this process serves {other}" in worked.stderr, worked.stderr
    status = json.loads(subprocess_cli(store, "status", NS, "pin1", "--json").stdout)
    assert status["migration"]["state"] == "pending"
    assert status["migration"]["destination_binding"] == SIM
    text = subprocess_cli(store, "status", NS, "pin1").stdout
    assert "destination" in text and " sim" in text
    history = json.loads(subprocess_cli(store, "history", NS, "pin1", "--json").stdout)
    accepted = next(e for e in history["events"] if e["short_type"] == "RequestIdAssigned")
    assert accepted["data"]["destination"] == SIM and " against sim" in accepted["summary"]


def test_the_http_api_shows_and_refuses_by_the_binding(store: str) -> None:
    from fastapi.testclient import TestClient

    from schedfence.infra.http.app import create_app
    from schedfence.infra.http.auth import Tokens
    token = ("ann", "admin", "admin-secret-0123456789abcdef")
    with open_service(store, "sim") as svc:
        svc.create_schedule(NS, "h1")
        start_foreign(svc.destination, "h1")
        svc.rollback(NS, "h1")
        svc.run_until_idle()  # parked: a re-arm is allowed, on its own destination
    stranger = Stranger()
    with MigrationService(open_service(store, "sim").app, stranger) as other:
        http = TestClient(create_app(other, Tokens([token])),
                          headers={"Authorization": f"Bearer {token[2]}"})
        doc = http.get("/v1/schedule", params={"namespace": NS, "schedule_id": "h1"}).json()
        assert doc["migration"]["destination_binding"] == SIM
        assert doc["migration"]["destination"] == "sim"
        refused = http.post("/v1/recover/rearm", json={"namespace": NS, "schedule_id": "h1",
                                                        "reason": "INC-45"})
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "destination_mismatch"
        drained = http.post("/v1/worker/drain", json={}).json()
        assert drained["refused"] and drained["refused"][0].startswith("destination_mismatch")
        assert stranger.calls == []


def test_an_older_release_adoption_leaves_it_unknown_until_bound(store: str) -> None:
    """A v1 ``LegacyMigrationAdopted`` (an adoption before bindings) binds nothing: the
    migration stays unknown, and ``recover bind`` in a process of its own binds it."""
    from schedfence.infra.demo.legacy import plant_legacy_v1
    with open_service(store, "sim") as svc:
        svc.create_schedule(NS, "leg")
        plant_legacy_v1(svc, NS, "leg")
        assert svc.recover("adopt", NS, "leg", **OP).destination_binding == SIM
    as_older_release(store, Migration.LegacyMigrationAdopted.TOPIC, 1)
    with open_service(store, "sim") as svc:
        assert svc.migration(NS, "leg").destination_binding is None
        with pytest.raises(DomainError) as refused:
            svc.recover("rearm", NS, "leg", confirm_no_destination_run=True, **OP)
        assert refused.value.code == "destination_unknown"
    done = subprocess_cli(store, "recover", "bind", NS, "leg", "--actor", "ann", "--reason",
                          "INC-45", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["destination_binding"] == SIM
    history = json.loads(subprocess_cli(store, "history", NS, "leg", "--json").stdout)
    [bound] = [e for e in history["events"] if e["short_type"] == "DestinationBound"]
    assert bound["data"]["destination"] == SIM and "bound by ann to sim" in bound["summary"]
