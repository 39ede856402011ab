"""The listing oracle's window (``check_listing``, ``judged_until``), a settle that read the
server's starts after a delete (BoundarySettled v5 ``after_delete``), and two copies' starts
judged together (``once_across``); issue 45, items 4 and 5."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from schedfence.domain.invariants.exactly_once_log import check_listing
from schedfence.domain.invariants.once_across import once_across
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.source.action import nominal_text, parse_nominal

from tests.domain.invariants.invariant_histories import index_of, numbered
from tests.domain.invariants.once_histories import (NS, SID, T0, Clock, events, handed_over,
                                                    listing, program)
from tests.domain.invariants.test_once import i21
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service

M = Migration


def test_listed_times_after_until_are_cut_not_counted_as_never_owed() -> None:
    svc, sim, clock = handed_over()
    clock.now += timedelta(minutes=5)
    ids = listing(sim)  # the server's starts up to now
    until = clock.now - timedelta(minutes=2)  # the window judged ends earlier
    later = [i for i in ids if parse_nominal(i.removeprefix("act-")) > until]
    assert len(later) >= 2  # the test is only worth its time if some are cut
    verdict = check_listing(list(enumerate(events(svc), 1)), ids, until)[(NS, SID)]
    assert verdict.ok, verdict.describe()  # before the fix: the later ones "not owed"
    stray = until - timedelta(seconds=30)  # inside the window: still judged
    verdict = check_listing(list(enumerate(events(svc), 1)),
                            ids + [f"act-{nominal_text(stray)}"], until)[(NS, SID)]
    assert verdict.unexpected == (stray,) and not verdict.missing


def test_a_live_source_is_judged_up_to_its_cursor() -> None:
    clock = Clock()
    sim = SimulatedDestination(seed=3, clock=clock)
    svc = open_service("sqlite:///:memory:", sim, worker_id="w", retry_for=0)
    svc.create_schedule(NS, SID, now=T0, **program())
    clock.now = T0 + timedelta(minutes=3)
    svc.run_scheduler(now=clock.now)
    ids = [w for ns, w in sim.workflow_ids() if ns == NS]
    assert len(ids) == 3
    later = T0 + timedelta(minutes=30)  # the source has not processed past its cursor yet
    assert check_listing(list(enumerate(events(svc), 1)), ids, later)[(NS, SID)].ok
    lost = check_listing(list(enumerate(events(svc), 1)), ids[1:], later)[(NS, SID)]
    assert lost.missing == (parse_nominal(ids[0].removeprefix("act-")),)


def after_delete(history: list[Any], deleted: str, *times: str) -> list[Any]:
    i = index_of(history, M.BoundarySettled)
    return history[:i] + [history[i].model_copy(update={
        "deleted_at": deleted, "after_delete": list(times)})] + history[i + 1:]


def test_starts_the_server_made_after_a_delete_are_named() -> None:
    svc, sim, clock = handed_over()
    history = events(svc)
    settle = next(e for e in history if isinstance(e, M.BoundarySettled))
    assert settle.after_delete == []  # a live settle: none (and v1-v4 read as none)
    last = max([parse_nominal(t) for t in settle.started] + [clock.now])
    deleted = last + timedelta(seconds=20, milliseconds=500)
    after = [nominal_text(deleted + timedelta(seconds=s)) for s in (39.5, 99.5)]
    assert i21(after_delete(history, deleted.isoformat())) == []  # nothing after it
    [message] = i21(after_delete(history, deleted.isoformat(), *after))
    assert f"started 2 action(s) at or after its schedule was deleted at " \
           f"{deleted.isoformat()} (first {after[0]})" in message
    # The listing oracle: the delete ends what was owed; a listed start after it is named.
    ids = listing(sim)
    ids = [i for i in ids if parse_nominal(i.removeprefix("act-")) < deleted]
    until = deleted + timedelta(minutes=5)
    recorded = list(enumerate(after_delete(history, deleted.isoformat()), 1))
    assert check_listing(recorded, ids, until)[(NS, SID)].ok
    verdict = check_listing(recorded, ids + [f"act-{t}" for t in after], until)[(NS, SID)]
    assert verdict.unexpected == tuple(parse_nominal(t) for t in after)


def test_two_copies_that_both_ran_the_source_are_named_twice() -> None:
    clock = Clock()
    sim = SimulatedDestination(seed=3, clock=clock)
    svc = open_service("sqlite:///:memory:", sim, worker_id="w", retry_for=0)
    svc.create_schedule(NS, SID, now=T0, **program())
    svc.run_scheduler(now=T0 + timedelta(minutes=1))
    shared = events(svc)
    copy = [*shared]  # a copy of the log so far, which then ran on its own
    svc.run_scheduler(now=T0 + timedelta(minutes=3))
    mine = events(svc)
    assert once_across(numbered(mine), numbered(copy)) == []  # the copy's starts: shared
    # The copy ran the same two minutes itself: the same slots at its own events.
    theirs = copy + [e.model_copy(update={"timestamp": e.timestamp + timedelta(seconds=1)})
                     for e in mine[len(shared):]]
    [v] = once_across(numbered(mine), numbered(theirs))
    assert f"{NS}/{SID} incarnation 1: nominal time 2026-03-02T12:02:00+00:00 (auto) " \
           "started by the other store's source and by this store" in v.message, v.message
    assert "started by the other store's source and by this store (started twice); " \
           "2 such time(s) in all" in v.message, v.message
