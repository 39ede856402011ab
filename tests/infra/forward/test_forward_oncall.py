"""``oncall`` lists forward migrations that need an operator, with what each allows, and every
command it suggests runs as printed (on a copy of the store, the simulator kept in it).

Given a forward migration parked because someone deleted the Temporal schedule during the
handoff, when an operator reads ``oncall``, then it names the park, allows a take-over and an
abort, and each suggested command, run as printed, ends the migration."""
from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.spec import make_spec
from schedfence.infra.cli.commands import cli
from schedfence.infra.application.service import open_service

NS = "ns"


def _on_temporal(svc, sid: str) -> None:
    svc.create_schedule(NS, sid, spec=make_spec(intervals=[(3600, 1800)]), notes="n",
                        action=make_action(workflow_type="W", task_queue="q",
                                           workflow_id=f"act-{sid}"),
                        policies=make_policies(overlap="allow_all"))
    svc.rollback(NS, sid, f"R-{sid}")
    svc.run_until_idle(retry_for=0)
    assert svc.migration(NS, sid).state == "completed"


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``deleted``: parked deleted_elsewhere; ``stuck``: requested, no worker has moved it."""
    path = tmp_path_factory.mktemp("fwd-oncall") / "store.db"
    with open_service(f"sqlite:///{path}", "sim", worker_id="w1") as svc:
        for sid in ("deleted", "stuck"):
            _on_temporal(svc, sid)
        svc.forward(NS, "deleted", "F-deleted")
        worker = svc.forward_worker
        worker.crash_hook = lambda point: svc.destination.delete_schedule(NS, "deleted") \
            if point == "forward.create.after_append" else None
        [mid] = svc.open_forward_ids()
        worker.attempt(mid)
        assert svc.forward_state(NS, "deleted", "F-deleted").park_reason == "deleted_elsewhere"
        svc.forward(NS, "stuck", "F-stuck")  # recorded; no worker runs it
    return path


def run(path: Path, *args: str):
    return CliRunner().invoke(cli, ["--store", f"sqlite:///{path}", *args])


def forward_items(path: Path, stuck_after: str = "0") -> dict[str, dict]:
    result = run(path, "oncall", "--stuck-after", stuck_after, "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["items"] == []  # no rollback needs anyone
    return {i["migration"]["schedule_id"]: i for i in doc["forward"]}


def timeless(doc: dict) -> dict:
    """``doc`` without what changes as time passes (idle seconds)."""
    for item in doc["forward"]:
        del item["migration"]["idle_seconds"]
        item["actions"] = [re.sub(r"for \d+s", "for Ns", a) for a in item["actions"]]
    return doc


def commands(item: dict) -> list[list[str]]:
    return [shlex.split(line.split("schedfence ", 1)[1])
            for line in item["actions"] if "schedfence " in line]


def test_oncall_names_a_parked_and_a_stuck_forward_migration(scripted: Path) -> None:
    items = forward_items(scripted)
    parked, stuck = items["deleted"], items["stuck"]
    assert (parked["category"], parked["migration"]["park_reason"]) == ("parked",
                                                                         "deleted_elsewhere")
    assert parked["verdicts"]["abort"] == "allowed"
    assert parked["verdicts"]["take_over"].startswith("allowed")
    assert [c[0] for c in commands(parked)] == ["forward-take-over", "forward-abort"]
    assert (stuck["category"], stuck["migration"]["phase"]) == ("stuck", "requested")
    assert stuck["verdicts"]["take_over"].startswith("refused")
    assert [c[0] for c in commands(stuck)] == ["forward-abort"]
    # Not idle long enough: only the park needs anyone.
    assert set(forward_items(scripted, stuck_after="3600")) == {"deleted"}


def test_the_text_output_lists_them_with_whole_ids(scripted: Path) -> None:
    result = run(scripted, "oncall", "--stuck-after", "0")
    assert result.exit_code == 0, result.stderr
    with open_service(f"sqlite:///{scripted}", "sim") as svc:
        mid = svc.forward_state(NS, "deleted", "F-deleted").migration_id
    assert "forward migrations:" in result.stdout and mid in result.stdout
    assert "schedfence forward-take-over ns deleted F-deleted --actor YOU" in result.stdout


@pytest.mark.parametrize("sid", ["deleted", "stuck"])
def test_every_suggested_command_ends_the_migration(scripted: Path, tmp_path: Path,
                                                    sid: str) -> None:
    for n, args in enumerate(commands(forward_items(scripted)[sid])):
        copy = tmp_path / f"{n}.db"
        shutil.copy(scripted, copy)
        result = run(copy, "--destination", "sim", *args)
        assert result.exit_code == 0, (args, result.stderr)
        assert sid not in forward_items(copy)  # nothing left for an operator
        with open_service(f"sqlite:///{copy}", "sim") as svc:
            phase = svc.forward_state(NS, sid, f"F-{sid}").phase
            assert phase == ("completed" if args[0] == "forward-take-over" else "aborted")
            assert svc.verify() == []


def test_the_http_api_and_the_web_page_show_them_too(scripted: Path, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from schedfence.infra.http.app import create_app
    from tests.infra.http.api import bearer, tokens
    copy = tmp_path / "http.db"
    shutil.copy(scripted, copy)
    with open_service(f"sqlite:///{copy}", "sim") as svc:
        with TestClient(create_app(svc, tokens(), destination_label="sim", rate=0)) as client:
            doc = client.get("/v1/oncall", params={"stuck_after": 0},
                             headers=bearer("reader")).json()
            cli_doc = json.loads(run(copy, "oncall", "--stuck-after", "0", "--json").stdout)
            assert timeless(doc) == timeless(cli_doc)  # one document, CLI and HTTP
            page = client.get("/ui", params={"stuck_after": 0}, headers=bearer("reader"))
            assert page.status_code == 200, page.text
            mid = svc.forward_state(NS, "deleted", "F-deleted").migration_id
            assert f'data-forward="{mid}"' in page.text and "deleted_elsewhere" in page.text
