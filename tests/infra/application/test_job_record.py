"""Recording a batch job's pages and rounds (infra/application/job_record.py): on the job the
runner holds, without loading and folding its whole history again before each page, and, when
another runner recorded on the job in between, deciding again on the job as it stands then,
never leaving the held job half-recorded."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from schedfence.domain import job as j
from schedfence.domain.errors import MigrationPending
from schedfence.infra.application import job_record, jobs

from tests.helpers import Crash, World, world  # noqa: F401

IDS = [f"s{i:02}" for i in range(12)]


def count_loads_and_folds(w: World, monkeypatch: pytest.MonkeyPatch) -> tuple[Counter, Counter]:
    """Whole-history loads of each job (by its id), and its events folded, from now on."""
    loads: Counter = Counter()
    folds: Counter = Counter()
    get, evolve = w.service.app.repository.get, j.evolve_job

    def counted_get(aggregate_id, *args, **kwargs):
        loads[aggregate_id] += 1
        return get(aggregate_id, *args, **kwargs)

    def counted_evolve(state, event):
        folds[event.originator_id] += 1
        return evolve(state, event)

    monkeypatch.setattr(w.service.app.repository, "get", counted_get)
    monkeypatch.setattr(j.Job, "evolve", staticmethod(counted_evolve))
    return loads, folds


def test_a_page_is_recorded_without_folding_the_earlier_pages_again(world, monkeypatch):
    """Seven pages load the job as often as one page does (when it is opened and for the
    report), and the job's events are folded a bounded number of times each: the earlier
    pages are not folded again before each page (quadratic over a job)."""
    for sid in IDS:
        world.service.create_schedule("many", sid)
        world.service.create_schedule("one", sid)
    loads, folds = count_loads_and_folds(world, monkeypatch)
    quick = jobs.RunOptions(wait=False, blocked_rounds=0)
    jobs.run_job(world.service, "paged", "many", "workflow", options=replace(quick, page_size=2))
    jobs.run_job(world.service, "whole", "one", "workflow", options=quick)
    paged, whole = j.job_aggregate_id("paged"), j.job_aggregate_id("whole")
    assert loads[paged] == loads[whole]  # opened, and read for its report
    assert jobs.load_job(world.service, "paged").state.pages == 7  # 6 full, 1 empty last
    assert jobs.load_job(world.service, "whole").state.pages == 1
    events = len(list(world.service.app.events.get(paged)))
    assert events == 8
    assert folds[paged] <= 3 * events, "each event folded a bounded number of times"


def _define(w: World) -> j.Job:
    job = job_record.open_job(w.service, "j1", j.make_selection("ns", "workflow"), "ann", False)
    assert job is not None
    return job


def _decided(sid: str) -> dict[str, str]:
    return j.requested(sid, j.job_request_id("j1", "workflow", sid), "accepted")


def _job_events(w: World) -> list:
    return list(w.service.app.events.get(j.job_aggregate_id("j1")))


def test_a_page_another_runner_recorded_in_between_is_seen(world, monkeypatch):
    """The held job is behind by the time it is saved (another runner recorded the same
    page first): the save is refused, the page decided again on the job as it stands, which
    records nothing over the other's page; the held job is left as it was."""
    held = _define(world)

    def other_runner() -> None:
        other = jobs.load_job(world.service, "j1")
        job_record.record_page(world.service, other, None, "c1", False, [_decided("a")])

    world.hooks.once("job_page.before_append", other_runner)
    result = job_record.record_page(world.service, held, None, "c1", False, [_decided("b")])
    assert (result.version, sorted(result.state.decided), result.state.cursor) == (2, ["a"],
                                                                                    "c1")
    assert [type(e).__name__ for e in _job_events(world)] == ["Defined", "PageDecided"]
    assert (held.version, held.state.pages, held.state.decided, held.pending_events) == (
        1, 0, {}, [])
    # The next page goes on from the job returned, on the first try.
    loads, _ = count_loads_and_folds(world, monkeypatch)
    after = job_record.record_page(world.service, result, "c1", "c2", True, [_decided("c")])
    assert (after.version, after.state.exhausted, sorted(after.state.decided)) == (
        3, True, ["a", "c"])
    assert loads[held.id] == 0


def _blocked(sid: str) -> dict[str, str]:
    return j.refused(sid, j.job_request_id("j1", "workflow", sid), MigrationPending("held"))


def test_a_round_another_runner_recorded_in_between_is_seen(world):
    """The same for a round: the other runner's round 1 stands, this one records nothing
    (and says so: what it recorded is empty)."""
    held = job_record.record_page(world.service, _define(world), None, "c1", True,
                                  [_blocked("a")])
    assert held.state.blocked == ["a"]

    def other_runner() -> None:
        other = jobs.load_job(world.service, "j1")
        job_record.record_round(world.service, other, 1, [_decided("a")])

    world.hooks.once("job_round.before_append", other_runner)
    result, recorded = job_record.record_round(world.service, held, 1, [_blocked("a")])
    assert recorded == [] and result.state.blocked_rounds == 1
    assert result.state.decided["a"]["decision"] == "requested"  # the other runner's
    assert (held.version, held.state.blocked_rounds, held.state.blocked) == (2, 0, ["a"])
    assert [type(e).__name__ for e in _job_events(world)] == ["Defined", "PageDecided",
                                                              "BlockedAsked"]


@pytest.mark.parametrize("point", ["job_page.before_append", "job_page.after_append"])
def test_a_record_that_crashed_leaves_the_held_job_as_it_was(world, point):
    """Whether the append was made or not, the caller's job holds nothing half-recorded:
    its version, state and pending events are those it had (a rerun reloads the job)."""
    held = _define(world)
    world.hooks.crash_once(point)
    with pytest.raises(Crash):
        job_record.record_page(world.service, held, None, "c1", False, [_decided("a")])
    assert (held.version, held.state.pages, held.state.decided, held.pending_events) == (
        1, 0, {}, [])
    stored = jobs.load_job(world.service, "j1")
    assert stored.state.pages == (point == "job_page.after_append")
