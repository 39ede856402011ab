"""Issue 27, item 11: a batch job SIGKILLed three times between a batch's claims and their
answers, then rerun: nothing parked.

Real `schedfence migrate` processes on a SQLite file store, the simulator in a SQLite file of
its own (shared by every process). Each kill lands while a batch's claims are stored and its
answers are not: some of its starts went out (their chains exist, their answers are lost),
some never did. The next run finds those claims inside the dead run's claim grace and waits
it out; then each reconcile either proves its chain head ours (the receipt) or finds no run
at all at the workflow id inside the simulator's retention, which proves no create committed
(F16): the claim is re-armed and started once. The final rerun exits 0 with every schedule
completed, none parked, one chain each, created once, and the checker clean.
``SCHEDFENCE_JOB_KILL_CLAIMS_SCHEDULES`` changes the size (default 400).
"""
from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

from schedfence.domain.rollback.evidence import REARM_REASON
from schedfence.infra.application.service import open_service
from tests.e2e.test_job_sigkill import _check, final_run, fleet, kill_when, migrate

SCHEDULES = int(os.environ.get("SCHEDFENCE_JOB_KILL_CLAIMS_SCHEDULES", "400"))
KILLS = 3
CLAIMED = "schedfence.migration.StartClaimConsumed"
ANSWERED = "schedfence.migration.DestinationAnswered"


def _in_flight(path: Path) -> int | None:
    """Claims stored without an answer yet (None: the file was locked)."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.05)
        try:
            count = dict(db.execute(
                "SELECT topic, COUNT(*) FROM stored_events WHERE topic IN (?, ?) GROUP BY topic",
                (CLAIMED, ANSWERED)).fetchall())
        finally:
            db.close()
    except sqlite3.OperationalError:
        return None
    return count.get(CLAIMED, 0) - count.get(ANSWERED, 0)


def _kill_between_claim_and_answer(proc, path: Path, before: int) -> int:
    """SIGKILL ``proc`` once more claims than answers are stored than ``before``."""
    return kill_when(proc, lambda: _in_flight(path), lambda seen: seen > before,
                     "no batch was caught between its claims and its answers", 0.001)


def test_a_job_killed_between_claims_and_answers_reruns_with_nothing_parked(tmp_path: Path):
    began = time.monotonic()
    path, store, destination, sids = fleet(tmp_path, SCHEDULES)
    cut = []
    for n in range(KILLS):
        proc = migrate(store, destination, tmp_path / f"run{n}.err")
        before = _in_flight(path) or 0
        cut.append(_kill_between_claim_and_answer(proc, path, before) - before)
        assert proc.returncode == -signal.SIGKILL
    report = final_run(store, destination, tmp_path)
    _check(store, destination, sids, report)  # completed all, parked 0, one chain each
    with open_service(store, destination) as svc:
        rearmed = sum(1 for note in svc.app.notifications(
            ("schedfence.migration.StartClaimRearmed",))
            if svc.app.mapper.to_domain_event(note).reason == REARM_REASON)
    assert rearmed > 0
    print(f"\n{SCHEDULES} schedules, killed {KILLS} times with (claims unanswered) {cut}; "
          f"re-armed on absence {rearmed}; parked 0; {time.monotonic() - began:.1f}s")
