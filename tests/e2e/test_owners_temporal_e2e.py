"""The ownership audit on a real Temporal dev server: each drift made by hand with the
``temporal`` CLI (a handed-over schedule deleted, a schedule created beside a running source
and at a closed key, a handed-over schedule updated), found by ``schedfence owners`` from a
fresh process (exit codes, JSON, ``--deep``); then each resolution ``oncall`` prints, run as
printed against that server, leaves the next audit clean and the checker clean."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

from schedfence.domain.owners.classify import FAILING
from schedfence.domain.source.action import make_action
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import (NS, TemporalEnv, schedule_cli,  # noqa: F401
                                         temporal_env, wait_for)
from tests.infra.cli.cli_runs import ROOT
from tests.temporal_server import temporal_binary

HOURLY = make_spec(intervals=[(3600, 0)])


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "schedfence.infra.cli", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def audit(env: dict, *extra: str) -> tuple[int, dict]:
    done = cli(env, "owners", "--namespace", NS, "--json", *extra)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


def kinds(doc: dict, tag: str) -> dict[str, str]:
    return {r["schedule_id"].split("-")[0]: r["kind"] for r in doc["rows"]
            if r["schedule_id"].endswith(tag)}


def by_hand(env: TemporalEnv, sid: str) -> None:
    schedule_cli(env, "create", "--schedule-id", sid, "--interval", "1h", "--workflow-id",
                 f"hand-{sid}", "--task-queue", "q-hand", "--type", "Hand")


def run_as_printed(env: dict, command: str) -> None:
    words = shlex.split(command)
    program = [temporal_binary()] if words[0] == "temporal" else \
        [sys.executable, "-m", "schedfence.infra.cli"]
    done = subprocess.run(program + words[1:], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, (command, done.stdout, done.stderr)


def test_each_drift_made_by_hand_is_found_and_resolved_as_printed(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    env = dict(os.environ, SCHEDFENCE_STORE=store, SCHEDFENCE_DESTINATION=temporal_env.url)
    key = {name: f"{name}-{tag}" for name in ("handed", "gone", "both", "closed", "taken",
                                              "edited")}
    with open_service(store, temporal_env.destination, worker_id="e2e") as svc:
        for name, sid in key.items():
            svc.create_schedule(NS, sid, spec=HOURLY, action=make_action(
                workflow_type="Report", task_queue="q-owners", workflow_id=f"act-{sid}"))
        for name in ("handed", "gone", "edited"):
            assert svc.rollback(NS, key[name], f"R-{key[name]}").outcome == "accepted"
        svc.run_until_idle(retry_for=10.0)
        for name in ("closed", "taken"):
            svc.update_schedule(NS, key[name], delete=True)
    schedule_cli(temporal_env, "delete", "--schedule-id", key["gone"])
    for name in ("both", "closed", "taken"):
        by_hand(temporal_env, key[name])
    schedule_cli(temporal_env, "update", "--schedule-id", key["edited"], "--interval", "2h",
                 "--workflow-id", f"act-{key['edited']}", "--task-queue", "q-owners",
                 "--type", "Report")

    expected = {"handed": "none", "gone": "missing_at_destination", "both": "two_owners",
                "closed": "unexplained_at_destination", "taken": "unexplained_at_destination",
                "edited": "none"}
    code, doc = wait_for(lambda: audit(env), lambda r: kinds(r[1], tag) == expected, 30.0,
                         "the listing to show what was done by hand")
    assert code == 1 and doc["failing"] >= 4
    rows = {r["schedule_id"]: r for r in doc["rows"]}
    assert rows[key["handed"]]["owner"] == "temporal" and rows[key["handed"]]["next_run"]
    assert rows[key["gone"]]["owner"] == "none" and rows[key["gone"]]["migration_id"]
    code, deep = audit(env, "--deep")
    assert kinds(deep, tag) == dict(expected, edited="changed_at_destination")
    assert deep["calls"]["describe"] >= len(deep["rows"]) - 1

    oncall = cli(env, "oncall", "--json")
    assert oncall.returncode == 0, oncall.stderr
    drift = {d["schedule_id"].split("-")[0]: d for d in json.loads(oncall.stdout)["ownership"]
             if d["schedule_id"].endswith(tag)}
    assert set(drift) == {"gone", "both", "closed", "taken", "edited"}
    assert drift["edited"]["resolve"] == []  # informational
    address = temporal_env.server.target
    assert f"--address {address}" in drift["both"]["resolve"][0]
    # each resolution as printed: re-create, delete the one made by hand, or take it in
    for name, which in (("gone", 0), ("both", 0), ("closed", 0), ("taken", 1)):
        run_as_printed(env, drift[name]["resolve"][which])

    code, doc = audit(env)
    assert kinds(doc, tag) == {name: "none" for name in expected}, kinds(doc, tag)
    # what other tests' stores handed over in this namespace is drift to this store
    # (foreign_handover): the exit code follows it, and only it
    assert code == (1 if doc["failing"] else 0)
    assert all(r["kind"] == "foreign_handover" for r in doc["rows"] if r["kind"] in FAILING)
    owners = {r["schedule_id"].split("-")[0]: r["owner"] for r in doc["rows"]
              if r["schedule_id"].endswith(tag)}
    assert owners == {"handed": "temporal", "gone": "source", "both": "source",
                      "closed": "none", "taken": "source", "edited": "temporal"}
    assert [d for d in json.loads(cli(env, "oncall", "--json").stdout)["ownership"]
            if d["schedule_id"].endswith(tag)] == []
    verified = cli(env, "verify", "--json")
    assert verified.returncode == 0, verified.stdout


def test_a_handover_another_store_made_is_drift_not_native(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    """A schedule a rollback of another store handed over carries our memo: this store,
    which never knew its key, reports it ``foreign_handover`` (exit 1) with what to do, and
    a schedule made by hand beside it stays ``native``."""
    tag = uuid.uuid4().hex[:8]
    theirs, native = f"theirs-{tag}", f"native-{tag}"
    other = f"sqlite:///{tmp_path / 'other.db'}"
    with open_service(other, temporal_env.destination, worker_id="other") as svc:
        svc.create_schedule(NS, theirs, spec=HOURLY, action=make_action(
            workflow_type="Report", task_queue="q-owners", workflow_id=f"act-{theirs}"))
        assert svc.rollback(NS, theirs, f"R-{theirs}").outcome == "accepted"
        assert svc.run_until_idle(retry_for=10.0).drained
    by_hand(temporal_env, native)
    env = dict(os.environ, SCHEDFENCE_STORE=f"sqlite:///{tmp_path / 'fence.db'}",
               SCHEDFENCE_DESTINATION=temporal_env.url)
    code, doc = wait_for(lambda: audit(env), lambda r: len(kinds(r[1], tag)) == 2, 30.0,
                         "the listing to show both schedules")
    assert kinds(doc, tag) == {"theirs": "foreign_handover", "native": "native"}
    assert code == 1 and doc["failing"] >= 1
    row = next(r for r in doc["rows"] if r["schedule_id"] == theirs)
    assert (row["owner"], row["store"]) == ("temporal", "unknown")
    oncall = cli(env, "oncall", "--json")
    assert oncall.returncode == 0, oncall.stderr
    (drift,) = [d for d in json.loads(oncall.stdout)["ownership"]
                if d["schedule_id"].endswith(tag)]
    assert drift["kind"] == "foreign_handover" and drift["failing"]
    assert drift["resolve"] == [f"schedfence forward {NS} {theirs}"]
    assert "Find the store that made it" in drift["advice"]
    text = cli(env, "oncall")
    assert f"{NS}/{theirs} (foreign_handover" in text.stdout and "never delete" in text.stdout
    # the store that made it sees its own handover, no drift
    mine = dict(env, SCHEDFENCE_STORE=other)
    code, doc = audit(mine)
    assert kinds(doc, tag) == {"theirs": "none", "native": "native"}, doc
