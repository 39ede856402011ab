"""``schedfence replicate`` and ``--destination sim+STORE_URL``: output, progress, --follow,
and the error contract (one ``error: <code>: <message>`` line, a JSON error object under
--json, URLs without their password)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

from schedfence.domain.ids import destination_workflow_id
from schedfence.infra.cli import replicate as cli_replicate
from schedfence.infra.cli.commands import cli
from schedfence.infra.adapters.destination.shared_sim import SharedSimDestination
from tests import pgtools
from tests.replica_helpers import databases, events, populate, raw_position

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def dbs() -> Iterator[list[str]]:
    yield from databases("sf_repcli_active", "sf_repcli_standby")


@pytest.fixture
def pair(tmp_path: Path) -> tuple[str, str]:
    source = f"sqlite:///{tmp_path}/active.db"
    populate(source, 2)
    return source, f"sqlite:///{tmp_path}/standby.db"


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_copies_and_prints_counts_and_positions(pair: tuple[str, str]) -> None:
    source, standby = pair
    text = invoke("replicate", "--from", source, "--to", standby)
    assert text.exit_code == 0, text.stderr
    total = len(events(source))
    assert f"replicated {total} events" in text.stdout
    assert f"source position 0 -> {total} (source head {total}, caught up)" in text.stdout
    again = invoke("replicate", "--from", source, "--to", standby, "--json")
    doc = json.loads(again.stdout)
    assert (doc["copied"], doc["from_position"], doc["position"]) == (0, total, total)
    assert doc["caught_up"] is True and doc["source_log"].startswith("replica-of:")
    assert events(standby) == events(source)


def test_a_refusal_is_one_error_line_or_a_json_error(pair: tuple[str, str]) -> None:
    source, standby = pair
    populate(standby, 1, prefix="own")  # the standby was used as an active store
    text = invoke("replicate", "--from", source, "--to", standby)
    assert text.exit_code == 1 and text.stdout == ""
    assert text.stderr.startswith("error: failed_precondition: the standby")
    assert len(text.stderr.splitlines()) == 1
    as_json = invoke("replicate", "--from", source, "--to", standby, "--json")
    assert as_json.exit_code == 1
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "failed_precondition" and "written only by its follower" in \
        error["message"]


@pytest.mark.parametrize("side", ["--from", "--to"])
def test_an_unreachable_store_is_named_without_its_password(pair: tuple[str, str],
                                                            side: str) -> None:
    source, standby = pair
    down = "postgresql://fence:s3cret@127.0.0.1:1/nowhere"
    args = ["--from", down, "--to", standby] if side == "--from" else \
        ["--from", source, "--to", down]
    for extra in ([], ["--json"]):
        result = invoke("replicate", *args, *extra)
        shown = result.stdout + result.stderr
        assert result.exit_code == 1 and "s3cret" not in shown
        assert "store_unavailable" in shown and "fence:***@127.0.0.1:1/nowhere" in shown


def test_bad_arguments_are_invalid_argument(pair: tuple[str, str], tmp_path: Path) -> None:
    source, standby = pair
    (tmp_path / "junk.db").write_text("not a database")
    cases = {
        ("--from", source, "--to", source): "same store",
        ("--from", source, "--to", "sqlite:///:memory:"): "in memory",
        ("--from", f"sqlite:///{tmp_path}/missing.db", "--to", standby): "does not exist",
        ("--from", f"sqlite:///{tmp_path}/junk.db", "--to", standby): "not a database",
        ("--from", "mysql://u:pw@h/db", "--to", standby): "unsupported store URL",
    }
    for args, words in cases.items():
        result = invoke("replicate", *args)
        assert result.exit_code == 1, args
        assert result.stderr.startswith("error: invalid_argument: ") and words in \
            result.stderr, (args, result.stderr)
        assert "pw@" not in result.stderr


def test_long_copies_print_progress_lines(dbs: list[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    source, standby = pgtools.new_schema_url(dbs[0]), pgtools.new_schema_url(dbs[1])
    populate(source, 4)
    monkeypatch.setattr(cli_replicate, "PROGRESS_EVERY", 10)
    result = invoke("replicate", "--from", source, "--to", standby, "--batch-size", "5")
    assert result.exit_code == 0, result.stderr
    progress = [line for line in result.stdout.splitlines() if " copied " in line]
    assert len(progress) >= len(events(source)) // 10 - 1 >= 3


def test_follow_keeps_copying_until_interrupted(dbs: list[str]) -> None:
    source, standby = pgtools.new_schema_url(dbs[0]), pgtools.new_schema_url(dbs[1])
    populate(source, 1)
    proc = subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", "replicate", "--from", source,
                             "--to", standby, "--follow", "--poll-interval", "0.05",
                             "--json"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        for round_ in range(2):
            populate(source, 1, prefix=f"round{round_}-")
            wanted = len(events(source))
            deadline = time.monotonic() + 20
            while raw_position(standby) < wanted and time.monotonic() < deadline:
                time.sleep(0.02)
            assert events(standby) == events(source)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[-1] == {"event": "stopped", "copied": len(events(source))}
    assert [doc["event"] for doc in lines[:-1]] == ["copied"] * (len(lines) - 1)
    assert lines[-2]["position"] == lines[-2]["source_head"]


# -- --destination sim+STORE_URL ------------------------------------------------------------------
def test_two_stores_share_a_destination_kept_in_a_third(tmp_path: Path) -> None:
    dest_url = f"sim+sqlite:///{tmp_path}/dest.db"
    for name in ("a", "b"):
        store = f"sqlite:///{tmp_path}/{name}.db"
        for args in (["schedule", "create", "ns", name], ["rollback", "ns", name],
                     ["worker", "--until-idle"]):
            result = invoke("--store", store, "--destination", dest_url, *args)
            assert result.exit_code == 0, result.stderr
    dest = SharedSimDestination(dest_url)
    try:
        assert [len(dest.chains("ns", destination_workflow_id(n))) for n in "ab"] == [1, 1]
    finally:
        dest.close()
    assert "sim+STORE_URL" in invoke("--help").stdout


def test_a_bad_shared_destination_is_refused_clearly(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/a.db"
    memory = invoke("--store", store, "--destination", "sim+sqlite:///:memory:", "schedule",
                    "create", "ns", "a")
    assert memory.exit_code == 1 and "error: invalid_argument: " in memory.stderr
    down = invoke("--store", store, "--destination",
                  "sim+postgresql://fence:s3cret@127.0.0.1:1/dest", "schedule", "create",
                  "ns", "a", "--json")
    assert down.exit_code == 1 and "s3cret" not in down.stdout + down.stderr
    assert json.loads(down.stdout)["error"]["code"] == "store_unavailable"
    worker = invoke("--destination", "sim+postgresql://fence:s3cret@127.0.0.1:1/dest",
                    "destination-worker")
    assert worker.exit_code == 1 and "s3cret" not in worker.stderr
