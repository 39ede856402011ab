"""A stuck handover is not silent (issue 45, item 3): a migration whose attempts keep failing
(here the boundary's settle, answered busy by a destination double, as the server's scheduler
workflow answered "Workflow is busy") shows in ``schedfence oncall`` read from a fresh process
once it has made no progress for the threshold, with its last error and what to do; the gauge
counts it; ``worker`` and ``migrate`` say where to look when they leave anything for an
operator. The real server's case: tests/e2e/test_temporal_stall_e2e.py."""
from __future__ import annotations

import json
import time

from schedfence.domain.source.action import make_action
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.sim_sql import SqlSimState
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.adapters.observability.metrics import render_metrics
from schedfence.infra.application.service import open_service

from tests.helpers import NS, start_foreign
from tests.infra.cli.cli_runs import ok, store, subprocess_cli  # noqa: F401

HOURLY = make_spec(intervals=[(3600, 0)])


def _receipted_and_settle_busy(store: str, sid: str = "busy") -> SimulatedDestination:
    """A rollback whose create was receipted and whose settle the destination keeps
    refusing: the drain gives up (not drained), the migration stays ``receipted``. The
    destination double, still refusing."""
    dest = SimulatedDestination()
    dest.inject("settle", "unavailable", times=10_000)
    with open_service(store, dest, worker_id="w") as svc:
        svc.create_schedule(NS, sid, spec=HOURLY, action=make_action(
            workflow_type="Report", task_queue="q", workflow_id=f"act-{sid}"))
        svc.rollback(NS, sid, request_id=f"req-{sid}")
        report = svc.run_until_idle(retry_for=0.3)
        assert not report.drained and len(report.blocked) == 1
        assert svc.migration(NS, sid).state == "receipted"
    return dest


def _oncall(store: str, *args: str) -> dict:
    done = subprocess_cli(store, "oncall", "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_settle_held_busy_shows_in_oncall_with_its_last_error(store: str) -> None:
    _receipted_and_settle_busy(store)
    with open_service(store, SimulatedDestination(), worker_id="r") as svc:
        mid = svc.migration(NS, "busy").migration_id
    # under the threshold: nothing yet
    assert [i for i in _oncall(store, "--stuck-after", "3600")["items"]] == []
    deadline = time.monotonic() + 120
    while True:  # past a 1 s threshold (however slow the machine): listed
        items = _oncall(store, "--stuck-after", "1")["items"]
        if items or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    (item,) = items
    assert item["category"] == "stuck" and item["migration"]["migration_id"] == mid
    stall = item["stall"]
    assert stall["step"] == "settle" and stall["failures"] >= 1
    assert stall["error"] == "DestinationUnavailable: settle: unavailable"
    assert stall["stalled_seconds"] >= 0
    assert "last error: DestinationUnavailable: settle: unavailable" in item["actions"][0]
    assert "scheduler workflow is busy" in item["actions"][0]
    text = subprocess_cli(store, "oncall", "--stuck-after", "1")
    assert text.returncode == 0 and "failed attempt(s) at settle" in text.stdout
    # the gauge, from a service of its own
    with open_service(store, SimulatedDestination(), worker_id="m") as svc:
        body = render_metrics(svc.views, svc.app, svc.destination,
                              stuck=lambda: svc.stuck_counts(1.0), stuck_after=1.0)[0].decode()
        assert 'schedfence_oncall_stuck{kind="rollback"} 1.0' in body
        assert "schedfence_stuck_after_seconds 1.0" in body
        body = render_metrics(svc.views, svc.app, svc.destination,
                              stuck=lambda: svc.stuck_counts(3600.0))[0].decode()
        assert 'schedfence_oncall_stuck{kind="rollback"} 0.0' in body


def test_once_the_settle_goes_through_the_stall_no_longer_shows(store: str) -> None:
    dest = _receipted_and_settle_busy(store, "heals")
    with open_service(store, dest, worker_id="w") as svc:
        assert svc.oncall(0.0)[0].stall is not None
        dest._scripted["settle"].clear()  # the server answers again
        assert svc.run_until_idle(retry_for=0.3).drained
        assert svc.migration(NS, "heals").state == "completed"
    assert _oncall(store, "--stuck-after", "0")["items"] == []
    # a row left behind (pruned only by a drain) never shows once an event followed it
    with open_service(store, dest, worker_id="w") as svc:
        assert svc.stall_rows() == {}


def test_worker_says_where_to_look_when_it_leaves_a_park(store: str) -> None:
    ok(store, "schedule", "create", NS, "held")
    state = SqlSimState(store)
    try:
        start_foreign(SimulatedDestination(state), "held")
    finally:
        state.dispose()
    ok(store, "rollback", NS, "held")
    done = subprocess_cli(store, "worker", "--until-idle", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["attention"] == {"parked": 1, "blocked": 0, "drained": True,
                                "needs_operator": True, "see": "schedfence oncall"}
    text = subprocess_cli(store, "worker", "--until-idle")
    assert text.returncode == 0, text.stderr
    assert "1 parked: see `schedfence oncall`" in text.stdout
    job = subprocess_cli(store, "migrate", "--namespace", NS, "--schedule-id", "held",
                         "--to", "workflow", "--job-id", "j1", "--json")
    found = json.loads(job.stdout)["attention"]  # its schedule is held by the parked one
    assert found["needs_operator"] is True and found["blocked"] == 1, job.stdout
    assert found["job_status"] == "schedfence job status --job-id j1"
    text = subprocess_cli(store, "migrate", "--namespace", NS, "--schedule-id", "held",
                          "--to", "workflow", "--job-id", "j1", "--blocked-rounds", "0")
    assert "1 blocked: see `schedfence oncall`" in text.stdout, text.stdout


def test_a_worker_that_leaves_nothing_says_nothing(store: str) -> None:
    ok(store, "schedule", "create", NS, "fine")
    ok(store, "rollback", NS, "fine")
    done = subprocess_cli(store, "worker", "--until-idle")
    assert done.returncode == 0, done.stderr
    assert "schedfence oncall" not in done.stdout
    doc = json.loads(subprocess_cli(store, "worker", "--until-idle", "--json").stdout)
    assert doc["attention"]["needs_operator"] is False


def test_the_server_shows_it_at_its_own_threshold(store: str) -> None:
    """``serve --stuck-after``: GET /v1/oncall without ``stuck_after``, the web page and the
    gauge use the server's threshold; a request's own still wins."""
    from tests.infra.http.api import api_on, bearer
    _receipted_and_settle_busy(store, "served")
    with api_on(store, stuck_after=1.0) as api:
        deadline = time.monotonic() + 120
        while not (items := api.read("/v1/oncall")["items"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        (item,) = items
        assert item["stall"]["error"] == "DestinationUnavailable: settle: unavailable"
        assert api.read("/v1/oncall")["stuck_after_seconds"] == 1.0
        assert api.read("/v1/oncall", stuck_after=3600)["items"] == []
        page = api.client.get("/ui/", headers=bearer("reader"))
        assert page.status_code == 200
        assert "DestinationUnavailable: settle: unavailable" in page.text
        assert "failed attempt(s) at settle" in page.text
        metrics = api.get("/metrics", "metrics").text
        assert 'schedfence_oncall_stuck{kind="rollback"} 1.0' in metrics
        assert "schedfence_stuck_after_seconds 1.0" in metrics


def test_a_forward_migration_whose_describe_keeps_failing_shows_with_its_error(
        store: str) -> None:
    dest = SimulatedDestination()
    with open_service(store, dest, worker_id="w") as svc:
        svc.create_schedule(NS, "fwd", spec=HOURLY, action=make_action(
            workflow_type="Report", task_queue="q", workflow_id="act-fwd"))
        svc.rollback(NS, "fwd", "R-fwd")
        assert svc.run_until_idle(retry_for=0).drained
        svc.forward(NS, "fwd", "F-fwd")
        dest.inject("describe", "unavailable", times=10_000)
        assert not svc.run_until_idle(retry_for=0.3).drained
    deadline = time.monotonic() + 120
    while not (forward := _oncall(store, "--stuck-after", "1")["forward"]) and \
            time.monotonic() < deadline:
        time.sleep(0.2)
    (item,) = forward
    assert item["category"] == "stuck" and item["stall"]["direction"] == "forward"
    assert item["stall"]["step"] == "describe"
    assert "unavailable" in item["stall"]["error"]
    assert item["actions"][0].startswith("no progress:")


def test_a_job_whose_run_stopped_shows_with_the_command_that_resumes_it(store: str) -> None:
    """A job's runner is ``migrate`` itself: one that stopped before deciding its selection
    is listed (from a fresh process) with the rerun that resumes it, which, run as printed,
    finishes the job and clears the item."""
    import shlex
    import sys

    from schedfence.domain.job import make_selection
    from schedfence.infra.application.job_record import open_job
    from tests.infra.cli.cli_runs import ROOT
    import subprocess
    for sid in ("a b", "c"):
        ok(store, "schedule", "create", NS, sid)
    with open_service(store, "sim", worker_id="w") as svc:  # defined, then the run stopped
        open_job(svc, "j-stopped", make_selection(NS, "workflow", ["a b", "c"]), "alice",
                 False)
    assert _oncall(store, "--stuck-after", "3600")["jobs"] == []
    (job,) = _oncall(store, "--stuck-after", "0")["jobs"]
    assert job["job_id"] == "j-stopped" and job["decided"] == 0
    rerun = job["actions"][1].split(": ", 1)[1]
    assert rerun == (f"schedfence migrate --namespace {NS} --to workflow --job-id j-stopped "
                     "--schedule-id 'a b' --schedule-id c")
    text = subprocess_cli(store, "oncall", "--stuck-after", "0")
    assert "job j-stopped" in text.stdout and rerun in text.stdout
    from tests.infra.http.api import api_on, bearer
    with api_on(store, stuck_after=0.0) as api:  # the server's threshold: 0
        assert [j["job_id"] for j in api.read("/v1/oncall")["jobs"]] == ["j-stopped"]
        page = api.client.get("/ui/", headers=bearer("reader"))
        assert "job j-stopped" in page.text and "resume it" in page.text
        assert 'schedfence_oncall_stuck{kind="job"} 1.0' in \
            api.get("/metrics", "metrics").text
    done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                           *shlex.split(rerun)[1:]], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _oncall(store, "--stuck-after", "0")["jobs"] == []
    with open_service(store, "sim", worker_id="m") as svc:
        assert svc.stuck_counts(0.0)["job"] == 0
