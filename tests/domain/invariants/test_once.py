"""I21: the checker runs the exactly-once oracle over the log (domain/invariants/exactly_once_log.py).

A real history (tests/domain/invariants/once_histories.py: three spec times started by the source, a
backfill handed over whole) is clean; edited so that a (time, origin) is started by the
source and planned by the handover too, or planned though the schedule never owed it, the
checker names the time. The same oracle over a server's listing of ``<id>-<time>``
workflows names a time listed twice, one missing and a stray one."""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from schedfence.domain.source.action import nominal_text, parse_nominal
from schedfence.domain.invariants.exactly_once_log import check_listing
from schedfence.domain.invariants.checker import check_history
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.source.runs import ActionStartIssued
from schedfence.domain.source.schedule import Schedule

from tests.domain.invariants.invariant_histories import index_of, numbered
from tests.domain.invariants.once_histories import (NS, SID, T0, events, handed_over, listing,
                                        paused_and_updated)

M = Migration


def clean() -> list[Any]:
    svc, _, _ = handed_over()
    return events(svc)


def i21(history: list[Any]) -> list[str]:
    found = check_history(numbered(history))
    assert {v.invariant for v in found} <= {"I21"}, found  # the edit breaks nothing else
    return [v.message for v in found]


def settled(history: list[Any], *times: str) -> list[Any]:
    i = index_of(history, M.BoundarySettled)
    return history[:i] + [history[i].model_copy(update={"started": list(times)})] + \
        history[i + 1:]


def test_a_clean_handover_is_exactly_once() -> None:
    history = clean()
    assert any(isinstance(e, M.BoundarySettled) for e in history)
    assert i21(history) == []


def test_a_settled_time_the_source_started_is_named_twice() -> None:
    history = settled(clean(), "2026-03-02T12:02:00Z")  # the source's own auto start
    [message] = i21(history)
    assert f"{NS}/{SID} incarnation 1: nominal time 2026-03-02T12:02:00+00:00 (auto) " \
        "started twice" in message


def test_a_backfill_time_the_source_started_before_the_handover_is_named_twice() -> None:
    """Item 4's kind: the source started a backfill's time the handover still carries (its
    backfill cursor behind what the source started)."""
    history = clean()
    fence = index_of(history, Schedule.FencedForMigration)
    issued = history[index_of(history, ActionStartIssued)]
    double = issued.model_copy(update={"nominal": "2026-03-02T11:53:00Z",
                                       "origin": "backfill-1",
                                       "workflow_id": "act-2026-03-02T11:53:00Z"})
    [message] = i21(history[:fence] + [double] + history[fence:])
    assert "nominal time 2026-03-02T11:53:00+00:00 (backfill-1) started twice" in message


def test_a_planned_time_the_schedule_never_owed_is_named() -> None:
    [message] = i21(settled(clean(), "2026-03-02T12:04:17Z"))  # no spec time: every minute
    assert "nominal time 2026-03-02T12:04:17+00:00 (auto) started or planned but never " \
        "owed" in message


def test_a_handed_over_trigger_never_triggered_is_named() -> None:
    history = clean()
    start = index_of(history, M.DestinationStartIssued)
    doc = dict(history[start].input)
    doc["handover"] = dict(doc["handover"], buffered=[
        {"nominal": "2026-03-02T12:03:10Z", "origin": "trigger", "overlap": "allow_all"}])
    history[start] = history[start].model_copy(update={"input": doc})
    [message] = i21(history)
    assert "nominal time 2026-03-02T12:03:10+00:00 (trigger)" in message


# -- the same oracle over a server's listing ---------------------------------------------------
def test_a_listing_of_exactly_what_was_owed_is_exactly_once() -> None:
    svc, sim, clock = handed_over()
    clock.now += timedelta(minutes=5)
    ids = listing(sim)
    assert len(ids) == len(set(ids)) > 10
    verdict = check_listing(list(enumerate(events(svc), 1)), ids, clock.now)[(NS, SID)]
    assert verdict.ok, verdict.describe()


def test_a_listing_names_a_time_twice_one_missing_and_a_stray() -> None:
    svc, sim, clock = handed_over()
    clock.now += timedelta(minutes=5)
    ids = sorted(listing(sim))
    twice, lost = ids[2], ids[-3]
    stray = f"act-{nominal_text(T0 + timedelta(minutes=2, seconds=7))}"
    bad = [i for i in ids if i != lost] + [twice, stray, "act-2-not-a-time", "other-x"]
    verdict = check_listing(list(enumerate(events(svc), 1)), bad, clock.now)[(NS, SID)]
    at = lambda wid: parse_nominal(wid.removeprefix("act-"))  # noqa: E731
    assert verdict.twice == (at(twice),) and verdict.missing == (at(lost),)
    assert verdict.unexpected == (at(stray),)
    assert verdict.first == min(("twice", at(twice)), ("missing", at(lost)),
                                ("unexpected", at(stray)), key=lambda f: f[1])


def test_a_listing_of_the_destination_alone_adds_the_logs_starts() -> None:
    svc, sim, clock = handed_over()
    clock.now += timedelta(minutes=5)
    source = {wid for ns, wid in sim.workflow_ids()}
    destination_only = [i for i in listing(sim) if i not in source]
    history = list(enumerate(events(svc), 1))
    assert check_listing(history, destination_only, clock.now, log_starts=True)[(NS, SID)].ok
    alone = check_listing(history, destination_only, clock.now)[(NS, SID)]
    assert len(alone.missing) == 3  # the source's three starts, not listed


def test_pauses_and_updates_are_read_from_the_log() -> None:
    """A pause while the scheduler was down and a spec update, both clean; a settled time
    inside the paused stretch, or the old spec's after the update, was never owed."""
    history = events(paused_and_updated())
    started = sorted(e.nominal for e in history if isinstance(e, ActionStartIssued))
    assert started == ["2026-03-02T12:01:00Z", "2026-03-02T12:02:00Z", "2026-03-02T12:07:00Z",
                       "2026-03-02T12:09:00Z"], started
    assert i21(history) == []
    [paused] = i21(settled(history, "2026-03-02T12:04:00Z"))
    assert "12:04:00+00:00 (auto) started or planned but never owed" in paused
    [old_spec] = i21(settled(history, "2026-03-02T12:08:00Z"))
    assert "12:08:00+00:00 (auto) started or planned but never owed" in old_spec


def test_a_settle_that_recorded_starts_beyond_the_limit_is_named() -> None:
    """A limited handover whose create came after its pin: the settle records how far the
    server's own starts went beyond the limit (BoundarySettled v4), and the checker says so."""
    history = clean()
    i = index_of(history, M.BoundarySettled)
    over = history[:i] + [history[i].model_copy(update={"over_limit": 2})] + history[i + 1:]
    [message] = i21(over)
    assert "started 2 action(s) beyond the schedule's limit" in message
    zero = history[:i] + [history[i].model_copy(update={"over_limit": 0})] + history[i + 1:]
    assert i21(zero) == []
