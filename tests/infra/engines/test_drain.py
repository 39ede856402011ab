"""Draining (``run_until_idle``, ``worker --until-idle``): a migration that backs off is retried
for a while instead of ending the run, and a run that leaves work open says so and exits 1."""
from __future__ import annotations

import json
from typing import Any
from uuid import UUID

import pytest
from click.testing import CliRunner

from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.ports import DestinationNotReached, DestinationUnavailable
from schedfence.infra.cli.commands import cli
from schedfence.infra.engines.drain import DrainReport, drain
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

from tests.helpers import NS, new_world


class FakeTime:
    def __init__(self) -> None:
        self.now, self.slept = 0.0, []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_drain_retries_a_backoff_with_growing_waits_until_it_progresses() -> None:
    t, calls = FakeTime(), []
    mid = UUID(int=1)
    answers = iter(["backoff", "backoff", "backoff", "progress"])

    done: set[UUID] = set()

    def attempt(m: UUID) -> str:
        calls.append(m)
        answer = next(answers)
        if answer == "progress":
            done.add(m)
        return answer

    report = drain(attempt, lambda: [] if mid in done else [mid],
                   clock=t.clock, sleep=t.sleep)
    assert report.drained and int(report) == 4
    assert t.slept == pytest.approx([0.1, 0.2, 0.4])  # 0.1 s doubling (capped at 1 s)


def test_drain_names_what_backs_off_for_longer_than_retry_for() -> None:
    t = FakeTime()
    stuck, fine = UUID(int=1), UUID(int=2)
    open_ids = {stuck, fine}

    def attempt(m: UUID) -> str:
        if m == fine:
            open_ids.discard(fine)
            return "progress"
        return "backoff"

    report = drain(attempt, lambda: sorted(open_ids), retry_for=3.0,
                   clock=t.clock, sleep=t.sleep)
    assert report.blocked == (str(stuck),) and not report.exhausted and not report.drained
    assert 2.0 <= t.now <= 3.0 and max(t.slept) == 1.0  # no retry is due past 3 s
    assert report.to_dict()["blocked"] == [str(stuck)]


def test_a_wait_for_a_claim_grace_is_retried_for_the_grace_too() -> None:
    """``wait`` (another run's start may still land) is retried for ``retry_for`` plus the
    grace; what backs off afterwards gets its own ``retry_for``; a wait longer than both is
    given up as any backoff is."""
    t, mid = FakeTime(), UUID(int=1)
    done: set[UUID] = set()

    def attempt(m: UUID) -> str:
        if t.now < 15.0:
            return "wait"
        if t.now < 17.0:
            return "backoff"  # the reconcile's read was unavailable for a while
        done.add(m)
        return "progress"

    report = drain(attempt, lambda: [] if mid in done else [mid], retry_for=3.0,
                   wait_for=15.0, clock=t.clock, sleep=t.sleep)
    assert report.drained and 17.0 <= t.now <= 18.0
    t = FakeTime()
    report = drain(lambda m: "wait", lambda: [mid], retry_for=3.0, wait_for=15.0,
                   clock=t.clock, sleep=t.sleep)
    assert report.blocked == (str(mid),) and 17.0 <= t.now <= 18.0


def test_a_migration_another_process_ends_is_waited_for_no_longer() -> None:
    """A worker beside the drain holds the claim (``wait``), then finishes the migration: it
    leaves the open list, and the drain returns at its next look, drained, with no more
    sleeping (it used to wait for it forever: issue 45, item 11)."""
    t, mid, other = FakeTime(), UUID(int=1), UUID(int=2)
    open_ids = [mid, other]

    def attempt(m: UUID) -> str:
        if m == other:
            open_ids.remove(other)  # ended by this drain
            return "progress"
        return "wait"  # another worker's start may still land

    def sleep(seconds: float) -> None:
        assert len(t.slept) < 50, "the drain kept waiting for a migration that ended"
        t.sleep(seconds)
        open_ids[:] = []  # meanwhile the other worker completed it

    report = drain(attempt, lambda: list(open_ids), retry_for=3.0, wait_for=15.0,
                   clock=t.clock, sleep=sleep)
    assert report.drained and report.blocked == () and int(report) == 2
    assert len(t.slept) == 1 and t.now < 1.0


def test_drain_stops_at_max_attempts_and_says_so() -> None:
    t = FakeTime()
    report = drain(lambda m: "progress", lambda: [UUID(int=i) for i in range(3)],
                   max_attempts=2, clock=t.clock, sleep=t.sleep)
    assert (int(report), report.exhausted, report.drained) == (2, True, False)


def test_drain_ends_at_once_when_nothing_can_progress() -> None:
    t = FakeTime()
    report = drain(lambda m: "idle", lambda: [UUID(int=1)], clock=t.clock, sleep=t.sleep)
    assert report == DrainReport(1) and report.drained and t.slept == []


def test_run_until_idle_completes_a_migration_whose_start_answer_was_lost(
        store_url: str) -> None:
    dest = SimulatedDestination()
    with open_service(store_url, dest) as svc:  # no test-only knobs: the defaults drain
        svc.create_schedule(NS, "s1")
        svc.rollback(NS, "s1", "R1")
        dest.inject("start", "lose_response")  # committed; the answer never comes back
        report = svc.run_until_idle()
        assert report.drained, report.to_dict()
        assert svc.migration(NS, "s1").state == "completed"
        assert dest.created_count(NS, destination_workflow_id("s1")) == 1
        assert svc.verify() == []


def test_run_until_idle_reports_a_migration_the_outage_blocks() -> None:
    w = new_world()
    w.service.create_schedule(NS, "s1")
    mig = w.service.rollback(NS, "s1", "R1")

    def refused(request: Any) -> Any:
        raise DestinationNotReached("start not sent: UNAVAILABLE: tcp connect error")

    w.dest.start_workflow = refused  # type: ignore[method-assign]  # nothing reaches it
    report = w.service.run_until_idle(retry_for=0.5)  # new_world's default is 0: one try
    assert report.blocked == (str(mig.migration_id),) and not report.drained
    assert w.service.migration(NS, "s1").state in ("pending", "claimed")
    assert w.service.verify() == []
    w.service.close()


def _cli(store: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", store, *args])


def test_worker_until_idle_completes_a_lost_answer_and_exits_0(file_store_url: str,
                                                              monkeypatch) -> None:
    store = file_store_url
    assert _cli(store, "schedule", "create", NS, "s1").exit_code == 0
    assert _cli(store, "rollback", NS, "s1").exit_code == 0
    lost: list[str] = []
    real = SimulatedDestination.start_workflow

    def lose_first(self, req):
        answer = real(self, req)  # committed at the destination
        if not lost:
            lost.append(req.request_id)
            raise DestinationUnavailable("start committed, response lost (test)")
        return answer

    monkeypatch.setattr(SimulatedDestination, "start_workflow", lose_first)
    result = _cli(store, "worker", "--until-idle", "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    doc = json.loads(result.stdout)
    assert doc["drained"] is True and doc["blocked"] == []
    assert len(lost) == 1
    with open_service(store, SimulatedDestination()) as svc:
        assert svc.migration(NS, "s1").state == "completed"
        assert svc.verify() == []


@pytest.mark.parametrize("concurrency", ["1", "2"])
def test_worker_until_idle_exits_1_naming_what_the_outage_blocks(file_store_url: str,
                                                                 monkeypatch,
                                                                 concurrency: str) -> None:
    store = file_store_url
    assert _cli(store, "schedule", "create", NS, "s1").exit_code == 0
    assert _cli(store, "rollback", NS, "s1").exit_code == 0

    def refuse(self, req):
        raise DestinationNotReached("start not sent: UNAVAILABLE: tcp connect error")

    monkeypatch.setattr(SimulatedDestination, "start_workflow", refuse)
    result = _cli(store, "worker", "--until-idle", "--concurrency", concurrency,
                  "--retry-for", "0.3")
    assert result.exit_code == 1
    assert "error: not_drained:" in result.stderr and "1 migration(s)" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    with open_service(store, SimulatedDestination()) as svc:
        assert svc.migration(NS, "s1").state == "pending"  # re-armed, nothing lost


def test_worker_max_attempts_that_run_out_exit_1(file_store_url: str) -> None:
    store = file_store_url
    for i in range(3):
        assert _cli(store, "schedule", "create", NS, f"s{i}").exit_code == 0
        assert _cli(store, "rollback", NS, f"s{i}").exit_code == 0
    result = _cli(store, "worker", "--until-idle", "--max-attempts", "2", "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)  # one document, the error inside it
    assert doc["error"]["code"] == "not_drained"
    assert "--max-attempts ran out after 2 attempts" in doc["error"]["message"]
    assert (doc["attempts"], doc["exhausted"], doc["drained"]) == (2, True, False)
    again = _cli(store, "worker", "--until-idle", "--json")  # the rest drains
    assert again.exit_code == 0 and json.loads(again.stdout)["drained"] is True


@pytest.mark.parametrize("args", [["--max-attempts", "3"], ["--retry-for", "1"]])
def test_drain_knobs_without_until_idle_are_refused(file_store_url: str,
                                                    args: list[str]) -> None:
    result = _cli(file_store_url, "worker", *args)
    assert result.exit_code == 1
    assert "apply only with --until-idle" in result.stderr
