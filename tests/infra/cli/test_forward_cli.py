"""``schedfence forward`` and its operator commands, on a simulator kept in the store: a
schedule rolled back to the simulated Temporal side is taken back, every answer in text and
JSON; bad input and refusals are one-line errors that write nothing."""
from __future__ import annotations

import json

from click.testing import CliRunner

from schedfence.domain.source.action import make_action
from schedfence.domain.source.spec import make_spec
from schedfence.infra.cli import cli
from schedfence.infra.application.service import open_service


def run(store: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--store", store, "--destination", f"sim+{store}", *args])
    return result.exit_code, result.output


def on_temporal(store: str) -> None:
    with open_service(store, f"sim+{store}") as svc:
        svc.create_schedule("ns", "s", notes="kept", spec=make_spec(intervals=[(60, 0)]),
                            action=make_action(workflow_type="W", task_queue="q",
                                               workflow_id="act"))
        svc.rollback("ns", "s", "R1")
        svc.run_until_idle(retry_for=0)


def test_forward_takes_the_schedule_back_and_reports_it(tmp_path):
    store = f"sqlite:///{tmp_path / 'f.db'}"
    on_temporal(store)
    code, text = run(store, "forward", "ns", "s", "--request-id", "F1", "--json")
    assert code == 0, text
    doc = json.loads(text)
    assert (doc["outcome"], doc["state"], doc["request_id"]) == ("accepted", "completed", "F1")
    code, text = run(store, "forward-status", "ns", "s", "F1")
    assert code == 0 and "completed" in text and "kept" in text
    code, text = run(store, "forward", "ns", "s", "--request-id", "F1")
    assert code == 0 and "forward already_completed" in text


def test_refusals_are_errors_that_write_nothing(tmp_path):
    store = f"sqlite:///{tmp_path / 'f.db'}"
    on_temporal(store)
    with open_service(store, f"sim+{store}") as svc:
        before = svc.event_count()
    code, text = run(store, "forward", "ns", "nope", "--request-id", "F1", "--json")
    assert code != 0 and "not_found" in text and "Traceback" not in text
    code, text = run(store, "forward-abort", "ns", "s", "F9", "--reason", "r", "--actor", "a")
    assert code != 0 and "not_found" in text
    code, text = run(store, "forward-take-over", "ns", "s", "F9", "--actor", "a")
    assert code != 0 and "Traceback" not in text
    with open_service(store, f"sim+{store}") as svc:
        assert svc.event_count() == before


def test_list_and_status_agree_after_a_forward(tmp_path):
    """After a forward the key's current incarnation is the one the forward created: ``list``
    (the projection's keys) and ``status`` (the key) show the same row, read by fresh
    processes and over HTTP (``/v1/schedules``)."""
    from tests.infra.cli.cli_runs import subprocess_cli
    from tests.infra.http.api import api_on

    store = f"sqlite:///{tmp_path / 'f.db'}"
    on_temporal(store)
    subprocess_cli(store, "list")  # the projection holds the rolled-back incarnation first
    code, text = run(store, "forward", "ns", "s", "--request-id", "F1")
    assert code == 0, text

    def fresh(*args: str) -> dict:
        done = subprocess_cli(store, *args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    listed = fresh("list")["schedules"]
    status = fresh("status", "ns", "s")
    assert len(listed) == 1 and status["schedule"]["incarnation"] == 2
    row = dict(listed[0])
    assert row.pop("migration_state") == (status["migration"] or {}).get("state")
    assert row == status["schedule"]
    assert (row["closed"], row["paused"], row["notes"]) == (False, False, "kept")
    with api_on(store) as api:
        assert api.read("/v1/schedules")["schedules"] == listed
        assert api.read("/v1/schedule", namespace="ns", schedule_id="s") == status
