"""One unit of work for every save (infra/engines/unit_of_work.py), one drive for every driver
(infra/engines/drive.py) and the scheduler's loop in its engine: each takes its settings as
parameters, and nothing is set on the service's worker to steer it."""
from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from schedfence.domain.errors import StandbyNotPromoted
from schedfence.infra.engines.drive import Drive
from schedfence.infra.engines.pool import WorkerPool
from schedfence.infra.engines.scheduler import SchedulerReport, run_until_stopped
from schedfence.infra.engines.unit_of_work import UnitOfWork

from tests.helpers import NS, SID, Crash, new_world


def test_a_save_is_one_append_between_its_two_crash_points() -> None:
    w = new_world()
    w.service.create_schedule(NS, SID)
    w.service.rollback(NS, SID, "R1")
    assert w.hooks.seen("rollback.") == ["rollback.before_append", "rollback.after_append"]
    w.hooks.crash_once("abort.before_append")
    before = w.service.event_count()
    with pytest.raises(Crash):
        w.service.abort(NS, SID, "changed my mind", "oncall")
    assert w.service.event_count() == before  # crashed before the append: nothing written
    w.service.close()


def test_a_plain_append_is_no_crash_boundary() -> None:
    points: list[str] = []
    saved: list[tuple] = []

    class App:
        def save(self, *aggregates: object) -> None:
            saved.append(aggregates)

    unit = UnitOfWork.of(App(), "w", points.append)
    unit.append("a", "b")
    assert (saved, points) == ([("a", "b")], [])
    assert unit.call("describe", lambda: 7) == 7
    assert points == ["describe.before_call", "describe.after_call"]
    quiet = unit.hooked(None)
    quiet.save("fence")  # no aggregate: still one append
    assert len(saved) == 2 and points[2:] == []  # the other unit calls no hook


def test_a_drive_with_its_own_identity_and_grace_leaves_the_services_worker_alone() -> None:
    w = new_world(claim_grace=7.0)
    for sid in ("s1", "s2"):
        w.service.create_schedule(NS, sid)
        w.service.rollback(NS, sid)
    worker = w.service.worker
    before = (worker.worker_id, worker.claim_grace, worker.own_prefix)
    report = w.service.drive(Drive(worker_id="drainer#abc", claim_grace=0.0,
                                   retry_for=0)).report
    assert report is not None and report.drained
    assert (worker.worker_id, worker.claim_grace, worker.own_prefix) == before
    states = {w.service.migration(NS, sid).state for sid in ("s1", "s2")}
    assert states == {"completed"}
    workers = {e.data.get("worker") for sid in ("s1", "s2")
               for e in w.service.history(NS, sid) if e.data.get("worker")}
    assert workers == {"drainer#abc"}  # the drain's identity, as passed
    w.service.close()


def test_a_pool_then_a_drain_in_one_drive() -> None:
    w = new_world()
    for sid in ("s1", "s2", "s3"):
        w.service.create_schedule(NS, sid)
        w.service.rollback(NS, sid)
    driven = w.service.drive(Drive(threads=2, poll_interval=0.01))
    assert driven.stats is not None and driven.report is not None
    assert driven.report.drained
    assert {w.service.migration(NS, s).state for s in ("s1", "s2", "s3")} == {"completed"}
    w.service.close()


def test_the_pool_takes_the_parts_not_the_service() -> None:
    w = new_world()
    w.service.create_schedule(NS, SID)
    w.service.rollback(NS, SID)
    pool = WorkerPool(w.service._work_parts(), 1)
    found, progressed = pool.one_pass(pool._worker(0), 0)
    assert (found, progressed) == (1, 1)
    assert w.service.migration(NS, SID).state == "completed"
    w.service.close()


def test_the_scheduler_loop_runs_passes_until_stopped() -> None:
    stop, seen, passes = threading.Event(), [], []

    def one_pass() -> SchedulerReport:
        passes.append(datetime.now(timezone.utc))
        if len(passes) == 3:
            stop.set()
        return SchedulerReport(ticks=1) if len(passes) == 2 else SchedulerReport()

    run_until_stopped(one_pass, stop, 0.0, seen.append)
    assert len(passes) == 3
    assert [r.ticks for r in seen] == [1]  # only a pass that did something is shown


def test_the_scheduler_loop_outlives_a_failed_pass(caplog) -> None:
    stop, seen, passes = threading.Event(), [], []

    def one_pass() -> SchedulerReport:
        passes.append(1)
        if len(passes) == 1:
            raise StandbyNotPromoted("the store's primary changed; run promote")
        stop.set()
        return SchedulerReport(started=1)

    run_until_stopped(one_pass, stop, 0.0, seen.append)
    assert len(passes) == 2 and [r.started for r in seen] == [1]
    assert "StandbyNotPromoted: the store's primary changed; run promote (retrying)" in \
        caplog.text
