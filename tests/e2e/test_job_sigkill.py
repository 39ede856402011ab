"""A batch job of 5,000 schedules, SIGKILLed twice mid-job and resumed by rerunning the same
command (`schedfence migrate`, real processes, a SQLite file store, the simulator in a SQLite
file of its own so every process shares it).

Each kill lands while the job is requesting a page it has not recorded yet: some of that
page's rollbacks are stored, its decisions are not. (A kill between a worker's claim and its
start is re-armed on proven absence inside retention, F16, which
tests/e2e/test_job_sigkill_claims.py covers, or parks ``head_missing`` beyond it, which
tests/infra/application/test_jobs.py covers; here the point is that a rerun neither loses nor doubles a
request.) The test watches the store
read-only and kills when the rollbacks stored exceed the requests the job has recorded.

At the end: every schedule migrated exactly once (one migration, with the job's derived
request id, one destination chain created once), the job decided each schedule once, and the
final report's counts equal the store's. ``SCHEDFENCE_JOB_SIGKILL_SCHEDULES`` changes the size.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, TypeVar

from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.job import job_request_id
from schedfence.infra.adapters.destination.shared_sim import SharedSimDestination
from schedfence.infra.application.service import open_service

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
SCHEDULES = int(os.environ.get("SCHEDFENCE_JOB_SIGKILL_SCHEDULES", "5000"))
NS, JOB = "fleet", "fleet-to-workflow"
PAGE = 100  # the runner's page size
KILL_AFTER_PAGES = (SCHEDULES // PAGE // 4, SCHEDULES // PAGE * 3 // 5)  # mid-job, twice
ASSIGNED = "schedfence.migration.RequestIdAssigned"
PAGE_TOPIC = "schedfence.job.PageDecided"


class Watch:
    """Read-only looks at the event store file while the job process writes it."""

    def __init__(self, path: Path) -> None:
        self.path, self.seen_rowid, self.pages, self.recorded = path, 0, 0, 0

    def look(self) -> tuple[int, int, int] | None:
        """(pages recorded, requests recorded, rollbacks stored), or None if locked."""
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=0.05)
            try:
                rows = db.execute("SELECT rowid, state FROM stored_events WHERE topic = ? AND "
                                  "rowid > ?", (PAGE_TOPIC, self.seen_rowid)).fetchall()
                assigned = db.execute("SELECT COUNT(*) FROM stored_events WHERE topic = ?",
                                      (ASSIGNED,)).fetchone()[0]
            finally:
                db.close()
        except sqlite3.OperationalError:
            return None
        for rowid, state in rows:
            page = json.loads(state)
            self.pages += 1
            self.recorded += sum(d["decision"] == "requested" for d in page["decisions"])
            self.seen_rowid = max(self.seen_rowid, rowid)
        return self.pages, self.recorded, assigned


def migrate(store: str, destination: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "schedfence.infra.cli", "--store", store, "--destination",
         destination, "migrate", "--namespace", NS, "--to", "workflow", "--job-id", JOB,
         "--json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)


def kill_when(proc: subprocess.Popen, look: Callable[[], T | None],
              ready: Callable[[T], bool], never: str, poll: float) -> T:
    """SIGKILL ``proc`` at the first reading of ``look()`` that is ``ready`` (None: not read
    this time), polling every ``poll`` seconds for two minutes; returns that reading."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the job ended before it could be killed"
        seen = look()
        if seen is not None and ready(seen):
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            return seen
        time.sleep(poll)
    raise AssertionError(never)


def kill_mid_page(proc: subprocess.Popen, watch: Watch, after_pages: int) -> tuple[int, int]:
    """SIGKILL ``proc`` once it has recorded ``after_pages`` pages and is requesting the next:
    more rollbacks stored than the job has recorded. Returns (pages, unrecorded requests)."""
    seen = kill_when(proc, watch.look, lambda s: s[0] >= after_pages and s[2] > s[1],
                     "the job never reached the page to kill at", 0.003)
    return seen[0], seen[2] - seen[1]


def fleet(tmp_path: Path, n: int) -> tuple[Path, str, str, list[str]]:
    """``n`` schedules in a SQLite file store, beside a shared simulator in a file of its
    own: (the store's file, its URL, the destination, the schedule ids)."""
    path = tmp_path / "store.db"
    store, destination = f"sqlite:///{path}", f"sim+sqlite:///{tmp_path / 'sim.db'}"
    sids = [f"s{i:05d}" for i in range(n)]
    with open_service(store, destination) as svc:
        for sid in sids:
            svc.create_schedule(NS, sid)
    return path, store, destination, sids


def final_run(store: str, destination: str, tmp_path: Path) -> dict:
    """The rerun after the kills: it must exit 0; its JSON report."""
    final = migrate(store, destination, tmp_path / "final.err")
    out, _ = final.communicate(timeout=600)
    assert final.returncode == 0, (tmp_path / "final.err").read_text()
    return json.loads(out)


def test_a_sigkilled_job_resumes_and_migrates_every_schedule_exactly_once(tmp_path: Path):
    began = time.monotonic()
    path, store, destination, sids = fleet(tmp_path, SCHEDULES)
    created = time.monotonic()

    watch, kills = Watch(path), []
    for n, after in enumerate(KILL_AFTER_PAGES):
        proc = migrate(store, destination, tmp_path / f"run{n}.err")
        kills.append(kill_mid_page(proc, watch, after))
        assert proc.returncode == -signal.SIGKILL
    report = final_run(store, destination, tmp_path)
    finished = time.monotonic()

    _check(store, destination, sids, report)
    assert all(unrecorded > 0 for _, unrecorded in kills), kills
    print(f"\n{SCHEDULES} schedules: created in {created - began:.1f}s; job with kills at "
          f"(pages, unrecorded requests) {kills} finished {finished - created:.1f}s later; "
          f"checked in {time.monotonic() - finished:.1f}s")


def _check(store: str, destination: str, sids: list[str], report: dict) -> None:
    n = len(sids)
    assert report["phase"] == "done" and report["decided"] == n
    assert report["counts"] == {"completed": n, "parked": 0, "aborted": 0, "in_progress": 0,
                                "blocked": 0, "skipped": 0}
    with open_service(store, destination) as svc:
        stats = svc.stats()
        assert stats["migrations"] == n  # one migration, so one request id, per schedule
        assert {k: v for k, v in stats["by_state"].items() if v} == {"completed": n}
        assert report["counts"]["completed"] == len(svc.migrations_by_state("completed",
                                                                            limit=n))
        rids = {}
        for note in svc.app.notifications((ASSIGNED,)):
            e = svc.app.mapper.to_domain_event(note)
            assert e.schedule_id not in rids, f"{e.schedule_id}: a second request id"
            rids[e.schedule_id] = e.request_id
        assert rids == {sid: job_request_id(JOB, "workflow", sid) for sid in sids}
        assert svc.verify() == []
    sim = SharedSimDestination(destination)
    try:
        for sid in sids:
            wid = destination_workflow_id(sid)
            assert len(sim.chains(NS, wid)) == 1 and sim.created_count(NS, wid) == 1, sid
    finally:
        sim.close()
