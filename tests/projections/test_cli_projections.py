"""``schedfence audit | stats | oncall | migrations | projection`` end to end: text, --json, and
the error contract (one ``error: <code>: <message>`` line, exit 1; usage errors exit 2)."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner
from eventsourcing.persistence import StoredEvent

from schedfence.infra.cli.commands import cli
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from tests.projections.histories import build

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def store(stores) -> str:
    url = stores.new()  # a SQLite file or a PostgreSQL schema (tests/conftest.py)
    build(url).close()
    return url


def run(store: str, *args: str):
    return CliRunner().invoke(cli, ["--store", store, *args])


def ok(store: str, *args: str) -> str:
    result = run(store, *args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def fails(store: str, *args: str, code: str) -> str:
    result = run(store, *args)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {code}: "), result.stderr
    return lines[0]


def test_audit_text_and_json(store: str) -> None:
    text = ok(store, "audit", "--schedule", "default/done")
    assert text.splitlines()[0].split() == ["POS", "TIME", "SCHEDULE", "AGGREGATE", "TYPE",
                                            "ACTOR", "REQUEST", "MIGRATION", "REASON"]
    assert "SourceClosed" in text and "alice" in text
    doc = json.loads(ok(store, "audit", "--request-id", "req-done", "--newest-first", "--json"))
    assert doc["entries"][0]["type"] == "SourceClosed"
    assert doc["entries"][-1]["type"] == "FencedForMigration" and not doc["truncated"]


def test_audit_limit_says_when_more_match(store: str) -> None:
    text = ok(store, "audit", "--actor", "w1", "--limit", "3")
    assert len([ln for ln in text.splitlines() if ln[:1].isdigit()]) == 3
    assert "more match" in text


def test_audit_migration_and_time_filters(store: str) -> None:
    doc = json.loads(ok(store, "migrations", "--state", "claimed", "--json"))
    mid = doc["migrations"][0]["migration_id"]
    entries = json.loads(ok(store, "audit", "--migration", mid, "--json"))["entries"]
    assert {e["migration_id"] for e in entries} == {mid}
    since, until = entries[2]["time"], entries[-1]["time"]
    ranged = json.loads(ok(store, "audit", "--migration", mid, "--since", since, "--until",
                           until, "--json"))["entries"]
    # Exact: one append's events can carry times out of log order (the migration is created
    # before the source is fenced, but the source's event is stored first).
    assert ranged == [e for e in entries if since <= e["time"] <= until]
    assert 0 < len(ranged) < len(entries)
    assert "no matching events" in ok(store, "audit", "--actor", "nobody")


@pytest.mark.parametrize("args,code,text", [
    (["audit", "--since", "last tuesday"], "invalid_argument", "not a time"),
    (["audit", "--schedule", "default/unknown"], "not_found", "default/unknown"),
    (["audit", "--schedule", "noslash"], "invalid_argument", "NAMESPACE/SCHEDULE_ID"),
    (["audit", "--migration", "xyz"], "invalid_argument", "not a UUID"),
    (["migrations", "--state", "bogus"], "invalid_argument", "unknown state"),
])
def test_bad_arguments_are_one_line_errors(store: str, args: list[str], code: str,
                                           text: str) -> None:
    assert text in fails(store, *args, code=code)


def test_a_limit_out_of_range_is_a_usage_error(store: str) -> None:
    result = run(store, "audit", "--limit", "0")
    assert result.exit_code == 2 and "--limit" in result.stderr


def test_bad_arguments_under_json_are_a_json_error(store: str) -> None:
    result = run(store, "audit", "--until", "soon", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["code"] == "invalid_argument"


def test_stats_table_and_json(store: str) -> None:
    text = ok(store, "stats").splitlines()
    assert text[0].split()[:3] == ["NAMESPACE", "PENDING", "CLAIMED"]
    assert text[-2].split() == ["(all)", "1", "1", "0", "2", "3", "1", "1", "9"]
    doc = json.loads(ok(store, "stats", "--json"))
    assert doc["by_namespace"]["payments"] == {"completed": 1}


def test_oncall_table_and_json(store: str) -> None:
    text = ok(store, "oncall")
    assert text.splitlines()[0].split()[:3] == ["KIND", "SCHEDULE", "MIGRATION"]
    assert "default/foreign (parked):" in text and "--request-id NEW" in text
    assert "default/pending" not in text  # not stuck yet under the default threshold
    doc = json.loads(ok(store, "oncall", "--stuck-after", "0", "--json"))
    kinds = {i["migration"]["schedule_id"]: i["category"] for i in doc["items"]}
    assert kinds["pending"] == "stuck" and kinds["legacy"] == "legacy"
    assert run(store, "oncall", "--stuck-after", "-5").exit_code == 2  # usage error


def test_projection_rebuild_and_status(store: str) -> None:
    rebuilt = json.loads(ok(store, "projection", "rebuild", "--json"))
    assert rebuilt["applied"] == rebuilt["log_position"] == rebuilt["projected_through"]
    status = json.loads(ok(store, "projection", "status", "--json"))
    assert status["tables"]["schedfence_proj_audit"] == status["log_position"]


def test_a_stopped_projection_is_a_one_line_error_naming_the_position(file_store_url: str,
                                                                        store_kind: str) -> None:
    url = file_store_url
    build(url).close()
    if store_kind == "sqlite":
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            db.execute("DELETE FROM stored_events WHERE rowid = 12")
            # Workers keep the projection current, so it already holds position 12: start the
            # projection afresh over the damaged log.
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                       "AND name LIKE 'schedfence_proj_%'").fetchall():
                db.execute(f"DROP TABLE {table}")
        line = fails(url, "stats", code="projection_gap")
        assert "position 12 is missing" in line
        return
    # PostgreSQL sequences leave holes where a save rolled back, so a hole cannot stop the
    # projection there (projections/runner.py); an event it cannot decode does, at its position.
    with open_service(url, SimulatedDestination()) as service:
        service.app.recorder.insert_events([StoredEvent(
            originator_id=uuid.uuid4(), originator_version=1,
            topic="schedfence.future.Thing", state=b"{}")])
        bad = service.event_count()
    line = fails(url, "stats", code="undecodable_event")
    assert f"log position {bad}" in line and f"stopped after position {bad - 1}" in line


def test_the_module_entry_point_has_the_commands(store: str) -> None:
    done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store, "audit",
                           "--schedule", "default/done", "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["entries"][0]["type"] == "Created"
