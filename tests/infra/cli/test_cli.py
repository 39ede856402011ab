"""The ``schedfence`` CLI: commands end to end on a real store (a SQLite file and a PostgreSQL
schema), the output and error contracts (text, ``--json``, one ``error:`` line, exit codes),
the demo, and the simulator persisted beside the events so separate invocations share one
destination."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from eventsourcing.persistence import IntegrityError, StoredEvent

from schedfence.domain.ids import destination_workflow_id, schedule_aggregate_id
from schedfence.domain.schedule import Schedule
from schedfence.infra.cli.commands import cli
from schedfence.infra.service import MigrationService, open_service
from schedfence.infra.destination.simulator import SimulatedDestination, SqlSimState
from tests import pgtools

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def store(file_store_url: str) -> str:
    """A SQLite file or a PostgreSQL schema: every store test runs on both (tests/conftest.py)."""
    return file_store_url


def run(store: str, *args: str, env: dict | None = None):
    return CliRunner(env=env).invoke(cli, ["--store", store, *args])


def ok(store: str, *args: str) -> str:
    result = run(store, *args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def ok_json(store: str, *args: str) -> dict:
    return json.loads(ok(store, *args, "--json"))


def event_count(store: str) -> int:
    # An in-memory destination: counting must not touch the store's persisted simulator.
    with open_service(store, SimulatedDestination()) as service:
        return service.event_count()


def events_in(store: str) -> int:
    """How many events the store holds: counted, since PostgreSQL's log positions have holes
    wherever a save rolled back, so the last position can overstate it."""
    with open_service(store, SimulatedDestination()) as service:
        return sum(1 for _ in service.app.notifications())


def subprocess_cli(store: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store, *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, **kw)


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
    def boom(self):
        raise RuntimeError("boom\nsecond line")

    ok(store, "schedule", "create", "ns", "a")
    monkeypatch.setattr(MigrationService, "list_schedules", boom)
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


# -- verify ------------------------------------------------------------------------------------
def test_verify_clean_store_exits_0(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    ok(store, "rollback", "ns", "a")
    ok(store, "worker", "--until-idle")
    assert ok(store, "verify").strip() == \
        f"invariants: OK ({events_in(store)} events, 1 migrations checked)"


def test_verify_counts_events_not_log_positions(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    with open_service(store, SimulatedDestination()) as service:
        # A save that lost an optimistic-concurrency race, as a racing writer's would: on
        # PostgreSQL its sequence value is spent, a hole in the log positions.
        [first] = service.app.recorder.select_notifications(start=1, limit=1)
        with pytest.raises(IntegrityError):
            service.app.recorder.insert_events([StoredEvent(
                first.originator_id, first.originator_version, first.topic, first.state)])
    ok(store, "schedule", "create", "ns", "b")
    assert events_in(store) == 6
    doc = ok_json(store, "verify")
    assert (doc["ok"], doc["events"], doc["migrations"]) == (True, 6, 0)
    assert ok(store, "verify").strip() == "invariants: OK (6 events, 0 migrations checked)"


def test_verify_reports_violations_and_exits_1(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    ok(store, "rollback", "ns", "a")
    with open_service(store, SimulatedDestination()) as service:
        # Bypass the fence guard, as a buggy writer would: a pause while the fence is held.
        source = service.app.repository.get(schedule_aggregate_id("ns", "a", 1))
        source.trigger_event(Schedule.Paused, paused=False)
        service.app.save(source)
        bad_position = service.event_count()
    result = run(store, "verify")
    assert result.exit_code == 1
    assert "1 violation" in result.stdout
    assert any(line.strip().startswith("I1") and str(bad_position) in line
               for line in result.stdout.splitlines())
    doc = json.loads(run(store, "verify", "--json").stdout)
    assert doc["ok"] is False
    assert [(v["invariant"], bad_position in v["positions"]) for v in doc["violations"]] == \
        [("I1", True)]


# -- the worker --------------------------------------------------------------------------------
def test_simulator_is_shared_between_invocations(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    rid = ok_json(store, "rollback", "ns", "a")["request_id"]
    proc = subprocess_cli(store, "worker", "--until-idle", "--json")  # another process
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["migrations"] == {"completed": 1}
    doc = ok_json(store, "status", "ns", "a")
    assert doc["migration"]["state"] == "completed"
    state = SqlSimState(store)
    try:
        runs = SimulatedDestination(state).runs("ns", destination_workflow_id("a"))
    finally:
        state.dispose()
    assert [(r.first_execution_run_id, rid in r.request_ids) for r in runs] == \
        [(doc["migration"]["destination_first_run_id"], True)]


def test_worker_polls_until_ctrl_c_and_exits_cleanly(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    ok(store, "rollback", "ns", "a")
    proc = subprocess.Popen(
        [sys.executable, "-m", "schedfence.infra.cli", "--store", store, "worker", "--poll-interval",
         "0.2"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 30
        seen = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            seen.append(line)
            if " pass 1: " in line:
                break
        assert any("migrations: completed 1" in line for line in seen), seen
        assert ", destination sim (the simulator kept in the store), polling every 0.2s" \
            in seen[0], seen  # the banner names the destination
        time.sleep(0.2)  # a few idle passes, which print nothing
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert stdout.strip().startswith("worker stopped after")
    assert ok_json(store, "status", "ns", "a")["migration"]["state"] == "completed"


# -- the demo ----------------------------------------------------------------------------------
def test_demo_json_every_scenario_passes(store: str) -> None:
    url = store
    result = CliRunner().invoke(cli, ["demo", "--store", url, "--json"])
    assert result.exit_code == 0, result.stdout
    doc = json.loads(result.stdout)
    assert doc["passed"] is True and doc["store"] == url
    assert [s["code"] for s in doc["scenarios"]] == \
        ["F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F11"]
    for scenario in doc["scenarios"]:
        assert scenario["passed"] and not scenario["failed_checks"], scenario
        assert scenario["steps"] and scenario["observed"]
    assert doc["invariants"]["ok"] and doc["invariants"]["events"] == events_in(url)
    # The kept store is whole: ordinary commands read it and the checker agrees.
    assert ok_json(url, "verify")["ok"] is True
    assert ok_json(url, "status", "demo", "f1-foreign")["migration"]["park_reason"] == \
        "foreign_destination"


def test_demo_text_names_each_mode_and_its_verdict(store: str) -> None:
    result = CliRunner().invoke(cli, ["demo", "--store", store])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    headings = [line.split()[0] for line in lines if line[:1] == "F"]
    assert headings == ["F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F11"]
    assert sum(line.startswith("  => OK, as the protocol requires: ") for line in lines) == 9
    assert any(line.startswith("invariants: OK (") for line in lines)
    assert lines[-1] == "demo: 9/9 scenarios match the protocol; PASS"


def test_demo_never_touches_the_users_store(store: str, store_kind: str, tmp_path: Path,
                                           monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    user = store  # SCHEDFENCE_STORE names the user's store: a SQLite file or a schema
    result = CliRunner(env={"SCHEDFENCE_STORE": user}).invoke(cli, ["demo", "--json"])
    assert result.exit_code == 0
    if store_kind == "postgres":
        assert not pgtools.schema_exists(user)
    else:
        assert not Path(user.removeprefix("sqlite:///")).exists()
    assert json.loads(result.stdout)["store"].startswith(f"sqlite:///{tmp_path / 'tmp'}")


def test_demo_refuses_a_store_that_is_not_empty(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    before = event_count(store)
    result = CliRunner().invoke(cli, ["demo", "--store", store])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: invalid_argument: the demo needs an empty store")
    assert event_count(store) == before


def test_demo_on_postgres_never_shows_the_password(pg_database: str) -> None:
    url = pgtools.new_schema_url(pg_database).replace("postgres@", "postgres:s3cret-pw@")
    result = CliRunner().invoke(cli, ["demo", "--store", url, "--json"])
    assert result.exit_code == 0 and "s3cret-pw" not in result.stdout + result.stderr
    assert json.loads(result.stdout)["store"] == url.replace("s3cret-pw", "***")
    again = CliRunner().invoke(cli, ["demo", "--store", url])  # no longer empty
    assert again.stderr.startswith("error: invalid_argument: the demo needs an empty store")
    assert "s3cret-pw" not in again.stdout + again.stderr
    down = CliRunner().invoke(cli, ["demo", "--store", f"postgresql://postgres:s3cret-pw@"
                                    f"127.0.0.1:{pgtools.free_port()}/{pg_database}"])
    assert down.exit_code == 1 and down.stderr.startswith("error: store_unavailable: ")
    assert "s3cret-pw" not in down.stdout + down.stderr and "***" in down.stderr
