"""``schedfence demo`` end to end on a real store (a SQLite file and a PostgreSQL schema): every
scenario passes and is named with its verdict, the user's store is never touched, a store
that is not empty is refused, and a password never shows."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from click.testing import CliRunner

from schedfence.infra.cli.commands import cli

from tests import pgtools
from tests.infra.cli.cli_runs import event_count, events_in, ok, ok_json, store  # noqa: F401


# -- the demo ----------------------------------------------------------------------------------
def test_demo_json_every_scenario_passes(store: str) -> None:
    url = store
    result = CliRunner().invoke(cli, ["demo", "--store", url, "--json"])
    assert result.exit_code == 0, result.stdout
    doc = json.loads(result.stdout)
    assert doc["passed"] is True and doc["store"] == url
    assert [s["code"] for s in doc["scenarios"]] == \
        ["F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F11", "S1", "S2"]
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
    headings = [line.split()[0] for line in lines if line[:1] in ("F", "S")]
    assert headings == ["F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F11", "S1", "S2"]
    assert sum(line.startswith("  => OK, as the protocol requires: ") for line in lines) == 11
    assert any(line.startswith("invariants: OK (") for line in lines)
    assert lines[-1] == "demo: 11/11 scenarios match the protocol; PASS"
    s1 = lines[lines.index(next(ln for ln in lines if ln.startswith("S1 "))):]
    assert any("scheduler at +3 min: 3 action(s) started" in ln for ln in s1)
    assert any("while fenced: 0 started" in ln for ln in s1)


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
