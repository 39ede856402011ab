"""A handover held busy on a real dev server (issue 45, item 3): once the create is receipted,
a proxy in front of the server stops passing what the worker sends (tests/stall_proxy.py), so
the settle's DescribeSchedule gets no answer until its deadline, as when the server's
scheduler workflow answered "Workflow is busy" for minutes. ``worker --until-idle`` says where
to look; ``schedfence oncall``, read from a fresh process, lists the migration stuck within
its (small) threshold with the settle's last error; released, the worker completes it and the
item is gone."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from schedfence.domain.source.action import make_action
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env  # noqa: F401
from tests.infra.cli.cli_runs import ROOT
from tests.stall_proxy import StallProxy

HOURLY = make_spec(intervals=[(3600, 0)])


def cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def stuck_items(env: dict, sid: str) -> list[dict]:
    done = cli(env, "oncall", "--json", "--stuck-after", "1")
    assert done.returncode == 0, done.stderr
    return [i for i in json.loads(done.stdout)["items"]
            if i["migration"]["schedule_id"] == sid and i["category"] == "stuck"]


def test_a_settle_the_server_holds_shows_in_oncall_with_its_error(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    server = temporal_env.server
    proxy = StallProxy((server.host, server.port))
    sid = f"held-{uuid.uuid4().hex[:8]}"
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    url = f"temporal://{proxy.target}/{NS}"
    env = dict(os.environ, SCHEDFENCE_STORE=store, SCHEDFENCE_DESTINATION=url)
    try:
        def hold_at_settle(label: str) -> None:
            if label == "settle.before_call":
                proxy.hold()  # the create is receipted: the server stops answering

        with open_service(store, url, worker_id="e2e", crash_hook=hold_at_settle) as svc:
            svc.create_schedule(NS, sid, spec=HOURLY, action=make_action(
                workflow_type="Report", task_queue="q-stall", workflow_id=f"act-{sid}"))
            assert svc.rollback(NS, sid, f"R-{sid}").outcome == "accepted"
            report = svc.run_until_idle(retry_for=0.0)
            assert not report.drained
            assert svc.migration(NS, sid).state == "receipted"
        assert proxy.held_chunks > 0

        done = cli(env, "worker", "--until-idle", "--retry-for", "0", "--json")
        assert done.returncode == 1, done.stdout
        doc = json.loads(done.stdout)
        assert doc["attention"]["blocked"] == 1 and doc["attention"]["drained"] is False
        assert doc["attention"]["see"] == "schedfence oncall"
        assert doc["error"]["code"] == "not_drained"

        deadline = time.monotonic() + 120
        while not (items := stuck_items(env, sid)) and time.monotonic() < deadline:
            time.sleep(0.5)
        (item,) = items
        stall = item["stall"]
        # A fresh worker first reads the cluster's id for the destination gate: the proxy may
        # hold that call before the settle's describe; either is the step that is stuck.
        assert stall["step"] in ("settle", "destination identity") and stall["failures"] >= 2
        assert stall["error"].startswith("DestinationUnavailable"), stall
        print("settle's last error:", stall["error"])
        assert f"last error: {stall['error']}" in item["actions"][0]
        text = cli(env, "oncall", "--stuck-after", "1")
        assert f"failed attempt(s) at {stall['step']}" in text.stdout

        proxy.release()
        done = cli(env, "worker", "--until-idle", "--retry-for", "30", "--json")
        assert done.returncode == 0, done.stdout
        assert json.loads(done.stdout)["attention"]["needs_operator"] is False
        assert stuck_items(env, sid) == []
        status = json.loads(cli(env, "status", NS, sid, "--json").stdout)
        assert status["migration"]["state"] == "completed"
    finally:
        proxy.stop()
