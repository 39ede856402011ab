"""Each migration a batch job requested names its job (``RequestIdAssigned`` v6 ``job_id``),
``audit --job ID`` keeps that job's migrations and ``--exclude-type`` drops event types, read
by a fresh ``schedfence`` process and over HTTP."""
from __future__ import annotations

import json

import pytest

from schedfence.domain.model import upcast
from schedfence.domain.forward.aggregate import ForwardMigration
from schedfence.domain.rollback.aggregate import Migration
from schedfence.infra.application.service import open_service

from tests.infra.cli.cli_runs import subprocess_cli

NS = "batch"


@pytest.fixture
def store(file_store_url: str) -> str:
    with open_service(file_store_url, "sim") as svc:
        for i in range(4):
            svc.create_schedule(NS, f"s{i}")
        svc.create_schedule(NS, "alone")
        svc.rollback(NS, "alone", "by-hand", actor="alice")
    return file_store_url


def _cli(store: str, *args: str) -> dict:
    done = subprocess_cli(store, "--destination", "sim", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_audit_by_job_keeps_the_jobs_migrations_only(store: str) -> None:
    _cli(store, "migrate", "--namespace", NS, "--to", "workflow", "--job-id", "j-pages",
         "--match", "s[01]", "--no-wait")  # one page: the bulk rollback
    _cli(store, "migrate", "--namespace", NS, "--to", "workflow", "--job-id", "j-rated",
         "--match", "s[23]", "--no-wait", "--rate", "100")  # one at a time
    for job, keys in (("j-pages", {"s0", "s1"}), ("j-rated", {"s2", "s3"})):
        entries = _cli(store, "audit", "--job", job, "--limit", "1000")["entries"]
        assert {e["schedule_id"] for e in entries} == keys
        created = [e for e in entries if e["type"] == "RequestIdAssigned"]
        assert len(created) == 2 and "FencedForMigration" in {e["type"] for e in entries}
    history = _cli(store, "history", NS, "s2")["events"]
    assigned = [e for e in history if e["short_type"] == "RequestIdAssigned"]
    assert [e["data"]["job_id"] for e in assigned] == ["j-rated"]
    alone = [e for e in _cli(store, "history", NS, "alone")["events"]
             if e["short_type"] == "RequestIdAssigned"]
    assert alone[0]["data"]["job_id"] is None  # asked by itself
    assert _cli(store, "audit", "--job", "no-such-job")["entries"] == []


def test_exclude_type_drops_each_given_type(store: str) -> None:
    every = _cli(store, "audit", "--schedule", f"{NS}/alone", "--limit", "1000")["entries"]
    kept = _cli(store, "audit", "--schedule", f"{NS}/alone", "--limit", "1000",
                "--exclude-type", "FencedForMigration",
                "--exclude-type", "schedfence.migration.RequestIdAssigned")["entries"]
    assert {e["type"] for e in every} >= {"FencedForMigration", "RequestIdAssigned"}
    assert [e for e in every if e["type"] not in ("FencedForMigration", "RequestIdAssigned")] \
        == kept


def test_narration_names_the_job(store: str) -> None:
    _cli(store, "migrate", "--namespace", NS, "--to", "workflow", "--job-id", "j9",
         "--match", "s0", "--no-wait")
    done = subprocess_cli(store, "history", NS, "s0", "--narrate")
    assert "rollback accepted by " in done.stdout and " for job j9, request id " in done.stdout


def test_older_migrations_read_as_asked_by_themselves() -> None:
    for owner, older in ((Migration.RequestIdAssigned, 5), (ForwardMigration.ForwardRequested, 2),
                         (Migration, 2), (ForwardMigration, 2)):
        stored: dict = {}
        upcast(owner, stored, older)
        assert stored.get("job_id", "missing") is None, owner


def test_audit_by_job_keeps_a_forward_jobs_migrations_too(tmp_path) -> None:
    from schedfence.infra.application.jobs import RunOptions, run_job
    from tests.infra.web import worlds
    url = f"sqlite:///{tmp_path / 'store.db'}"
    w = worlds.mixed(url)
    try:  # HANDED runs on Temporal: a forward job takes it back
        run_job(w.service, "fj", worlds.NS, "source", schedule_ids=[worlds.HANDED],
                options=RunOptions(actor="carol"))
        w.service.run_until_idle(retry_for=0)
    finally:
        w.service.close()
    done = subprocess_cli(url, "--destination", "sim", "audit", "--job", "fj", "--limit",
                          "1000", "--json")
    assert done.returncode == 0, done.stderr
    entries = json.loads(done.stdout)["entries"]
    assert entries and {e["schedule_id"] for e in entries} == {worlds.HANDED}
    assert "ForwardRequested" in {e["type"] for e in entries}
    assert len({e["migration_id"] for e in entries}) == 1  # that one forward migration
