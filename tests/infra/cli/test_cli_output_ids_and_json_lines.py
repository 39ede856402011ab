"""Text output prints ids whole (UUIDv7 ids share their first 8 characters), and the streaming
commands' ``--json`` is JSON Lines: one compact object per line, its kind under ``event``."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

from schedfence.infra.cli import output as out
from schedfence.infra.application.service import open_service
from schedfence.projections.narration import narrate

from tests.helpers import NS, start_foreign
from tests.infra.cli.cli_runs import ROOT, ok, run, store  # noqa: F401 (store: a fixture)

# Two UUIDv7 run ids of the same millisecond: alike in their first 8 (and more) characters.
RUN_OURS = "0193a5f2-7c4e-7a10-8f00-5d1c2b3a4e01"
RUN_FOREIGN = "0193a5f2-7c4e-7b22-9e11-6e2d3c4b5f02"
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def test_narration_and_history_fields_tell_two_uuid7_runs_apart() -> None:
    answer = {"kind": "already_started", "run_id": RUN_FOREIGN,
              "first_execution_run_id": RUN_OURS, "start_request_id": "req-1",
              "status": "running", "detail": "", "proves_no_commit": False}
    line = narrate("DestinationAnswered", answer)
    assert line is not None and RUN_FOREIGN in line.text and RUN_OURS in line.text
    fields = out.key_fields("DestinationAnswered", {"kind": "created", "run_id": RUN_OURS})
    assert RUN_OURS in fields
    assert out.short(RUN_FOREIGN) == RUN_FOREIGN != out.short(RUN_OURS)


def _scripted(store: str) -> None:  # noqa: F811 (the fixture's value)
    with open_service(store, "sim", claim_grace=0, retry_for=0) as service:
        for sid in ("done", "parked"):
            service.create_schedule(NS, sid)
        start_foreign(service.destination, "parked")
        for sid in ("done", "parked"):
            service.rollback(NS, sid, request_id=f"req-{sid}", actor="alice")
        service.run_until_idle()


def test_every_text_view_prints_migration_and_run_ids_whole(store: str) -> None:  # noqa: F811
    _scripted(store)
    migrations = json.loads(ok(store, "migrations", "--json"))["migrations"]
    ids = {m["migration_id"] for m in migrations}
    assert len(ids) == 2
    for args in (["migrations"], ["audit"], ["history", NS, "done"],
                 ["history", NS, "done", "--narrate"], ["status", NS, "done"]):
        text = ok(store, *args)
        shown = set(UUID.findall(text))
        assert shown, args
        cut = [w for w in re.findall(r"\b[0-9a-f]{8}\b(?!-)", text)]
        assert not cut, f"{args}: ids cut to 8 characters: {cut}"
    assert ids <= set(UUID.findall(ok(store, "migrations")))
    oncall = ok(store, "oncall")
    [parked] = [m["migration_id"] for m in migrations if m["schedule_id"] == "parked"]
    assert parked in oncall


def test_replicate_json_is_one_object_per_line(store: str, tmp_path) -> None:  # noqa: F811
    _scripted(store)
    standby = f"sqlite:///{tmp_path / 'standby.db'}"
    result = run(store, "replicate", "--from", store, "--to", standby, "--json")
    assert result.exit_code == 0, result.stderr
    [line] = result.stdout.splitlines()
    assert json.loads(line)["event"] == "copied"


def _stream(store: str, *args: str, lines_before_stop: int) -> list[dict]:  # noqa: F811
    """Run a streaming command in a process; once it printed ``lines_before_stop`` lines (each
    flushed as it happens), stop it with SIGTERM; parse every line."""
    proc = subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                             "--destination", "sim", *args, "--json"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = "".join(proc.stdout.readline() for _ in range(lines_before_stop))
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    lines = (first + rest).splitlines()
    assert lines, err
    return [json.loads(line) for line in lines]  # each line a whole JSON object


def test_worker_json_lines_pass_then_stopped(store: str) -> None:  # noqa: F811
    with open_service(store, "sim") as service:
        service.create_schedule(NS, "s1")
        service.rollback(NS, "s1", request_id="req-s1", actor="alice")
    docs = _stream(store, "worker", "--poll-interval", "0.1", lines_before_stop=2)
    assert docs[0]["event"] == "started" and docs[0]["destination"].startswith("sim")
    assert docs[1]["event"] == "pass" and docs[1]["progressed"] >= 1
    assert docs[-1]["event"] == "stopped" and docs[-1]["migrations"] == {"completed": 1}
    assert {d["event"] for d in docs[1:-1]} == {"pass"}


def test_scheduler_json_lines_end_with_stopped(store: str) -> None:  # noqa: F811
    with open_service(store, "sim") as service:
        service.create_schedule(NS, "s1")
    docs = _stream(store, "scheduler", "--poll-interval", "0.1", lines_before_stop=1)
    assert docs[0]["event"] == "started" and docs[-1]["event"] == "stopped"
    assert {d["event"] for d in docs[1:-1]} <= {"pass"}
