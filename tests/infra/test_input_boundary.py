"""Issue 28, "Found" items 2, 4 and 7: each input that escaped as ``internal``, a 500 after a
write, or a schema-valid 400, now one refusal that writes nothing, on the CLI (each command a
fresh process on a SQLite file) and over HTTP (the app in process).

The bounds themselves are domain/bounds.py (tests/domain/test_bounds.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import pytest

from schedfence.domain.source.action import make_action
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.spec import IntervalSpec, ScheduleSpec, make_spec
from schedfence.infra.application import jobs
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from tests.helpers import NS
from tests.infra.cli.cli_runs import ROOT
from tests.infra.http.api import Api, api_on, assert_error, bearer, nothing_written

RUNS = ["--interval", "1m", "--workflow-type", "W", "--task-queue", "q"]


def cli(store: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                           "--destination", "sim", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def events_in(store: str) -> int:
    with open_service(store, SimulatedDestination()) as service:
        return service.event_count()


def refused(done: subprocess.CompletedProcess, code: str = "invalid_argument") -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, (done.stdout[-500:], done.stderr[-2000:])
    assert lines[0].startswith(f"error: {code}: "), lines
    return lines[0]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One store for the module: every command run on it is refused (or writes no event)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('boundary') / 'store.db'}"
    assert cli(url, "schedule", "create", NS, "a", *RUNS).returncode == 0
    return url


CLI_INPUTS = {
    "end past 9999 in UTC": (["--end", "9999-12-31T23:59:59-14:00"], "end: must be from"),
    "start before year 1 in UTC": (["--start", "0001-01-01T00:00:00+14:00"],
                                   "start: must be from"),
    "input nested 5000 deep": (["--input", "[" * 5000 + "]" * 5000], "input: "),
    "input nested 900 deep": (["--input", "[" * 900 + "]" * 900], "nested deeper than 64"),
    "lone surrogate key": (["--input", '{"\\ud800": 1}'], "lone surrogate U+D800"),
    "5000-digit integer": (["--input", "9" * 5000], "input: "),
    "integer past int64": (["--input", str(2**63)], "64-bit range"),
    "NaN": (["--input", "NaN"], "not finite"),
    "1e400": (["--input", "[1e400]"], "not finite"),
}


@pytest.mark.parametrize("name", list(CLI_INPUTS))
def test_each_bad_cli_input_is_one_refusal_that_writes_nothing(store: str, name: str) -> None:
    args, says = CLI_INPUTS[name]
    before = events_in(store)
    line = refused(cli(store, "schedule", "create", NS, "b", *RUNS, *args))
    assert says in line and "internal" not in line
    assert events_in(store) == before


def test_migrate_at_1e_300_per_second_leaves_nothing_fenced(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    for sid in ("a", "b"):
        assert cli(store, "schedule", "create", NS, sid, *RUNS).returncode == 0
    before = events_in(store)
    line = refused(cli(store, "migrate", "--namespace", NS, "--to", "workflow", "--job-id", "J",
                       "--rate", "1e-300/s"))
    assert "rate must be N/s with N from 0.001" in line
    assert events_in(store) == before
    listed = cli(store, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)["schedules"]
    assert {r["schedule_id"] for r in rows} == {"a", "b"}
    assert not any(r["migration_pending"] for r in rows), rows
    jobs_listed = cli(store, "job", "list", "--json")
    assert jobs_listed.returncode == 0 and json.loads(jobs_listed.stdout) == []
    # the smallest rate taken is accepted (a dry run: nothing written either)
    assert cli(store, "migrate", "--namespace", NS, "--to", "workflow", "--job-id", "J",
               "--rate", "0.001/s", "--dry-run", "--json").returncode == 0


def test_the_python_api_refuses_the_rate_before_the_job(tmp_path: Path) -> None:
    with open_service(f"sqlite:///{tmp_path / 's.db'}", SimulatedDestination()) as service:
        service.create_schedule(NS, "a")
        before = service.event_count()
        for rate in (1e-300, 0.0, -1.0, float("nan"), float("inf"), 10_001.0):
            with pytest.raises(InvalidArgument, match="rate"):
                jobs.run_job(service, "J", NS, "workflow",
                             options=jobs.RunOptions(rate=rate, wait=False))
        assert service.event_count() == before


def test_the_python_api_bounds_models_it_did_not_make(tmp_path: Path) -> None:
    """A caller of the Python API may build the models without make_spec / make_action:
    Program.check applies the same bounds before anything is written."""
    late = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-14)))
    action = make_action(workflow_type="W", task_queue="q", workflow_id="x")
    with open_service(f"sqlite:///{tmp_path / 's.db'}", SimulatedDestination()) as service:
        service.create_schedule(NS, "a", spec=make_spec(intervals=[(60, 0)]), action=action)
        before = service.event_count()
        for spec in (ScheduleSpec(intervals=(IntervalSpec(every=60),), end_at=late),
                     ScheduleSpec(intervals=(IntervalSpec(every=60),),
                                  start_at=datetime(1, 1, 1, tzinfo=timezone.utc))):
            with pytest.raises(InvalidArgument, match="must be from 0001-01-02"):
                service.create_schedule(NS, "x", spec=spec, action=action)
            with pytest.raises(InvalidArgument, match="must be from 0001-01-02"):
                service.backfill_schedule(NS, "a", spec.start_at or late, late)
        with pytest.raises(InvalidArgument, match="input: nested deeper than 64"):
            make_action(workflow_type="W", task_queue="q", workflow_id="x",
                        input=json.loads("[" * 900 + "]" * 900))
        assert service.event_count() == before


def test_describe_of_a_schedule_created_without_policies(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_service(url, SimulatedDestination()) as service:
        service.create_schedule(NS, "p", spec=make_spec(intervals=[(60, 0)]),
                                action=make_action(workflow_type="W", task_queue="q",
                                                   workflow_id="p"))
    done = cli(url, "schedule", "describe", NS, "p")
    assert done.returncode == 0, done.stderr
    assert "overlap" in done.stdout and "skip" in done.stdout


def test_a_tokens_entry_whose_role_is_a_list(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps([{"name": "x", "role": ["admin"],
                                   "secret": "0123456789abcdefgh"}]))
    done = cli(f"sqlite:///{tmp_path / 'never.db'}", "serve", "--tokens", str(tokens))
    assert "role must be one of" in refused(done)
    assert not (tmp_path / "never.db").exists()


# -- over HTTP ------------------------------------------------------------------------------------
@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with api_on(f"sqlite:///{tmp_path / 'api.db'}") as opened:
        yield opened


ACTION = {"workflow_type": "W", "task_queue": "q"}
SPEC = {"intervals": [{"every": 60}]}


def raw_post(api: Api, path: str, body: dict) -> object:
    """``body`` as JSON text with every non-ASCII character escaped, so a lone surrogate
    travels as ``\\udc80`` (the test client cannot encode one itself)."""
    return api.client.post(path, content=json.dumps(body),
                           headers={**bearer("admin"), "content-type": "application/json"})


SURROGATES = {
    "input": {"action": dict(ACTION, input="\udc80"), "spec": SPEC},
    "input key": {"action": dict(ACTION, input={"\udc80": 1}), "spec": SPEC},
    "memo key": {"action": dict(ACTION, memo={"\ud800": "x"}), "spec": SPEC},
    "memo value": {"action": dict(ACTION, memo={"k": ["\udfff"]}), "spec": SPEC},
    "search attribute": {"action": dict(ACTION, search_attributes={"\udc80": "x"}),
                         "spec": SPEC},
    "notes": {"notes": "a\udc80"},
    "schedule id": {"schedule_id": "s\udc80"},
}


@pytest.mark.parametrize("where", list(SURROGATES))
def test_a_lone_surrogate_over_http_is_refused_and_reads_still_work(api: Api,
                                                                    where: str) -> None:
    api.ok("/v1/schedule/create", {"namespace": NS, "schedule_id": "kept", "spec": SPEC,
                                   "action": ACTION})
    with nothing_written(api):
        answer = raw_post(api, "/v1/schedule/create",
                          {"namespace": NS, "schedule_id": "s", **SURROGATES[where]})
        assert answer.status_code in (400, 422), answer.text
        assert_error(answer, answer.status_code, "invalid_argument")
    assert [s["schedule_id"] for s in api.read("/v1/schedules")["schedules"]] == ["kept"]
    api.read("/v1/schedule/describe", namespace=NS, schedule_id="kept")
    page = api.client.get("/ui/schedule", params={"namespace": NS, "schedule": "kept"},
                          headers=bearer("reader"))
    assert page.status_code == 200


def test_http_bounds_answer_before_any_write(api: Api) -> None:
    api.ok("/v1/schedule/create", {"namespace": NS, "schedule_id": "s", "spec": SPEC,
                                   "action": ACTION})
    create = {"namespace": NS, "schedule_id": "t", "action": ACTION}
    with nothing_written(api):
        for bad in ({"end_at": "9999-12-31T23:59:59-14:00"},
                    {"start_at": "0001-01-01T00:00:00+14:00"}):
            assert_error(api.post("/v1/schedule/create", dict(create, spec=dict(SPEC, **bad))),
                         400, "invalid_argument")
        deep = json.loads("[" * 900 + "]" * 900)
        assert_error(api.post("/v1/schedule/create", dict(create, spec=SPEC,
                                                          action=dict(ACTION, input=deep))),
                     400, "invalid_argument")
        assert_error(raw_post(api, "/v1/schedule/create",
                              dict(create, spec=SPEC, action=dict(ACTION, input=[float("nan")]))),
                     400, "invalid_argument")
        assert_error(api.post("/v1/schedule/backfill", {
            "namespace": NS, "schedule_id": "s", "start": "0001-01-01T00:00:00+14:00",
            "end": "2020-01-01T00:00:00Z"}), 400, "invalid_argument")
        for rate in (1e-300, 0, 0.0009, 10_001):
            assert_error(api.post("/v1/migrate", {"namespace": NS, "to": "workflow",
                                                  "job_id": "J", "rate": rate}),
                         422, "invalid_argument")
        for strict in ({"retry_for": False}, {"retry_for": "1"}, {"max_attempts": True},
                       {"max_attempts": 1.5}):
            assert_error(api.post("/v1/worker/drain", strict, "operator"), 422,
                         "invalid_argument")
        for schema_valid_before in ({"schedule_id": ""}, {"namespace": " ns"}):
            assert_error(api.post("/v1/schedule/create", dict(create, **schema_valid_before)),
                         422, "invalid_argument")
    assert api.ok("/v1/worker/drain", {"retry_for": 0})["drained"] is True
