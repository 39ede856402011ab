"""The scheduler keeps the schedules it saw between passes (``SeenSchedules``) and brings each
up to date from the events stored after it, not from its whole history: what another writer
stored in between (a pause, another scheduler's start) is seen before anything is decided, a
pass that fails forgets them all, and every time still starts once."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.adapters.store import bulk
from schedfence.infra.application.service import open_service
from tests.infra.engines.test_scheduler_fleet import NS, create, once_each


@pytest.fixture
def two(file_store_url: str):
    """One store, the simulator, and two services on it: the scheduler's and another writer's."""
    dest = SimulatedDestination()
    with open_service(file_store_url, dest) as svc, open_service(file_store_url, dest) as other:
        yield svc, other, dest


def test_a_seen_schedule_is_read_from_its_new_events_only(two, monkeypatch):
    svc, _, dest = two
    t0 = max(create(svc, f"s{k}", every=2) for k in range(3))
    svc.run_scheduler(now=t0)
    asked = []
    select = bulk._select
    monkeypatch.setattr(bulk, "_select", lambda rec, after: asked.append(after) or
                        select(rec, after))
    svc.run_scheduler(now=t0 + timedelta(seconds=2))
    versions = {svc.load.source(NS, f"s{k}").id: svc.load.source(NS, f"s{k}").version
                for k in range(3)}
    assert asked and all(v > 0 for call in asked for _, v in call)  # none read from version 1
    asked.clear()
    svc.run_scheduler(now=t0 + timedelta(seconds=4))
    assert {i: v for call in asked for i, v in call} == versions  # from where it left each
    started = [w.split("-act-")[0] for w in once_each(svc, dest)]  # each once
    assert all(started.count(f"s{k}") >= 2 for k in range(3))


def test_what_another_writer_stored_between_passes_is_seen_first(two):
    svc, other, dest = two
    t0 = create(svc, "s0", every=2)
    svc.run_scheduler(now=t0 + timedelta(seconds=2))  # one start; the schedule now seen
    other.update_schedule(NS, "s0", paused=True)  # stored by another writer in between
    report = svc.run_scheduler(now=t0 + timedelta(seconds=6))
    assert report.started == 0  # the pause was read before deciding: nothing started
    assert svc.load.source(NS, "s0").state.paused
    other.update_schedule(NS, "s0", paused=False)
    svc.run_scheduler(now=t0 + timedelta(seconds=8))
    assert len(once_each(svc, dest)) == 2  # 2 s, and 8 s after the unpause


def test_another_schedulers_starts_between_passes_are_not_made_again(two):
    svc, other, dest = two
    t0 = max(create(svc, f"s{k}", every=2) for k in range(4))
    svc.run_scheduler(now=t0 + timedelta(seconds=2))
    other.run_scheduler(now=t0 + timedelta(seconds=4))  # the other one takes the 4 s times
    svc.run_scheduler(now=t0 + timedelta(seconds=4))  # this one's schedules are stale: read on
    started = [w.split("-act-")[0] for w in once_each(svc, dest)]  # each once
    assert all(started.count(f"s{k}") >= 2 for k in range(4))


def test_a_pass_that_fails_forgets_what_it_saw(two):
    svc, _, dest = two
    t0 = max(create(svc, f"s{k}", every=2) for k in range(3))
    svc.run_scheduler(now=t0)
    assert len(svc._schedules.seen.known([svc.load.source(NS, "s0").id])) == 1

    def crash(point: str) -> None:
        if point == "after_start_call":
            raise RuntimeError("killed")
    with pytest.raises(RuntimeError):
        svc.run_scheduler(now=t0 + timedelta(seconds=2), crash_hook=crash)
    assert svc._schedules.seen.known([svc.load.source(NS, f"s{k}").id for k in range(3)]) == {}
    svc.run_scheduler(now=t0 + timedelta(seconds=3))  # the answers asked again: deduplicated
    assert {w.split("-act-")[0] for w in once_each(svc, dest)} == {"s0", "s1", "s2"}


def test_passes_run_side_by_side_never_share_a_schedule_object(two):
    svc, _, dest = two
    seen = svc._schedules.seen
    with seen.borrowed() as first, seen.borrowed() as beside:
        assert first is seen and beside is not seen and beside.known([]) == {}
    with seen.borrowed() as again:
        assert again is seen  # released after the pass
    t0 = max(create(svc, f"s{k}", every=1) for k in range(4))
    errors: list[BaseException] = []

    def passes(offset: float) -> None:
        try:
            for n in range(6):
                svc.run_scheduler(now=t0 + timedelta(seconds=n + offset))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
    threads = [threading.Thread(target=passes, args=(o,)) for o in (0.0, 0.5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    started = [w.split("-act-")[0] for w in once_each(svc, dest)]  # each once, checker clean
    assert all(started.count(f"s{k}") >= 5 for k in range(4))
