"""Safe defaults: no silent simulator, and read-only commands create nothing.

A user who forgets ``--destination`` on a production store must get a one-line error that says
how to choose, not a simulator that "migrates" the schedules and closes the real sources. And a
command that only reads (or changes what is there) must not create a store that does not exist.
"""
from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from schedfence.domain.errors import InvalidArgument
from schedfence.infra.cli.commands import cli
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.store.eventstore import parse_store_url

NEEDS_DESTINATION = [
    ("schedule", "create", "ns", "a"), ("rollback", "ns", "a"), ("worker", "--until-idle"),
    ("recover", "rearm", "ns", "a", "--actor", "op", "--reason", "r"),
    ("promote", "--actor", "op", "--reason", "r"),
]
READS_EXISTING = [
    ("status", "ns", "a"), ("list",), ("history", "ns", "a"), ("verify",), ("audit",),
    ("stats",), ("oncall",), ("migrations",), ("projection", "status"),
    ("projection", "rebuild"), ("schedule", "pause", "ns", "a"),
    ("schedule", "notes", "ns", "a", "x"), ("abort", "ns", "a", "--reason", "r", "--actor", "o"),
    ("replay", "ns", "a"),
]


def run(store: str, *args: str, destination: str | None = None):
    env = {"SCHEDFENCE_DESTINATION": destination}  # None: unset, as on a fresh shell
    return CliRunner(env=env).invoke(cli, ["--store", store, *args])


def one_error(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, (result.stdout, result.stderr)
    return lines[0]


def store_exists(url: str) -> bool:
    store = parse_store_url(url)
    if store.pg is None:
        return Path(store.path).exists()
    with psycopg.connect(host=store.pg.host, port=store.pg.port, user=store.pg.user,
                         dbname=store.pg.dbname, autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                            (store.pg.schema,)).fetchone() is not None


@pytest.mark.parametrize("args", NEEDS_DESTINATION, ids=lambda a: " ".join(a[:2]))
def test_a_command_that_needs_a_destination_refuses_without_one(file_store_url, args):
    line = one_error(run(file_store_url, *args))
    assert line.startswith("error: invalid_argument: no destination chosen: pass --destination "
                           "sim (the simulator kept in the store, for trials)"), line
    assert "temporal://HOST:PORT/NAMESPACE" in line and "SCHEDFENCE_DESTINATION" in line
    assert not store_exists(file_store_url)  # nothing was created on the refusal


def test_an_unknown_destination_is_refused_before_the_store_is_opened(file_store_url):
    line = one_error(run(file_store_url, "schedule", "create", "ns", "a", destination="simx"))
    assert line.startswith("error: invalid_argument: destination must be sim ")
    assert not store_exists(file_store_url)


@pytest.mark.parametrize("args", READS_EXISTING, ids=lambda a: " ".join(a[:2]))
def test_a_command_on_a_store_that_does_not_exist_creates_nothing(file_store_url, args):
    line = one_error(run(file_store_url, *args, destination="sim"))
    assert line.startswith("error: invalid_argument: store "), line
    assert "never creates one" in line
    assert not store_exists(file_store_url)


def test_reads_need_no_destination_once_the_store_exists(file_store_url):
    assert run(file_store_url, "schedule", "create", "ns", "a", destination="sim").exit_code == 0
    status = run(file_store_url, "status", "ns", "a", "--json")
    assert status.exit_code == 0, status.stderr
    assert json.loads(status.stdout)["schedule"]["schedule_id"] == "a"
    paused = run(file_store_url, "schedule", "pause", "ns", "a")
    assert paused.exit_code == 0, paused.stderr
    verified = run(file_store_url, "verify", "--json")
    assert json.loads(verified.stdout)["ok"] is True


def test_the_rollback_and_worker_banners_name_the_destination(file_store_url):
    assert run(file_store_url, "schedule", "create", "ns", "a", destination="sim").exit_code == 0
    text = run(file_store_url, "rollback", "ns", "a", destination="sim").stdout
    assert text.splitlines()[-1].split(None, 1) == [
        "destination", "sim (the simulator kept in the store)"]
    doc = json.loads(run(file_store_url, "worker", "--until-idle", "--json",
                         destination="sim").stdout)
    assert doc["destination"] == "sim (the simulator kept in the store)"
    assert doc["migrations"] == {"completed": 1}
    summary = run(file_store_url, "worker", "--until-idle", destination="sim").stdout
    assert summary.splitlines()[0] == "destination: sim (the simulator kept in the store)"


def test_a_shared_simulator_is_named_without_its_password(file_store_url, tmp_path):
    shared = f"sim+sqlite:///{tmp_path / 'shared.db'}"
    assert run(file_store_url, "schedule", "create", "ns", "a", destination=shared).exit_code == 0
    doc = json.loads(run(file_store_url, "rollback", "ns", "a", "--json",
                         destination=shared).stdout)
    assert doc["destination"] == shared


def test_open_service_refuses_without_a_destination_and_creates_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'fence.db'}"
    with pytest.raises(InvalidArgument, match="open_service needs a destination: sim "):
        open_service(url)
    with pytest.raises(InvalidArgument, match="destination must be sim "):
        open_service(url, "temporal:/nowhere")
    assert not (tmp_path / "fence.db").exists()
    with open_service(url, "sim") as svc:  # chosen: the simulator kept in the store
        svc.create_schedule("ns", "a")
        svc.rollback("ns", "a")
        assert svc.run_until_idle().drained
        assert svc.migration("ns", "a").state == "completed"
