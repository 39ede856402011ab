"""The scheduler over a fleet: schedulers sharing one store through the due index's leases (a
lease keeps a schedule to one scheduler while it is held; one lost or stolen costs a second
look, never a second start: the checker's I17 over the history and the runner's own count of
each workflow), due schedules stepped in batches, running actions watched by one call per
namespace."""
from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone

from sqlalchemy import select

from schedfence.domain.ports import DestinationUnavailable
from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source import scheduling
from schedfence.domain.source.scheduling import WATCH_EVERY, WATCH_LAZILY
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from schedfence.infra.engines.schedule_due import ScheduleDue, due_rows
from schedfence.infra.engines.scheduler import Scheduler
from tests.infra.engines.sched_world import world  # noqa: F401 (the fixture)

NS = "ns"


def create(svc, sid: str, every: int = 1, pause_on_failure: bool = False) -> datetime:
    """Every ``every`` s under ``allow_all``: with ``pause_on_failure`` a close can change
    its decisions, so its runs are watched every ``WATCH_EVERY``, else every ``WATCH_LAZILY``
    (``scheduling.closes_decide``)."""
    svc.create_schedule(NS, sid, spec=make_spec(intervals=[(every, 0)]),
                        action=make_action(workflow_type="W", task_queue="q",
                                           workflow_id=f"{sid}-act"),
                        policies=make_policies(overlap="allow_all",
                                               pause_on_failure=pause_on_failure))
    return datetime.fromisoformat(svc.load.source(NS, sid).state.cursor.replace("Z", "+00:00"))


def scheduler(svc, dest, holder: str, lease: float, crash_hook=None) -> Scheduler:
    return Scheduler(svc.load, dest, ScheduleDue(svc.views.engine, svc.app.recorder, lease_seconds=lease),
                     crash_hook=crash_hook, holder=holder)


def once_each(svc, dest) -> list[str]:
    ids = [w for ns, w in dest.workflow_ids() if ns == NS and "-act-" in w]
    assert ids and all(dest.created_count(NS, w) == 1 for w in ids)
    assert svc.verify() == []
    return ids


def test_a_lease_stolen_mid_pass_costs_a_second_look_not_a_second_start(world):
    svc, dest = world
    t0 = create(svc, "s", every=2)
    now = t0 + timedelta(seconds=2)
    thief = scheduler(svc, dest, "B", lease=0.0)
    stolen = []

    def hook(point: str) -> None:  # A has issued the start; B takes the expired lease
        if point == "after_tick_save" and not stolen:
            stolen.append(thief.run_once(now))

    first = scheduler(svc, dest, "A", lease=0.0, crash_hook=hook).run_once(now)
    assert stolen[0].started == 1 and first.started == 0  # B sent it; A's answer was a dedupe
    assert len(once_each(svc, dest)) == 1


def test_a_held_lease_keeps_the_schedule_from_another_scheduler_until_it_expires(world):
    svc, dest = world
    t0 = create(svc, "s", every=2)
    now = t0 + timedelta(seconds=2)

    def dies(point: str) -> None:
        if point == "after_tick_save":
            raise RuntimeError("killed")  # its lease stays, unreleased

    try:
        scheduler(svc, dest, "A", lease=1.0, crash_hook=dies).run_once(now)
    except RuntimeError:
        pass
    other = scheduler(svc, dest, "B", lease=1.0)
    assert other.run_once(now).schedules == 0  # A's lease holds
    time.sleep(1.1)
    assert other.run_once(now).started == 1  # expired: B sends A's recorded start
    assert len(once_each(svc, dest)) == 1


def test_two_schedulers_whose_leases_keep_expiring_start_each_time_once(world):
    svc, dest = world
    for k in range(6):
        create(svc, f"s{k}")
    stop, errors = threading.Event(), []

    def run(holder: str) -> None:
        sched = scheduler(svc, dest, holder, lease=0.0)  # every lease is stealable at once
        while not stop.is_set():
            try:
                sched.run_once(datetime.now(timezone.utc))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(repr(exc))

    threads = [threading.Thread(target=run, args=(h,)) for h in ("A", "B")]
    for t in threads:
        t.start()
    time.sleep(4)
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    ids = once_each(svc, dest)
    assert len(ids) >= 6  # every schedule started at least one time


def test_a_batch_is_ticked_in_one_append_and_its_answers_saved_in_another(world, monkeypatch):
    svc, dest = world
    t0 = max(create(svc, f"s{k}", every=2) for k in range(8))
    svc.run_scheduler(now=t0)  # each new schedule looked at once: nothing due yet
    appends = []
    save = svc.app.save
    monkeypatch.setattr(svc.app, "save", lambda *aggs, **kw: appends.append(len(aggs)) or
                        save(*aggs, **kw))
    dest.inject("start", "unavailable")  # one of the eight starts finds the runner down
    report = svc.run_scheduler(now=t0 + timedelta(seconds=2))
    assert (report.schedules, report.started, report.retrying) == (8, 7, 1)
    assert appends == [8, 8]  # the ticks, then the answers
    svc.run_scheduler(now=t0 + timedelta(seconds=3))  # after the backoff: asked again
    assert {w.split("-act-")[0] for w in once_each(svc, dest)} == {f"s{k}" for k in range(8)}


def test_a_batchs_running_actions_are_watched_in_one_call_per_namespace(world, monkeypatch):
    svc, dest = world
    t0 = max(create(svc, f"s{k}", every=2, pause_on_failure=True) for k in range(5))
    svc.run_scheduler(now=t0 + timedelta(seconds=2))
    running = {w for s in range(5) for w in svc.load.source(NS, f"s{s}").state.running}
    # every schedule has a run; one created 2 s before the last has two (its times since)
    assert {w.split("-act-")[0] for w in running} == {f"s{k}" for k in range(5)}
    calls = []
    monkeypatch.setattr(dest, "describe", lambda *a, **k: calls.append("describe"))
    watch = dest.run_statuses
    monkeypatch.setattr(dest, "run_statuses", lambda ns, ids: calls.append(sorted(ids)) or
                        watch(ns, ids))
    for w in sorted(running)[:2]:
        dest.complete(NS, w)
    report = svc.run_scheduler(now=t0 + timedelta(seconds=2) + WATCH_EVERY)
    assert calls == [sorted(running)] and report.closed == 2  # watched before any tick
    left = {w for s in range(5) for w in svc.load.source(NS, f"s{s}").state.running}
    assert left & running == set(sorted(running)[2:])


def windows_from(monkeypatch, start: datetime) -> None:
    """Every schedule's ``WATCH_LAZILY`` windows begin at ``start`` (not at a fraction drawn
    from its name), so a test knows which looks fall in which window."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    monkeypatch.setattr(scheduling, "lazy_phase", lambda state: (start - epoch) % WATCH_LAZILY)


def test_runs_no_close_can_decide_on_are_watched_lazily_not_at_each_look(world, monkeypatch):
    """Every second under ``allow_all``: each look starts its time, but asks for the runs'
    statuses only at its first look in each ``WATCH_LAZILY`` window; a schedule whose close
    can pause it is asked at every look. Every time starts once either way."""
    svc, dest = world
    t0 = max(create(svc, "lazy"), create(svc, "eager", pause_on_failure=True))
    windows_from(monkeypatch, t0 + timedelta(seconds=1.5))
    asked: list[str] = []  # each schedule once per call that asked for its runs
    watch = dest.run_statuses
    monkeypatch.setattr(dest, "run_statuses", lambda ns, ids: asked.extend(
        {w.split("-act-")[0] for w in ids}) or watch(ns, ids))
    lazily = int(WATCH_LAZILY.total_seconds())
    seconds, most = lazily + 2, {"lazy": 0, "eager": 0}
    for k in range(1, seconds + 1):
        report = svc.run_scheduler(now=t0 + timedelta(seconds=k))
        assert report.started == 2, (k, report)
        for sid in most:
            running = svc.load.source(NS, sid).state.running
            most[sid] = max(most[sid], len(running))
            dest.complete(NS, running[-1])  # the run this look started
    assert asked.count("eager") == seconds - 1  # each look but the first (nothing ran yet)
    # its first run's look, then its first look in its next WATCH_LAZILY window (11.5 s on)
    assert asked.count("lazy") == 2
    assert most == {"lazy": lazily, "eager": 1}  # closes recorded late, not missed:
    report = svc.run_scheduler(now=t0 + timedelta(seconds=seconds) + WATCH_LAZILY)
    # its next window: the last run's close recorded, only the times this look started run
    assert len(svc.load.source(NS, "lazy").state.running) == report.started // 2 == lazily
    assert len(once_each(svc, dest)) == 2 * (seconds + lazily)


def test_a_trigger_landing_after_a_look_chose_not_to_watch_waits_for_a_look_that_does(
        world, monkeypatch):
    """A look at an ``allow_all`` schedule whose runs were asked for 6 s ago, in the same
    ``WATCH_LAZILY`` window, does not ask again; a trigger under ``skip`` lands before its
    tick is saved, so the tick is decided again on the schedule reloaded, whose running list
    is stale (its runs have closed).
    Deciding on it would drop the trigger where the never-moved schedule starts it: the tick
    waits, and the next look, at once, watches first and starts both times."""
    svc, dest = world
    t0 = create(svc, "s", every=5)
    first = t0.replace(microsecond=0) + timedelta(seconds=5 - t0.second % 5)
    windows_from(monkeypatch, first + timedelta(seconds=5.1))  # no watch from 5.2 to 15.1 s
    assert svc.run_scheduler(now=first + timedelta(seconds=0.2)).started == 1  # nothing ran
    assert svc.run_scheduler(now=first + timedelta(seconds=5.2)).started == 1  # asked: running
    for w in svc.load.source(NS, "s").state.running:
        dest.complete(NS, w)
    landed = []

    def hook(point: str) -> None:
        if point == "before_tick_save" and not landed:
            landed.append(svc.trigger_schedule(NS, "s", overlap="skip",
                                               now=first + timedelta(seconds=11.3)))

    at = first + timedelta(seconds=11.4)  # the spec's time at 10 s is due
    assert svc.run_scheduler(now=at, crash_hook=hook).started == 0 and landed
    state = svc.load.source(NS, "s").state
    assert len(state.running) == 2 and len(state.buffered) == 1  # nothing decided on them
    report = svc.run_scheduler(now=at + timedelta(seconds=0.1))
    assert (report.closed, report.started) == (2, 2)  # the trigger and the spec's time
    assert len(once_each(svc, dest)) == 4


def minute_after(t: datetime) -> datetime:
    """The first whole minute after ``t``: an every-60-s schedule's first time."""
    return t.replace(second=0, microsecond=0) + timedelta(minutes=1)


def test_a_running_action_is_looked_at_within_the_watch_interval_not_at_every_pass(world):
    svc, dest = world
    at = minute_after(create(svc, "s", every=60, pause_on_failure=True)) + \
        timedelta(seconds=0.2)  # its next: 59.8 s
    assert svc.run_scheduler(now=at).started == 1
    [run] = svc.load.source(NS, "s").state.running
    dest.complete(NS, run)
    version = svc.load.source(NS, "s").version
    for later in (0.1, 0.5, 0.9):  # a scheduler polling faster than it needs to watch
        assert svc.run_scheduler(now=at + timedelta(seconds=later)).schedules == 0
    assert svc.load.source(NS, "s").version == version  # nothing looked, nothing written
    report = svc.run_scheduler(now=at + WATCH_EVERY)
    assert (report.schedules, report.closed) == (1, 1)
    assert svc.load.source(NS, "s").state.running == []
    assert svc.run_scheduler(now=at + 2 * WATCH_EVERY).schedules == 0  # nothing to watch now


def test_a_pass_reports_the_index_s_next_due_time_for_the_loop_s_timer(world):
    svc, dest = world
    nominal = minute_after(create(svc, "s", every=60, pause_on_failure=True))
    at = nominal + timedelta(seconds=0.2)  # a look a second later comes before the next time
    report = svc.run_scheduler(now=at)
    assert report.started == 1 and report.next_due == at + WATCH_EVERY  # its run is watched
    assert report.to_dict()["next_due"] == (at + WATCH_EVERY).isoformat()
    [run] = svc.load.source(NS, "s").state.running
    dest.complete(NS, run)
    report = svc.run_scheduler(now=at + WATCH_EVERY)
    assert report.closed == 1 and report.next_due == nominal + timedelta(seconds=60)


def next_even(t: datetime) -> datetime:
    """The first even second after ``t``: every 2 s schedule's next time once a pass at ``t``
    has taken what was due (the schedules of one test are made over several ms, maybe on
    both sides of a time)."""
    second = t.replace(microsecond=0) + timedelta(seconds=1)
    return second + timedelta(seconds=second.second % 2)


def test_a_batchs_starts_go_in_one_call_where_the_runner_takes_a_batch(world, monkeypatch):
    svc, dest = world
    t0 = max(create(svc, f"s{k}", every=2) for k in range(8))
    svc.run_scheduler(now=t0)
    calls = []
    monkeypatch.setattr(dest, "start_workflow", lambda r: calls.append("one") or 1 / 0)
    batch = dest.start_workflows
    monkeypatch.setattr(dest, "start_workflows", lambda rs: calls.append(len(rs)) or batch(rs))
    report = svc.run_scheduler(now=next_even(t0))  # one time each
    assert calls == [8] and report.started == 8
    assert {w.split("-act-")[0] for w in once_each(svc, dest)} == {f"s{k}" for k in range(8)}


def test_a_batch_call_that_fails_whole_leaves_each_start_to_be_asked_again(world, monkeypatch):
    svc, dest = world
    t0 = max(create(svc, f"s{k}", every=2) for k in range(6))
    svc.run_scheduler(now=t0)
    t0 = next_even(t0) - timedelta(seconds=2)  # at t0 + 2 one time each, none at t0 + 3
    batch = dest.start_workflows
    dest.inject("start", "lose_response", times=2)  # two starts made, their answers lost

    def lost_whole(requests):  # the batch committed, then its answer was lost
        batch(requests)
        raise DestinationUnavailable("the connection dropped after COMMIT")
    monkeypatch.setattr(dest, "start_workflows", lost_whole)
    report = svc.run_scheduler(now=t0 + timedelta(seconds=2))
    assert (report.started, report.retrying) == (0, 6)
    monkeypatch.setattr(dest, "start_workflows", batch)
    report = svc.run_scheduler(now=t0 + timedelta(seconds=3))  # after the backoff
    assert report.started == 6  # each deduplicated by its request id: created once
    assert {w.split("-act-")[0] for w in once_each(svc, dest)} == {f"s{k}" for k in range(6)}
    assert {o for _, o in dest.start_log()} >= {"created", "deduplicated", "lost_response"}


class OneAtATime:
    """A runner without a batch call (as Temporal): starts are sent in flight together."""

    def __init__(self, dest) -> None:
        self.dest, self.calls, self.lock = dest, 0, threading.Lock()
        self.together = threading.Barrier(2, timeout=20)  # broken unless two are in flight

    def start_workflow(self, request):
        with self.lock:
            self.calls += 1
            first_two = self.calls <= 2
        if first_two:
            self.together.wait()
        return self.dest.start_workflow(request)

    def __getattr__(self, name):
        if name == "start_workflows":
            raise AttributeError(name)
        return getattr(self.dest, name)


def test_a_runner_without_a_batch_call_gets_its_starts_in_flight_together(world):
    svc, dest = world
    t0 = max(create(svc, f"s{k}", every=2) for k in range(8))
    runner = OneAtATime(dest)
    scheduler(svc, runner, "h1", 30.0).run_once(t0)
    report = scheduler(svc, runner, "h1", 30.0).run_once(next_even(t0))
    assert report.started == 8 and not runner.together.broken
    assert {w.split("-act-")[0] for w in once_each(svc, dest)} == {f"s{k}" for k in range(8)}


def test_a_take_leases_the_schedulers_own_due_rows_first_then_any_others(world):
    svc, _ = world
    due = ScheduleDue(svc.views.engine, svc.app.recorder, lease_seconds=60)
    due.sweep()  # the table
    rows = [("a1", 10, "A"), ("a2", 20, "B"), ("a3", 30, "A"), ("a4", 40, ""), ("a5", 50, "B")]
    with svc.views.engine.begin() as conn:
        conn.execute(due_rows.insert(), [{"aggregate_id": a, "version": 1, "due_us": d,
                                          "holder": h, "lease_us": 0} for a, d, h in rows])
    at = datetime.now(timezone.utc)
    assert due.take(at, "B", 1) == ["a2"]  # its own among the earliest WINDOW x 1 (not a5)
    due.release(["a2"], "B")
    assert sorted(due.take(at, "B", 3)) == ["a1", "a2", "a5"]  # B's own two, then the earliest
    assert sorted(due.take(at, "A", 3)) == ["a3", "a4"]  # a1 is leased to B now
    due.release(["a1", "a2"], "B")
    # A's own (held: renewed), then the earliest B gave back (a given-back row keeps its last
    # holder, B, but is free to any scheduler)
    assert sorted(due.take(at, "A", 3)) == ["a1", "a3", "a4"]


def test_a_sweep_marks_what_another_writer_changed_in_the_store_reading_no_event(world,
                                                                                  monkeypatch):
    svc, dest = world
    t0 = max(create(svc, f"s{k}", every=3600) for k in range(3))
    scheduler(svc, dest, "A", 60.0).run_once(t0)  # each looked at: due in an hour
    due = ScheduleDue(svc.views.engine, svc.app.recorder)

    def refused(what: str):
        def call(*_a, **_k):
            raise AssertionError(what)
        return call
    monkeypatch.setattr(svc.app.recorder, "select_notifications",
                        refused("a sweep read events into the process"))
    assert due.sweep() == 0  # the pass's own steps: already at their rows' versions
    svc.update_schedule(NS, "s1", paused=True)  # a command's change
    assert due.sweep() == 1  # marked once; the position moved past it
    assert due.take(t0, "B", 10) == [str(svc.load.source(NS, "s1").id)]  # due at once
    monkeypatch.setattr(due, "_writing", refused("an idle sweep wrote"))  # nothing new
    assert due.sweep() == 0


def test_a_sweep_leaves_alone_a_row_already_at_its_version_while_another_holds_it(pg_store):
    """An upsert locks every row it conflicts with, even one its WHERE leaves as it is: a sweep
    over a step a pass already settled waited on whoever held that row (another scheduler's
    settle), and hid it from their takes. It marks the changed schedule without touching it."""
    dest = SimulatedDestination()
    with open_service(pg_store, dest) as svc:
        t0 = max(create(svc, f"s{k}", every=2) for k in range(2))
        scheduler(svc, dest, "A", 60.0).run_once(t0)
        assert scheduler(svc, dest, "A", 60.0).run_once(next_even(t0)).started == 2
        held, changed = (str(svc.load.source(NS, f"s{k}").id) for k in range(2))
        svc.update_schedule(NS, "s1", paused=True)  # a command's change, after the pass's
        due = ScheduleDue(svc.views.engine, svc.app.recorder)
        marked: list[int] = []
        with svc.views.engine.connect() as other:  # holds s0's row, as a settle does
            other.begin()
            other.execute(select(due_rows.c.version).where(
                due_rows.c.aggregate_id == held).with_for_update())
            sweeping = threading.Thread(target=lambda: marked.append(due.sweep()))
            sweeping.start()
            sweeping.join(timeout=10)
            waited = sweeping.is_alive()
            other.rollback()
        sweeping.join()
        assert not waited and marked == [1]
        assert due.take(next_even(t0), "B", 10) == [changed]
