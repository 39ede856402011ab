"""The ``schedfence`` CLI: commands end to end on a real store (a SQLite file and a PostgreSQL
schema), and the output and error contracts (text, ``--json``, one ``error:`` line, exit
codes). ``verify`` and the worker are in test_cli_verify_and_worker.py, the demo in
tests/infra/demo/test_demo.py."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from schedfence.infra.cli.commands import cli

from tests.infra.cli.cli_runs import (event_count, events_in, ok, ok_json, run,  # noqa: F401
                                      store, subprocess_cli)


# -- the main flow ---------------------------------------------------------------------------
def test_create_rollback_worker_status_shows_completed(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a", "--notes", "hello")
    out = ok(store, "rollback", "ns", "a")
    assert "rollback accepted" in out and "derived" in out
    assert "attempts: 1" in ok(store, "worker", "--until-idle")
    text = ok(store, "status", "ns", "a")
    lines = {line.strip().split("  ")[0]: line for line in text.splitlines()}
    assert "completed" in lines["state"] and "yes" in lines["closed"]
    doc = ok_json(store, "status", "ns", "a")
    assert doc["schedule"]["closed"] and doc["schedule"]["close_reason"] == "migrated"
    assert doc["migration"]["state"] == "completed"
    assert doc["migration"]["destination_first_run_id"]


def test_json_on_every_data_command(store: str) -> None:
    assert ok_json(store, "schedule", "create", "ns", "a", "--notes", "n1")["notes"] == "n1"
    assert ok_json(store, "schedule", "pause", "ns", "a")["paused"] is True
    assert ok_json(store, "schedule", "unpause", "ns", "a")["paused"] is False
    assert ok_json(store, "schedule", "notes", "ns", "a", "n2")["notes"] == "n2"
    assert ok_json(store, "schedule", "create", "ns", "gone", "--paused")["paused"] is True
    assert ok_json(store, "schedule", "delete", "ns", "gone")["close_reason"] == "deleted"
    ok_json(store, "schedule", "create", "ns", "b", "--notes", "keep")
    rolled = ok_json(store, "rollback", "ns", "a", "--request-id", "r-1")
    assert (rolled["outcome"], rolled["request_id"], rolled["request_id_origin"]) == \
        ("accepted", "r-1", "caller")
    ok_json(store, "rollback", "ns", "b")
    aborted = ok_json(store, "abort", "ns", "b", "--reason", "changed my mind", "--actor", "op")
    assert aborted["state"] == "aborted"
    worked = ok_json(store, "worker", "--until-idle")
    assert worked["attempts"] == 1 and worked["migrations"] == {"completed": 1, "aborted": 1}
    assert ok_json(store, "status", "ns", "b")["schedule"]["notes"] == "keep"  # restored
    rows = {r["schedule_id"]: r for r in ok_json(store, "list")["schedules"]}
    assert rows["a"]["migration_state"] == "completed" and rows["b"]["migration_state"] == \
        "aborted" and rows["gone"]["migration_state"] is None
    types = [e["short_type"] for e in ok_json(store, "history", "ns", "a")["events"]]
    assert types[-3:] == ["OwnershipAccepted", "ClosedByMigration", "SourceClosed"]
    assert ok_json(store, "verify") == {"ok": True, "events": events_in(store),
                                        "migrations": 2, "violations": []}


def test_history_text_lists_events_in_order(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    ok(store, "rollback", "ns", "a", "--request-id", "r-1")
    ok(store, "worker", "--until-idle")
    lines = ok(store, "history", "ns", "a").splitlines()
    assert lines[0].split() == ["POS", "TIME", "AGGREGATE", "TYPE", "FIELDS"]
    types = [line.split()[4] for line in lines[2:]]
    assert types == ["Created", "IncarnationStarted", "Created", "FencedForMigration",
                     "RequestIdAssigned", "StartClaimConsumed", "DestinationStartIssued",
                     "DestinationAnswered", "OwnershipAccepted", "ClosedByMigration",
                     "SourceClosed"]
    positions = [int(line.split()[0]) for line in lines[2:]]
    assert positions == sorted(positions)
    assert "request_id=r-1" in lines[2 + types.index("RequestIdAssigned")]


def test_list_text_has_one_row_per_schedule(store: str) -> None:
    ok(store, "worker", "--until-idle")  # creates the store: `list` only reads one that exists
    assert ok(store, "list").strip() == "no schedules"
    ok(store, "schedule", "create", "ns", "a")
    ok(store, "schedule", "create", "ns", "b", "--paused")
    ok(store, "rollback", "ns", "b")
    rows = [line.split() for line in ok(store, "list").splitlines()[2:]]
    assert rows == [["ns", "a", "1", "no", "no", "no", "-"],
                    ["ns", "b", "1", "yes", "no", "yes", "pending"]]


def test_env_var_names_the_store(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    result = CliRunner(env={"SCHEDFENCE_STORE": store}).invoke(cli, ["list", "--json"])
    assert result.exit_code == 0
    assert [r["schedule_id"] for r in json.loads(result.stdout)["schedules"]] == ["a"]


# -- errors ----------------------------------------------------------------------------------
BAD_INPUT = [
    (["schedule", "create", "", "x"], "invalid_argument"),
    (["schedule", "create", "ns", "x" * 1001], "invalid_argument"),
    (["rollback", "ns", "a\x01b"], "invalid_argument"),
    (["rollback", "ns", "a", "--request-id", ""], "invalid_argument"),
    (["rollback", "ns", "a", "--request-id", "r\nx"], "invalid_argument"),
    (["abort", "ns", "a", "--reason", "", "--actor", "op"], "invalid_argument"),
    (["rollback", "ns", "missing"], "not_found"),
    (["schedule", "pause", "ns", "missing"], "not_found"),
    (["status", "ns", "missing"], "not_found"),
    (["history", "ns", "missing"], "not_found"),
]


@pytest.mark.parametrize("args,code", BAD_INPUT)
def test_bad_input_is_one_stderr_line_and_writes_nothing(store: str, args: list[str],
                                                         code: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    before = event_count(store)
    result = run(store, *args)
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {code}: "), result.stderr
    assert event_count(store) == before


@pytest.mark.parametrize("args,code", BAD_INPUT)
def test_json_errors_are_json_objects(store: str, args: list[str], code: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    before = event_count(store)
    result = run(store, *args, "--json")
    assert result.exit_code == 1 and result.stderr == ""
    doc = json.loads(result.stdout)
    assert set(doc) == {"error"} and doc["error"]["code"] == code
    assert isinstance(doc["error"]["message"], str) and doc["error"]["message"]
    assert event_count(store) == before


@pytest.mark.parametrize("change", [["pause"], ["unpause"], ["notes", "x"], ["delete"]])
def test_fence_refuses_source_changes_while_pending(store: str, change: list[str]) -> None:
    ok(store, "schedule", "create", "ns", "a")
    ok(store, "rollback", "ns", "a")
    before = event_count(store)
    result = run(store, "schedule", change[0], "ns", "a", *change[1:])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: migration_pending: ")
    assert len(result.stderr.splitlines()) == 1
    assert event_count(store) == before


def test_other_domain_errors_keep_their_codes(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    assert run(store, "schedule", "create", "ns", "a").stderr.startswith(
        "error: already_exists: ")
    assert run(store, "abort", "ns", "a", "--reason", "r", "--actor", "op").stderr.startswith(
        "error: failed_precondition: ")
    ok(store, "rollback", "ns", "a", "--request-id", "X")
    assert run(store, "rollback", "ns", "a", "--request-id", "Y").stderr.startswith(
        "error: already_exists: ")


@pytest.mark.parametrize("url", ["postgresql://localhost", "mysql://x", "sqlite:///",
                                 "sqlite:////no/such/dir/x.db", ""])
def test_store_url_problems_are_invalid_argument(url: str) -> None:
    result = CliRunner().invoke(cli, ["--store", url, "list"])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: invalid_argument: ")


def test_a_file_that_is_not_a_store_is_invalid_argument(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_text("not a database\n" * 100)
    result = CliRunner().invoke(cli, ["--store", f"sqlite:///{junk}", "list", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["code"] == "invalid_argument"
    assert junk.read_text() == "not a database\n" * 100


def test_unexpected_exception_is_one_internal_line(store: str, monkeypatch) -> None:
    def boom(*_args, **_kwargs):
        raise RuntimeError("boom\nsecond line")

    ok(store, "schedule", "create", "ns", "a")
    monkeypatch.setattr("schedfence.infra.cli.listing.read_model_list", boom)
    result = run(store, "list")
    assert result.exit_code == 1
    assert result.stderr == "error: internal: RuntimeError: boom second line\n"
    doc = json.loads(run(store, "list", "--json").stdout)
    assert doc["error"]["code"] == "internal"


def test_usage_errors_exit_2(store: str) -> None:
    assert run(store, "rollback", "ns").exit_code == 2
    assert run(store, "worker", "--max-attempts", "0").exit_code == 2
    assert run(store, "no-such-command").exit_code == 2


def test_real_process_error_line_and_exit_code(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    before = event_count(store)
    proc = subprocess_cli(store, "rollback", "ns", "")
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == ["error: invalid_argument: schedule id is required"]
    assert proc.stdout == ""
    proc = subprocess_cli(store, "status", "ns", "missing", "--json")
    assert proc.returncode == 1 and proc.stderr == ""
    assert json.loads(proc.stdout)["error"]["code"] == "not_found"
    assert event_count(store) == before
