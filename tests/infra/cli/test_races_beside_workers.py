"""Commands beside running workers (issue 45, items 10 and 11): two ``schedfence worker``
processes and ``schedfence scheduler`` run on one store while ``migrate``, ``forward``,
``recover`` and the schedule commands run as processes of their own. Every race is decided by
the store: no command answers ``internal`` (a lost race used to), and each command returns
once its work is done, whichever process did it (``migrate`` and ``forward`` used to wait on
migrations a worker had ended: forever, or minutes).

"Returns once its work is done" is measured against the store, not a wall clock: the time
from the last event of the command's own migrations (the job's, the forward's) to the
process's exit. It is bounded generously (``AFTER_DONE``: the drain looks again every second
at most; the bound only has to be far below the waits it replaces), and every process has a
timeout far beyond the work as well.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from schedfence.domain.forward.aggregate import forward_aggregate_id
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.job import job_request_id
from schedfence.domain.ports import StartWorkflow
from schedfence.domain.ids import migration_aggregate_id
from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import MigrationService, open_service

ROOT = Path(__file__).resolve().parents[3]
NS, BACK_NS, OTHER = "fleet", "back", "other"
JOB_IDS = [f"s{i}" for i in range(8)]  # migrated by the job
BACK = ["f0", "f1"]  # on the Temporal side first, forwarded back
LOOSE = ["t0", "t1"]  # only the schedule commands and the scheduler touch them
AFTER_DONE = 60.0  # seconds from a command's last own event to its exit, at most
TIMEOUT = 600.0  # seconds any one command may take at all (the machine is loaded)


def _program(svc: MigrationService, ns: str, sid: str) -> None:
    svc.create_schedule(ns, sid, spec=make_spec(intervals=[(5, 0)]),
                        action=make_action(workflow_type="W", task_queue="q",
                                           workflow_id=f"act-{sid}"),
                        policies=make_policies(overlap="allow_all"))  # nothing blocks a move


def _given(store: str) -> None:
    with open_service(store, "sim") as svc:
        for sid in JOB_IDS:
            _program(svc, NS, sid)
        for sid in BACK:
            _program(svc, BACK_NS, sid)
        for sid in LOOSE:
            _program(svc, OTHER, sid)
        svc.create_schedule(OTHER, "r0")  # no program: nothing running blocks its rollback
        _program(svc, OTHER, "p0")  # parked: somebody else's run at its workflow id
        svc.destination.start_workflow(StartWorkflow(OTHER, destination_workflow_id("p0"),
                                                     "not-ours", "user-workflow"))
        for sid in BACK:
            svc.rollback(BACK_NS, sid, f"to-{sid}")
        svc.rollback(OTHER, "p0", "to-p0")
        svc.run_until_idle(retry_for=0)
        assert svc.migration(OTHER, "p0").state == "parked"


def _process(store: str, log: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                             *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=open(log, "w"),
                            text=True)


class Command:
    """One command run as its own process; ``done`` once it exited (and when)."""

    def __init__(self, store: str, tmp: Path, name: str, *args: str) -> None:
        self.name, self.log = name, tmp / f"{name}.err"
        self.proc = _process(store, self.log, *args)
        self.out, self.exited_at = "", 0.0

    def wait(self) -> Command:
        self.out, _ = self.proc.communicate(timeout=TIMEOUT)
        self.exited_at = time.time()
        return self

    @property
    def err(self) -> str:
        return self.log.read_text()

    def decided(self) -> None:
        """Exit 0, or a refusal in one line: never ``internal``, never a traceback."""
        assert "internal" not in self.err + self.out and "Traceback" not in self.err, \
            (self.name, self.out[-2000:], self.err[-2000:])
        if self.proc.returncode != 0:  # under --json the error is the one document
            assert self.out, (self.name, self.proc.returncode, self.err)
            error = json.loads(self.out)["error"]
            assert error["code"] not in ("internal", "unavailable"), (self.name, error)
            assert "\n" not in error["message"], (self.name, error)

    def ok(self) -> dict[str, Any]:
        self.decided()
        assert self.proc.returncode == 0, (self.name, self.out[-2000:], self.err[-2000:])
        return json.loads(self.out)


def _last_event_at(svc: MigrationService, aggregate_ids: list[Any]) -> float:
    return max(svc.app.repository.get(a).modified_on.timestamp() for a in aggregate_ids)


def _returned_once_done(svc: MigrationService, cmd: Command, ids: list[Any]) -> None:
    late = cmd.exited_at - _last_event_at(svc, ids)
    assert late < AFTER_DONE, f"{cmd.name} exited {late:.1f}s after its work was done"


def test_commands_beside_two_workers_and_the_scheduler(file_store_url: str,
                                                       tmp_path: Path) -> None:
    store = file_store_url
    _given(store)
    running = [_process(store, tmp_path / f"worker{i}.err", "--worker-id", f"w{i}", "worker",
                        "--concurrency", "2", "--poll-interval", "0.2") for i in range(2)]
    running.append(_process(store, tmp_path / "scheduler.err", "scheduler",
                            "--poll-interval", "0.5"))
    try:
        time.sleep(2)  # the workers and the scheduler start up while the commands begin
        migrate = Command(store, tmp_path, "migrate", "migrate", "--namespace", NS, "--to",
                          "workflow", "--job-id", "J", "--json")
        forwards = [Command(store, tmp_path, f"forward-{sid}", "forward", BACK_NS, sid,
                            "--request-id", f"back-{sid}", "--json") for sid in BACK]
        commands = [Command(store, tmp_path, f"{what}-{sid}", "schedule", what, OTHER, sid,
                            "--json", *extra)
                    for sid in LOOSE for what, extra in (("pause", ()), ("trigger", ()),
                                                         ("unpause", ()))]
        # A rollback the workers take at once, and an operator's abort racing them.
        rollback = Command(store, tmp_path, "rollback", "rollback", OTHER, "r0",
                           "--request-id", "r-r0", "--json").wait()
        racing = [Command(store, tmp_path, "recover-abort-r0", "recover", "abort", OTHER,
                          "r0", "--actor", "ann", "--reason", "race", "--json"),
                  Command(store, tmp_path, "recover-abort-p0", "recover", "abort", OTHER,
                          "p0", "--actor", "ann", "--reason", "parked", "--json")]
        job = migrate.wait().ok()
        done_forwards = [f.wait().ok() for f in forwards]
        for cmd in commands + racing:
            cmd.wait().decided()
        rollback.ok()
    finally:
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(timeout=120) for proc in running]
    assert codes == [0, 0, 0], [p.read_text()[-2000:] for p in tmp_path.glob("*.err")]
    assert (job["phase"], job["counts"]["completed"]) == ("done", len(JOB_IDS)), job
    assert [f["state"] for f in done_forwards] == ["completed"] * len(BACK), done_forwards
    assert racing[1].proc.returncode == 0  # the parked one: nobody else moves it
    for name in ("worker0", "worker1", "scheduler"):
        assert "internal" not in (tmp_path / f"{name}.err").read_text(), name
    with open_service(store, "sim") as svc:
        _returned_once_done(svc, migrate, [
            migration_aggregate_id(NS, sid, job_request_id("J", "workflow", sid))
            for sid in JOB_IDS])
        for sid, cmd in zip(BACK, forwards):
            _returned_once_done(svc, cmd, [forward_aggregate_id(BACK_NS, sid, f"back-{sid}")])
        assert svc.verify() == []
