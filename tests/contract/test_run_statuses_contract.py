"""``run_statuses`` (``RunWatcher``), the scheduler's one call per namespace that watches its
running actions, on the simulator and a real Temporal server: each workflow's current run
status, ``gone`` for an id that never ran. The server answers from its visibility store,
which lags: a close shows within a few seconds, and an id it does not list yet is described
on its own, so a run just started is never reported gone."""
from __future__ import annotations

from schedfence.domain.ports import RunWatcher
from tests.contract.worlds import NS, new_wid, rid, start, wait_for


def test_current_runs_of_many_workflows_in_one_call(world):
    assert isinstance(world.dest, RunWatcher)
    running, done, never = new_wid(), new_wid(), new_wid()
    for wid in (running, done):
        start(world, wid, rid())
    world.complete(done)
    statuses = wait_for(lambda: world.dest.run_statuses(NS, [running, done, never]),
                        lambda s: s.get(done) == "completed", 15.0, "the close listed")
    assert statuses == {running: "running", done: "completed", never: "gone"}


def test_a_run_just_started_is_running_even_before_it_is_listed(world):
    wid = new_wid()
    start(world, wid, rid())  # the server's visibility may not list it yet: described then
    assert world.dest.run_statuses(NS, [wid]) == {wid: "running"}


def test_ids_a_query_cannot_quote_plainly_are_still_watched(world):
    wid = f"{new_wid()}-o'clock"
    start(world, wid, rid())
    assert world.dest.run_statuses(NS, [wid]) == {wid: "running"}


def test_a_workflow_that_continued_as_new_is_its_current_run(world):
    wid = new_wid()
    start(world, wid, rid())
    world.continue_as_new(wid)  # the closed first run may be listed before the new one
    assert world.dest.run_statuses(NS, [wid]) == {wid: "running"}
