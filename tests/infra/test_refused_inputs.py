"""Bad input that used to get through (issue 45, item 9), each refused in one line and writing
nothing: over HTTP (4xx), on the CLI from a fresh process (``invalid_argument``, exit 1) and
through the Python API, on SQLite and PostgreSQL where a store is involved.

- ``audit`` filters holding a NUL (``actor``, ``request_id``, ``type``, ``exclude_type``):
  PostgreSQL's text refuses NUL, so the query died with a ``DataError`` (500);
- an unknown ``audit`` event type: an empty page, where docs/operators.md promises 400;
- an action workflow id under Temporal's reserved ``temporal-sys-`` prefix
  (``temporal-sys-scheduler:x`` collides with a Temporal Schedule's own workflow ids);
- a tokens file nested 5,000 deep (``RecursionError``) or with an unknown field.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schedfence.domain.errors import InvalidArgument
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from tests.helpers import NS
from tests.infra.cli.cli_runs import ROOT, events_in, subprocess_cli
from tests.infra.http.api import TOKEN_LINES, api_on, assert_error

NUL_FILTERS = ("actor", "request_id", "type", "exclude_type")


def _refused_line(done: subprocess.CompletedProcess, says: str) -> None:
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: invalid_argument: "), done.stderr
    assert says in lines[0], lines[0]


# -- audit's filters -------------------------------------------------------------------------
@pytest.mark.parametrize("field", NUL_FILTERS)
def test_an_audit_filter_holding_nul_is_refused_over_http(file_store_url: str,
                                                          field: str) -> None:
    with api_on(file_store_url) as api:
        api.ok("/v1/schedule/create", {"namespace": NS, "schedule_id": "s"})
        value = "Created\x00" if "type" in field else "ops\x00x"
        answer = api.get("/v1/audit", **{field: value})
        assert 400 <= answer.status_code < 500, answer.text
        assert answer.json()["error"]["code"] == "invalid_argument"
        # the same filter without the NUL still answers
        assert api.get("/v1/audit", **{field: value.replace("\x00", "")}).status_code == 200


@pytest.mark.parametrize("field", ["actor", "request_id", "event_types", "exclude_types"])
def test_an_audit_filter_holding_nul_is_refused_by_the_python_api(file_store_url: str,
                                                                  field: str) -> None:
    with open_service(file_store_url, SimulatedDestination()) as service:
        service.create_schedule(NS, "s")
        value: object = ("Created\x00",) if "types" in field else "ops\x00x"
        with pytest.raises(InvalidArgument, match="NUL"):
            service.audit(**{field: value})
        with pytest.raises(InvalidArgument, match="surrogate"):
            service.audit(**{field: ("Created\udc80",) if "types" in field else "a\udc80"})


@pytest.mark.parametrize("field", ["type", "exclude_type"])
def test_an_unknown_event_type_is_400_over_http(file_store_url: str, field: str) -> None:
    with api_on(file_store_url) as api:
        api.ok("/v1/schedule/create", {"namespace": NS, "schedule_id": "s"})
        doc = assert_error(api.get("/v1/audit", **{field: "NoSuchEvent"}), 400,
                           "invalid_argument")
        assert doc["message"].startswith("unknown event type 'NoSuchEvent'")
        # a class name and a topic are both known
        for known in ("Created", "schedfence.schedule.Created"):
            assert api.get("/v1/audit", **{field: known}).status_code == 200


@pytest.mark.parametrize("option", ["--type", "--exclude-type"])
def test_an_unknown_event_type_is_refused_by_the_cli(file_store_url: str, option: str) -> None:
    assert subprocess_cli(file_store_url, "schedule", "create", NS, "s").returncode == 0
    _refused_line(subprocess_cli(file_store_url, "audit", option, "MigrationAbortd"),
                  "unknown event type 'MigrationAbortd'")
    found = subprocess_cli(file_store_url, "audit", option, "schedfence.schedule.Created",
                           "--json")
    assert found.returncode == 0, found.stderr
    topics = [e["topic"] for e in json.loads(found.stdout)["entries"]]
    assert topics and (set(topics) == {"schedfence.schedule.Created"}) == (option == "--type")


# -- an action's workflow id -----------------------------------------------------------------
@pytest.mark.parametrize("workflow_id", ["temporal-sys-scheduler:x", "temporal-sys-batcher"])
def test_a_reserved_action_workflow_id_is_refused_by_the_cli(file_store_url: str,
                                                             workflow_id: str) -> None:
    base = ["--interval", "1m", "--workflow-type", "W", "--task-queue", "q"]
    assert subprocess_cli(file_store_url, "schedule", "create", NS, "kept", *base).returncode == 0
    before = events_in(file_store_url)
    _refused_line(subprocess_cli(file_store_url, "schedule", "create", NS, "s", *base,
                                 "--workflow-id", workflow_id), "workflow_id: reserved")
    # a schedule whose id is reserved takes it as its default workflow id: refused too
    _refused_line(subprocess_cli(file_store_url, "schedule", "create", NS, workflow_id, *base),
                  "workflow_id: reserved")
    assert events_in(file_store_url) == before


def test_a_reserved_action_workflow_id_is_400_over_http(file_store_url: str) -> None:
    action = {"workflow_type": "W", "task_queue": "q", "workflow_id": "temporal-sys-scheduler:x"}
    body = {"namespace": NS, "schedule_id": "s", "spec": {"intervals": [{"every": 60}]},
            "action": action}
    with api_on(file_store_url) as api:
        api.ok("/v1/schedule/create", dict(body, action=dict(action, workflow_id="s")))
        before = api.service.event_count()
        for route in ("/v1/schedule/create", "/v1/schedule/update"):
            doc = assert_error(api.post(route, dict(body, schedule_id="t" if "create" in route
                                                    else "s")), 400, "invalid_argument")
            assert doc["message"].startswith("workflow_id: reserved"), doc
        assert api.service.event_count() == before


# -- the tokens file ---------------------------------------------------------------------------
def _serve_refused(tmp_path: Path, tokens: str) -> str:
    path = tmp_path / "tokens"
    path.write_text(tokens)
    env = dict(os.environ, SCHEDFENCE_TOKENS_FILE=str(path))
    done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store",
                           f"sqlite:///{tmp_path / 'store.db'}", "serve", "--listen",
                           "127.0.0.1:0"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=env)
    assert done.returncode == 1, (done.stdout[-300:], done.stderr[-500:])
    assert not (tmp_path / "store.db").exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: invalid_argument: tokens: "), \
        done.stderr[-500:]
    return lines[0]


GOOD = {"name": "ada", "role": "admin", "secret": "admin-secret-0123456789"}


@pytest.mark.parametrize("tokens, says", [
    ("[" * 5000 + "]" * 5000, "nested too deep"),
    ('{"tokens": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deep"),
    (json.dumps([dict(GOOD, rol="reader")]), "entry 1: a field other than"),
    (json.dumps({"tokens": [GOOD], "extra": 1}), 'one field, "tokens"'),
])
def test_serve_refuses_a_bad_tokens_file_in_one_line(tmp_path: Path, tokens: str,
                                                     says: str) -> None:
    line = _serve_refused(tmp_path, tokens)
    assert says in line and GOOD["secret"] not in line, line


def test_serve_still_reads_a_good_tokens_file(tmp_path: Path) -> None:
    from schedfence.infra.http.auth import load_tokens
    for text in (json.dumps([GOOD]), json.dumps({"tokens": [GOOD]}), TOKEN_LINES):
        path = tmp_path / "tokens"
        path.write_text(text)
        assert len(load_tokens(str(path))) >= 1
