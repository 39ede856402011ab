"""Batch jobs through the service (infra/application/jobs.py): selection, resume after a crash at every
page boundary without doubling a request, cancel, dry run, rate limit, the report against
the store's own counts, and the rounds that ask blocked schedules again."""
from __future__ import annotations

from dataclasses import replace

import time
from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain import job as j
from schedfence.domain.errors import AlreadyExists, InvalidArgument, NotFound, RecoveryRefused
from schedfence.domain.ids import DUMMY_WORKFLOW_TYPE, destination_workflow_id
from schedfence.domain.ports import StartWorkflow
from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application import jobs
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import MigrationService, open_service

from tests.helpers import MEMORY, Crash, World, world  # noqa: F401

NS = "batch"
IDS = [f"s{i}" for i in range(7)]
SMALL = jobs.RunOptions(page_size=3, actor="ann")


def populate(w: World, ids: list[str] = IDS) -> None:
    for sid in ids:
        w.service.create_schedule(NS, sid)
    w.service.create_schedule("elsewhere", "s0")  # another namespace: never selected
    w.service.create_schedule(NS, "keep")  # not matched by s*


def run(w: World, options: jobs.RunOptions = SMALL, job_id: str = "j1", **kw):
    kw.setdefault("match", "s*")
    return jobs.run_job(w.service, job_id, NS, "workflow", options=options, **kw)


def start_at(w: World, sid: str, workflow_type: str = "user-workflow") -> None:
    """Somebody else's workflow at the schedule's destination workflow id."""
    w.dest.start_workflow(StartWorkflow(NS, destination_workflow_id(sid), "not-ours",
                                        workflow_type))


def crash_at(w: World, point: str, nth: int) -> None:
    """Raise ``Crash`` at the ``nth`` time the service passes ``point``."""
    seen = {"n": 0}

    def count() -> None:
        seen["n"] += 1
        if seen["n"] == nth:
            raise Crash(point)
        w.hooks.once(point, count)

    w.hooks.once(point, count)


def store_states(w: World) -> dict[str, int]:
    return {k: v for k, v in w.service.stats()["by_state"].items() if v}


def assert_each_migrated_once(w: World, ids: list[str], job_id: str = "j1") -> None:
    for sid in ids:
        rid = j.job_request_id(job_id, "workflow", sid)
        view = w.service.migration(NS, sid)
        assert (view.state, view.request_id) == ("completed", rid), sid
        assert w.created(sid, ns=NS) == 1, f"{sid}: one destination chain, created once"
    assert w.service.stats()["migrations"] == len(ids), "one migration (request id) each"


# -- a whole job ---------------------------------------------------------------------------------
def test_a_job_migrates_its_selection_in_pages_and_reports_the_store_counts(world):
    populate(world)
    report = run(world)
    assert report["phase"] == "done" and report["pages"] == 3
    assert report["counts"] == {"completed": 7, "parked": 0, "aborted": 0, "in_progress": 0,
                                "blocked": 0, "skipped": 0}
    assert store_states(world) == {"completed": 7}
    assert_each_migrated_once(world, IDS)
    assert not world.service.schedule("elsewhere", "s0").closed
    assert not world.service.schedule(NS, "keep").closed
    assert world.service.verify() == []
    # Rerun after the end: nothing asked again, the same report.
    again = run(world)
    assert again["this_run"]["asked"] == 0 and again["counts"] == report["counts"]


def test_refusals_are_reported_by_reason_and_parks_come_from_the_store(world):
    populate(world)
    world.service.rollback(NS, "s1", "someone-else")  # pending: the job's request is blocked
    start_at(world, "s2", DUMMY_WORKFLOW_TYPE)  # a running sentinel
    start_at(world, "s3")  # the job's start will park
    world.service.update_schedule(NS, "s4", delete=True)  # closed: skipped
    report = run(world, replace(SMALL, blocked_rounds=0))  # the first answers, kept
    assert report["reasons"] == {"parked": {"foreign_destination": 1},
                                 "blocked": {"migration_pending": 1, "sentinel_blocked": 1},
                                 "skipped": {"closed": 1}}
    c = report["counts"]
    assert (c["completed"], c["parked"], c["blocked"], c["skipped"]) == (3, 1, 2, 1)
    assert report["requested"] == 4
    assert {(x["schedule_id"], x["outcome"], x["reason"]) for x in report["unfinished"]} == {
        ("s1", "blocked", "migration_pending"), ("s2", "blocked", "sentinel_blocked"),
        ("s3", "parked", "foreign_destination"), ("s4", "skipped", "closed")}
    # The store agrees (s1's other migration is the store's too: completed by the drive).
    assert store_states(world) == {"completed": 4, "parked": 1}


# -- resume after a crash at each boundary -------------------------------------------------------
@pytest.mark.parametrize("point, nth", [
    ("job_define.after_append", 1),  # defined, no page yet
    ("rollback.after_append", 2),  # page 2's requests made (one append), unrecorded
    ("job_page.before_append", 2),  # page 2 requested, not recorded
    ("job_page.after_append", 2),  # page 2 recorded, not driven
    ("job_page.after_append", 3),  # the last page recorded, nothing driven
    ("close.after_append", 2),  # while driving page 2 (a page's closes: one append)
])
def test_a_crashed_job_resumes_in_one_rerun_without_doubling_a_request(world, point, nth):
    populate(world)
    crash_at(world, point, nth)
    with pytest.raises(Crash):
        run(world)
    report = run(world)
    assert report["counts"]["completed"] == 7 and report["requested"] == 7
    assert sum(report["counts"].values()) == 7
    assert store_states(world) == {"completed": 7}
    assert_each_migrated_once(world, IDS)
    state = jobs.load_job(world.service, "j1").state
    assert sorted(state.decided) == IDS and state.counts["requested"] == 7
    assert world.service.verify() == []


def test_a_crash_between_claim_and_start_parks_and_the_report_says_so(world):
    """The protocol cannot tell "never started" from "gone": the rerun's reconcile parks
    it (head_missing), and the report shows the park the store holds."""
    populate(world)
    crash_at(world, "start.before_call", 2)
    with pytest.raises(Crash):
        run(world)
    report = run(world)
    assert report["counts"]["completed"] == 6 and report["counts"]["parked"] == 1
    assert report["reasons"]["parked"] == {"head_missing": 1}
    assert store_states(world) == {"completed": 6, "parked": 1}
    assert world.service.verify() == []


def test_a_request_repeated_after_a_crash_counts_once_as_already_pending(world):
    populate(world)
    crash_at(world, "job_page.before_append", 1)
    with pytest.raises(Crash):
        run(world)
    run(world)
    decided = jobs.load_job(world.service, "j1").state.decided
    assert [decided[s]["outcome"] for s in IDS[:3]] == ["already_pending"] * 3
    assert {decided[s]["outcome"] for s in IDS[3:]} == {"accepted"}


def test_two_runs_of_one_job_at_once_decide_each_schedule_once(world):
    """A second run (another process, or any worker) finishes the job while the first is
    between requesting its page and recording it: the first records nothing over it."""
    populate(world)
    world.hooks.once("job_page.before_append", lambda: run(world))
    report = run(world)
    assert report["requested"] == 7 and report["counts"]["completed"] == 7
    state = jobs.load_job(world.service, "j1").state
    assert state.pages == 3 and sorted(state.decided) == IDS
    assert_each_migrated_once(world, IDS)


def test_another_definition_under_the_job_id_is_refused_writing_nothing(world):
    populate(world)
    run(world, jobs.RunOptions(page_size=3, wait=False))
    before = world.service.event_count()
    for kw in ({"match": "s1*"}, {"schedule_ids": ["s1"]}):
        with pytest.raises(AlreadyExists, match="another definition"):
            run(world, **kw)
    with pytest.raises(AlreadyExists):
        jobs.run_job(world.service, "j1", NS, "source", match="s*")
    assert world.service.event_count() == before


def test_bad_input_is_refused_before_anything_is_written(world):
    before = world.service.event_count()
    for call in (lambda: run(world, job_id="bad\x00id"),
                 lambda: run(world, jobs.RunOptions(concurrency=0)),
                 lambda: run(world, jobs.RunOptions(page_size=10_000)),
                 lambda: run(world, jobs.RunOptions(blocked_rounds=-1)),
                 lambda: run(world, jobs.RunOptions(blocked_rounds=21)),
                 lambda: run(world, jobs.RunOptions(blocked_rounds=True)),
                 lambda: run(world, jobs.RunOptions(blocked_wait=-0.5)),
                 lambda: run(world, jobs.RunOptions(blocked_wait=300.5)),
                 lambda: run(world, jobs.RunOptions(blocked_wait=float("nan"))),
                 lambda: jobs.run_job(world.service, "j", NS, "sideways")):
        with pytest.raises(InvalidArgument):
            call()
    with pytest.raises(NotFound):
        jobs.job_report(world.service, "never")
    assert world.service.event_count() == before


# -- rounds: the job asks its blocked schedules again ------------------------------------------
FLIGHT = "s9"  # matched by s*, created after the others: on the job's last page
QUICK = replace(SMALL, blocked_wait=0.0)


def start_in_flight(w: World, sid: str = FLIGHT) -> datetime:
    """A source schedule whose action start is in flight (its answer lost): a rollback of it
    waits behind the phase gate (``phase_blocked``) until the scheduler's retry is answered.
    Returns its first time, for ``answer_start``."""
    w.service.create_schedule(NS, sid, spec=make_spec(intervals=[(60, 0)]),
                              action=make_action(workflow_type="W", task_queue="q",
                                                 workflow_id=f"act-{sid}"),
                              policies=make_policies(overlap="allow_all"))
    t0 = parse_nominal(w.service.load.source(NS, sid).state.cursor)
    w.dest.inject("start", "lose_response")
    w.service.run_scheduler(now=t0 + timedelta(minutes=2))
    assert w.service.load.source(NS, sid).state.issued
    return t0


def answer_start(w: World, t0: datetime, sid: str = FLIGHT) -> None:
    """The scheduler asks the lost start again (deduplicated): nothing in flight any more."""
    w.service.run_scheduler(now=t0 + timedelta(minutes=2, seconds=5))
    assert not w.service.load.source(NS, sid).state.issued


def job_events(w: World, job_id: str = "j1") -> list:
    return list(w.service.app.events.get(j.job_aggregate_id(job_id)))


def test_the_same_job_asks_a_blocked_schedule_again_until_it_is_requested(world):
    populate(world, IDS[:3])
    t0 = start_in_flight(world)
    # Answered once round 1 is recorded: round 1 finds it still blocked, round 2 requests it.
    world.hooks.once("job_round.after_append", lambda: answer_start(world, t0))
    seen: list[dict] = []
    report = run(world, QUICK, on_progress=seen.append)
    events = job_events(world)
    page = next(d for e in events if isinstance(e, j.Job.PageDecided) for d in e.decisions
                if d["schedule_id"] == FLIGHT)
    assert (page["decision"], page["reason"]) == ("blocked", "phase_blocked")
    rounds = [e for e in events if isinstance(e, j.Job.BlockedAsked)]
    assert [(e.round, [(d["schedule_id"], d["decision"], d["reason"]) for d in e.decisions])
            for e in rounds] == [(1, [(FLIGHT, "blocked", "phase_blocked")]),
                                 (2, [(FLIGHT, "requested", "")])]
    assert rounds[1].decisions[0]["request_id"] == j.job_request_id("j1", "workflow", FLIGHT)
    assert report["phase"] == "done" and report["blocked_rounds"] == 2
    assert report["counts"] == {"completed": 4, "parked": 0, "aborted": 0, "in_progress": 0,
                                "blocked": 0, "skipped": 0}
    assert report["requested"] == 4 and report["unfinished"] == []
    assert (report["this_run"]["blocked_rounds"], report["this_run"]["unblocked"]) == (2, 1)
    assert {p["round"] for p in seen} == {0, 1, 2} and seen[-1]["round"] == 0
    assert seen[-1]["counts"] == {"requested": 4, "skipped": 0, "blocked": 0}
    assert_each_migrated_once(world, IDS[:3] + [FLIGHT])
    assert world.service.verify() == []


@pytest.mark.parametrize("point, outcome", [
    ("rollback.after_append", "already_pending"),  # the round's request made, unrecorded
    ("job_round.before_append", "already_pending"),  # the same, at the append
    ("job_round.after_append", "accepted"),  # the round recorded, not driven
])
def test_a_round_cut_by_a_crash_is_resumed_by_a_rerun_without_doubling_a_request(
        world, point, outcome):
    populate(world, IDS[:3])
    t0 = start_in_flight(world)
    first = run(world, replace(QUICK, blocked_rounds=0))
    assert first["reasons"]["blocked"] == {"phase_blocked": 1} and first["blocked_rounds"] == 0
    answer_start(world, t0)
    world.hooks.crash_once(point)
    with pytest.raises(Crash):
        run(world, QUICK)
    report = run(world, QUICK)
    assert report["counts"]["completed"] == 4 and report["counts"]["blocked"] == 0
    assert report["blocked_rounds"] == 1  # the cut round is recorded once
    state = jobs.load_job(world.service, "j1").state
    assert state.decided[FLIGHT]["outcome"] == outcome and state.counts["requested"] == 4
    assert_each_migrated_once(world, IDS[:3] + [FLIGHT])
    assert world.service.verify() == []


@pytest.mark.parametrize("then", ["cancel", "no more rounds"])
def test_what_a_cut_round_requested_counts_when_no_round_follows(world, then):
    """The round's request was made, its record cut; then no round asks again (the job was
    cancelled, or is rerun without rounds): the rerun finds the migration by its request id."""
    populate(world, IDS[:2])
    t0 = start_in_flight(world)
    run(world, replace(QUICK, blocked_rounds=0))
    answer_start(world, t0)
    world.hooks.crash_once("job_round.before_append")
    with pytest.raises(Crash):
        run(world, QUICK)
    if then == "cancel":
        jobs.cancel_job(world.service, "j1", "bob")
    report = run(world, replace(QUICK, blocked_rounds=5 if then == "cancel" else 0))
    assert report["this_run"]["asked"] == 0
    assert report["counts"]["completed"] == 3 and report["counts"]["blocked"] == 0
    assert jobs.load_job(world.service, "j1").state.decided[FLIGHT]["outcome"] == \
        "already_pending"
    assert_each_migrated_once(world, IDS[:2] + [FLIGHT])
    assert world.service.verify() == []


def test_rounds_count_across_runs_and_a_cancel_stops_them(world):
    populate(world, IDS[:2])
    t0 = start_in_flight(world)
    one = replace(QUICK, blocked_rounds=1)
    first = run(world, one)
    assert (first["blocked_rounds"], first["this_run"]["blocked_rounds"]) == (1, 1)
    assert first["counts"]["blocked"] == 1 and first["phase"] == "done"
    again = run(world, one)  # its one round was asked: nothing more
    assert (again["this_run"]["asked"], again["blocked_rounds"]) == (0, 1)
    # Decided, but a schedule still blocked: a cancel stops the rounds to come.
    assert jobs.cancel_job(world.service, "j1", "bob", "leave it")["phase"] == "cancelled"
    answer_start(world, t0)
    after = run(world, replace(one, blocked_rounds=5))
    assert after["phase"] == "cancelled" and after["this_run"]["asked"] == 0
    assert after["counts"]["blocked"] == 1 and after["blocked_rounds"] == 1


def test_more_rounds_on_a_rerun_ask_again_and_no_rounds_ask_nothing(world):
    populate(world, IDS[:2])
    t0 = start_in_flight(world)
    off = run(world, replace(QUICK, blocked_rounds=0))
    assert off["counts"]["blocked"] == 1 and off["this_run"]["blocked_rounds"] == 0
    assert not any(isinstance(e, j.Job.BlockedAsked) for e in job_events(world))
    answer_start(world, t0)
    on = run(world, replace(QUICK, blocked_rounds=1))  # the same job id, one more round
    assert on["this_run"] == dict(on["this_run"], asked=1, blocked_rounds=1, unblocked=1)
    assert on["counts"]["completed"] == 3 and on["phase"] == "done"


def test_the_wait_before_a_round_is_kept(world):
    populate(world, IDS[:1])
    start_in_flight(world)
    started = time.monotonic()
    report = run(world, replace(SMALL, blocked_rounds=2, blocked_wait=0.2, wait=False))
    # Loose: two rounds, each after its wait (never an upper bound).
    assert time.monotonic() - started >= 0.4 * 0.9
    assert report["blocked_rounds"] == 2 and report["counts"]["blocked"] == 1


# -- named schedules, dry run, no-wait, cancel ---------------------------------------------------
def test_named_schedules_are_taken_sorted_and_missing_ones_skipped(world):
    populate(world)
    report = run(world, match=None, schedule_ids=["s5", "s1", "ghost", "s1"])
    assert report["counts"]["completed"] == 2
    assert report["reasons"]["skipped"] == {"not_found": 1}
    assert sorted(jobs.load_job(world.service, "j1").state.decided) == ["ghost", "s1", "s5"]


def test_a_dry_run_predicts_the_run_and_writes_nothing(world):
    populate(world)
    world.service.rollback(NS, "s1", "someone-else")
    start_at(world, "s2", DUMMY_WORKFLOW_TYPE)
    before = world.service.event_count()
    dry = run(world, jobs.RunOptions(page_size=3, dry_run=True))
    assert world.service.event_count() == before
    with pytest.raises(NotFound):
        jobs.load_job(world.service, "j1")
    assert dry["would"] == {"requested": 5, "skipped": 0, "blocked": 2}
    assert dry["reasons"]["blocked"] == {"migration_pending": 1, "sentinel_blocked": 1}
    real = run(world, replace(SMALL, blocked_rounds=0))  # the first answers, kept
    assert real["requested"] == 5 and real["counts"]["blocked"] == 2
    predicted = {d["schedule_id"]: d["decision"] for d in dry["decisions"]}
    decided = jobs.load_job(world.service, "j1").state.decided
    assert predicted == {sid: d["decision"] for sid, d in decided.items()}
    # A dry run of a finished job has nothing left to do.
    assert run(world, jobs.RunOptions(dry_run=True))["would"]["requested"] == 0


def test_no_wait_requests_only_and_the_report_shows_them_in_progress(world):
    populate(world)
    report = run(world, jobs.RunOptions(page_size=3, wait=False))
    assert report["counts"]["in_progress"] == 7 and report["drain"] is None
    assert store_states(world) == {"pending": 7}
    world.service.run_until_idle()
    assert jobs.job_report(world.service, "j1")["counts"]["completed"] == 7


def test_cancel_stops_new_requests_and_started_ones_finish(world, monkeypatch):
    populate(world)
    monkeypatch.setattr(jobs, "CANCEL_CHECK_EVERY", 0.0)  # look before every request
    seen = {"n": 0}

    def cancel_after_third() -> None:
        seen["n"] += 1
        if seen["n"] == 3:
            jobs.cancel_job(world.service, "j1", "bob", "wrong batch")
        else:
            world.hooks.once("rollback.after_append", cancel_after_third)

    world.hooks.once("rollback.after_append", cancel_after_third)
    report = run(world, replace(SMALL, rate=1000.0))  # paced: one request at a time
    assert report["phase"] == "cancelled" and report["cancel_reason"] == "wrong batch"
    assert report["requested"] == 3 and report["counts"]["completed"] == 3
    assert store_states(world) == {"completed": 3}
    assert run(world)["this_run"]["asked"] == 0  # a rerun asks nothing more
    assert jobs.cancel_job(world.service, "j1", "bob")["phase"] == "cancelled"


def test_a_finished_job_cannot_be_cancelled(world):
    populate(world, IDS[:2])
    run(world)
    with pytest.raises(RecoveryRefused):
        jobs.cancel_job(world.service, "j1", "bob")
    assert [r["job_id"] for r in jobs.list_jobs(world.service)] == ["j1"]


def test_concurrency_drives_with_a_pool(world):
    populate(world)
    report = run(world, jobs.RunOptions(page_size=4, concurrency=3))
    assert report["counts"]["completed"] == 7 and store_states(world) == {"completed": 7}


# -- rate ----------------------------------------------------------------------------------------
def test_the_token_bucket_spaces_takes_at_the_rate():
    now = {"t": 0.0}
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now["t"] += s

    bucket = jobs.TokenBucket(5.0, clock=lambda: now["t"], sleep=sleep)
    for _ in range(11):
        bucket.take()
    assert now["t"] == pytest.approx(2.0)  # the first is free, then one per 0.2 s
    now["t"] += 10  # idle: the bucket holds at most its capacity, no burst
    before = len(slept)
    bucket.take()
    bucket.take()
    assert len(slept) == before + 1


@pytest.mark.parametrize("text, rate", [("5/s", 5.0), ("0.5", 0.5), (None, None)])
def test_rates_parse(text, rate):
    assert j.parse_rate(text) == rate


@pytest.mark.parametrize("text", ["0/s", "-1", "fast", "nan", "1e9/s"])
def test_bad_rates_are_refused(text):
    with pytest.raises(InvalidArgument):
        j.parse_rate(text)


def test_a_rate_limit_slows_the_requests_down(world):
    populate(world, IDS[:5])
    started = time.monotonic()
    report = run(world, jobs.RunOptions(rate=20.0, wait=False))
    # Loose: five requests at 20/s take at least four gaps of 0.05 s (never an upper bound).
    assert time.monotonic() - started >= 0.2 * 0.9
    assert report["this_run"]["asked"] == 5


# -- the other direction -------------------------------------------------------------------------
def test_forward_jobs_page_through_the_temporal_side_listing(world, monkeypatch):
    """``--to source`` against the service's ``forward`` and the destination's
    ``list_schedules``, both faked here: the paging, the derived ids, resume."""
    listed = [f"t{i}" for i in range(5)] + ["other"]
    asked: list[tuple[str, str]] = []

    def list_schedules(namespace, page_token=None, page_size=100):
        start = int(page_token or b"0")
        end = start + page_size
        return listed[start:end], (str(end).encode() if end < len(listed) else None)

    def forward(namespace, schedule_id, request_id=None, actor="", job_id=None):
        assert job_id == "f1"  # the job names itself on each migration it requests
        asked.append((schedule_id, request_id))
        if schedule_id == "t3" and len(asked) == 4:
            raise Crash("forward")
        return type("R", (), {"outcome": "accepted"})()

    monkeypatch.setattr(world.service.destination, "list_schedules", list_schedules,
                        raising=False)
    monkeypatch.setattr(world.service, "forward", forward)
    monkeypatch.setattr(world.service, "run_until_idle", lambda *a, **k: None)
    opts = jobs.RunOptions(page_size=2, wait=False)
    with pytest.raises(Crash):
        jobs.run_job(world.service, "f1", NS, "source", match="t*", options=opts)
    report = jobs.run_job(world.service, "f1", NS, "source", match="t*", options=opts)
    assert [sid for sid, _ in asked] == ["t0", "t1", "t2", "t3", "t2", "t3", "t4"]
    assert all(rid == j.job_request_id("f1", "source", sid) for sid, rid in asked)
    assert report["requested"] == 5 and report["phase"] == "selected"  # in progress: not done


def test_a_round_trip_by_jobs_workflow_then_source():
    """The real forward migration (infra/application/forward.py) under a job: schedules that run
    are handed to the Temporal side by one job and taken back by another."""
    clock = Clock()
    dest = SimulatedDestination(clock=clock)
    svc = open_service(MEMORY, dest, worker_id="w1", retry_for=0)
    try:
        for i in range(5):
            svc.create_schedule(NS, f"r{i}", spec=make_spec(intervals=[(60, 0)]),
                                action=make_action(workflow_type="W", task_queue="q",
                                                   workflow_id=f"act{i}"),
                                policies=make_policies(overlap="allow_all"))
        opts = jobs.RunOptions(page_size=2)
        assert jobs.run_job(svc, "out", NS, "workflow", options=opts)["counts"]["completed"] == 5
        clock.now += timedelta(minutes=2)
        dry = jobs.run_job(svc, "back", NS, "source",
                           options=jobs.RunOptions(page_size=2, dry_run=True))
        assert {d["outcome"] for d in dry["decisions"]} == {"accepted"}
        assert dry["would"]["requested"] == 5 and dry["reasons"]["would_park"] == {}
        # A schedule someone deleted meanwhile is refused as the real request would be,
        # one with a buffered start is predicted to park; nothing was written.
        dest.delete_schedule(NS, "r0")
        real = dest.describe_schedule  # the simulator buffers nothing: r1 shows one
        dest.describe_schedule = lambda ns, sid: replace(real(ns, sid), buffered=int(sid == "r1"))
        before = svc.event_count()
        dry = jobs.run_job(svc, "back", NS, "source", schedule_ids=["r0", "r1", "r2"],
                           options=jobs.RunOptions(dry_run=True))
        dest.describe_schedule = real
        assert svc.event_count() == before
        by_id = {d["schedule_id"]: d for d in dry["decisions"]}
        assert (by_id["r0"]["decision"], by_id["r0"]["reason"]) == ("skipped", "not_found")
        assert (by_id["r1"]["outcome"], by_id["r1"]["reason"]) == ("accepted", "buffered_starts")
        assert dry["reasons"]["would_park"] == {"buffered_starts": 1}
        back = jobs.run_job(svc, "back", NS, "source", options=opts)
        assert back["counts"]["completed"] == 4 and back["pages"] == 2
        assert [svc.schedule(NS, f"r{i}").incarnation for i in range(1, 5)] == [2] * 4
        assert dest.list_schedules(NS) == ([], None)
        assert svc.verify() == []
    finally:
        svc.close()


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


def test_without_forward_the_source_direction_is_refused(world, monkeypatch):
    monkeypatch.setattr(MigrationService, "forward", None, raising=False)
    with pytest.raises(InvalidArgument, match="not available in this build"):
        jobs.run_job(world.service, "f1", NS, "source")
    assert world.service.event_count() == 0
