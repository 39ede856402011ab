"""``schedfence recover ...`` end to end on a store with the simulator persisted beside it:
allowed and refused cases of each command, the error contract, and nothing written on refusal."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.ports import StartWorkflow
from schedfence.infra.cli.commands import cli
from schedfence.infra.demo.legacy import plant_legacy_v1
from schedfence.infra.application.service import MigrationService, open_service

from tests.helpers import NS, SID, WID, start_foreign

WHO = ["--actor", "oncall-ann", "--reason", "ticket-42"]


@pytest.fixture
def store(file_store_url: str) -> str:
    """A SQLite file or a PostgreSQL schema (both stores: tests/conftest.py)."""
    return file_store_url


def setup(store: str, build) -> None:
    """Build a state with the service; the CLI later opens the same store and simulator."""
    with open_service(store, "sim", claim_grace=0, retry_for=0) as service:  # reconcile decides at once
        service.create_schedule(NS, SID, notes="pre")
        build(service)


def invoke(store: str, *args: str):
    return CliRunner().invoke(cli, ["--store", store, "recover", *args])


def count(store: str) -> int:
    with open_service(store, "sim") as service:
        return service.event_count()


def allowed(store: str, *args: str) -> dict:
    result = invoke(store, *args, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def refused(store: str, *args: str, message: str) -> None:
    before = count(store)
    result = invoke(store, *args)
    assert result.exit_code == 1, result.stdout
    assert result.stderr.startswith("error: failed_precondition: ") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert count(store) == before, "a refused recovery wrote events"


def legacy(service: MigrationService) -> None:
    plant_legacy_v1(service, NS, SID)


def parked_foreign(service: MigrationService) -> None:
    start_foreign(service.destination)
    service.rollback(NS, SID, "R1")
    service.run_until_idle()


def parked_unproven(service: MigrationService) -> None:
    service.rollback(NS, SID, "R1")
    service.destination.inject("start", "lose_response")
    service.run_until_idle()
    service.destination.delete(NS, WID)
    service.run_until_idle()


def verify_ok(store: str) -> None:
    result = CliRunner().invoke(cli, ["--store", store, "verify"])
    assert result.exit_code == 0, result.stdout


def test_adopt_then_confirmed_rearm_then_worker_completes(store):
    setup(store, legacy)
    refused(store, "rearm", NS, SID, *WHO, message="adopt it first")
    view = allowed(store, "adopt", NS, SID, *WHO, "--request-id", "NEW-1")
    assert (view["state"], view["park_reason"], view["request_id"]) == \
        ("parked", "adopted_unverified", "NEW-1")
    refused(store, "adopt", NS, SID, *WHO, message="only an identity-less")
    refused(store, "abort", NS, SID, *WHO, message="adopted legacy migration")
    refused(store, "rearm", NS, SID, *WHO, message="--confirm-no-destination-run")
    view = allowed(store, "rearm", NS, SID, *WHO, "--confirm-no-destination-run")
    assert (view["state"], view["claim_armed"]) == ("pending", True)
    worker = CliRunner().invoke(cli, ["--store", store, "worker", "--until-idle", "--json"])
    assert json.loads(worker.stdout)["migrations"] == {"completed": 1}
    verify_ok(store)


def test_confirmed_rearm_refused_while_an_old_release_run_exists(store):
    def build(service: MigrationService) -> None:
        legacy(service)
        service.recover("adopt", NS, SID, actor="a", reason="r")
        service.destination.start_workflow(StartWorkflow(NS, WID, "old-id",
                                                         SCHEDULER_WORKFLOW_TYPE))
    setup(store, build)
    refused(store, "rearm", NS, SID, *WHO, "--confirm-no-destination-run",
            message="is running")


def test_rearm_and_abort_of_a_foreign_park(store):
    setup(store, parked_foreign)
    assert allowed(store, "rearm", NS, SID, *WHO)["state"] == "pending"
    with open_service(store, "sim") as service:
        service.run_until_idle()  # the foreign run still runs: parked again, no commit
    assert allowed(store, "abort", NS, SID, *WHO)["state"] == "aborted"
    refused(store, "abort", NS, SID, *WHO, message="no open migration")
    verify_ok(store)


def test_rearm_abort_refused_and_source_kept_allowed_after_an_unproven_start(store):
    setup(store, parked_unproven)
    refused(store, "rearm", NS, SID, *WHO, message="does not prove that nothing committed")
    refused(store, "abort", NS, SID, *WHO, message="no answer proves it committed nothing")
    refused(store, "resolve", NS, SID, *WHO, "--resolution", "destination_owns",
            "--first-run-id", "nope", message="does not exist")
    view = allowed(store, "resolve", NS, SID, *WHO, "--resolution", "source_kept")
    assert view["state"] == "aborted"
    status = json.loads(CliRunner().invoke(cli, ["--store", store, "status", NS, SID,
                                                 "--json"]).stdout)
    assert (status["schedule"]["paused"], status["schedule"]["notes"]) == (False, "pre")
    verify_ok(store)


def test_resolve_destination_owns_names_the_old_release_chain(store):
    run_ids = []

    def build(service: MigrationService) -> None:
        legacy(service)
        service.recover("adopt", NS, SID, actor="a", reason="r")
        run_ids.append(service.destination.start_workflow(
            StartWorkflow(NS, WID, "old-id", SCHEDULER_WORKFLOW_TYPE)).run_id)
    setup(store, build)
    refused(store, "resolve", NS, SID, *WHO, "--resolution", "source_kept",
            message="would make two owners")
    view = allowed(store, "resolve", NS, SID, *WHO, "--resolution", "destination_owns",
                   "--first-run-id", run_ids[0])
    assert (view["state"], view["destination_first_run_id"]) == ("completed", run_ids[0])
    verify_ok(store)


def test_usage_errors_and_json_errors(store):
    setup(store, parked_foreign)
    before = count(store)
    for args in (["rearm", NS, SID, "--reason", "r"],
                 ["abort", NS, SID, "--actor", "a"],
                 ["resolve", NS, SID, *WHO, "--resolution", "maybe"]):
        assert invoke(store, *args).exit_code == 2
    bad = invoke(store, "resolve", NS, SID, *WHO, "--resolution", "destination_owns")
    assert bad.exit_code == 1 and bad.stderr.startswith("error: invalid_argument: ")
    doc = json.loads(invoke(store, "adopt", NS, SID, *WHO, "--json").stdout)
    assert doc["error"]["code"] == "failed_precondition"
    assert count(store) == before
