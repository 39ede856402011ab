"""Create request ids versus attached ones, and ``StartAccepted.started``, on both worlds.

A request id is *attached* to a running run by a start with conflict policy USE_EXISTING and
``on_conflict_options.attach_request_id``: later starts with it dedupe to that run, but it
proves nothing about who created the run. Only the id recorded with the STARTED event does,
and Describe reports it as ``create_request_id``. Measured on a Temporal 1.32 dev server (the
reference these tests hold the simulator to):

- the create id has event type WORKFLOW_EXECUTION_STARTED, an attached id
  WORKFLOW_EXECUTION_OPTIONS_UPDATED;
- ``started`` is True when the start's request id is the run's create id (a retry of the
  creating start included, on a running or closed run), False for an attached id or a plain
  USE_EXISTING answer;
- the attach flag does nothing unless the start meets a running run under USE_EXISTING;
- continue-as-new gives the new run one fresh create id and none of the attached ids; the head
  keeps both of its own.
"""
from __future__ import annotations

import pytest

from schedfence.domain.ports import AlreadyStarted
from tests.contract.worlds import already_started, describe, rid, start

REUSE = ("allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate")
CONFLICT = ("fail", "use_existing", "terminate_existing")
VALID = [(r, c) for r in REUSE for c in CONFLICT
         if (r, c) != ("reject_duplicate", "terminate_existing")]
CLOSE = ["complete", "terminate"]


def foreign_with_ours_attached(world, wid):
    """A running run created under foreign request id F, with our R1 attached: (run, F, R1)."""
    f, r1 = rid(), rid()
    a = start(world, wid, f)
    got = world.start_attaching(wid, r1)
    assert (got.run_id, got.first_execution_run_id, got.status, got.started) == (
        a.run_id, a.run_id, "running", False)
    return a, f, r1


def test_a_fresh_start_is_started_and_describe_names_its_create_id(world, wid):
    r1 = rid()
    a = start(world, wid, r1)
    assert a.started is True
    d = describe(world, wid)
    assert (d.create_request_id, d.request_ids, d.attached_request_ids) == (
        r1, {r1}, frozenset())


@pytest.mark.parametrize("close", [None, *CLOSE])
def test_a_retry_of_the_creating_start_is_reported_started(world, wid, close):
    r1 = rid()
    a = start(world, wid, r1)
    if close:
        getattr(world, close)(wid)
    again = start(world, wid, r1, conflict="use_existing")
    assert (again.run_id, again.started) == (a.run_id, True)


def test_use_existing_without_attach_is_not_started_and_attaches_nothing(world, wid):
    f = rid()
    a = start(world, wid, f)
    got = start(world, wid, rid(), conflict="use_existing")
    assert (got.run_id, got.started) == (a.run_id, False)
    d = describe(world, wid)
    assert (d.create_request_id, d.request_ids) == (f, {f})


def test_describe_reports_the_create_id_apart_from_attached_ids(world, wid):
    a, f, r1 = foreign_with_ours_attached(world, wid)
    d = describe(world, wid)
    assert d == describe(world, wid, a.run_id)
    assert (d.create_request_id, d.request_ids, d.attached_request_ids) == (
        f, {f, r1}, {r1})
    # AlreadyStarted names the create id, never an attached one.
    err = already_started(world, wid, rid())
    assert (err.start_request_id, err.run_id) == (f, a.run_id)


@pytest.mark.parametrize("reuse,conflict", VALID)
def test_a_start_with_an_attached_id_dedupes_to_the_run_not_started(world, wid, reuse,
                                                                    conflict):
    a, f, r1 = foreign_with_ours_attached(world, wid)
    again = start(world, wid, r1, reuse, conflict)
    assert (again.run_id, again.first_execution_run_id, again.status, again.started) == (
        a.run_id, a.run_id, "running", False)
    assert describe(world, wid).request_ids == {f, r1}  # nothing terminated or created


@pytest.mark.parametrize("close", CLOSE)
def test_an_attached_id_dedupes_on_the_closed_run_too(world, wid, close):
    a, f, r1 = foreign_with_ours_attached(world, wid)
    getattr(world, close)(wid)
    again = start(world, wid, r1)
    assert (again.run_id, again.started) == (a.run_id, False)
    assert describe(world, wid).create_request_id == f


def test_attaching_an_id_twice_or_the_create_id_changes_nothing(world, wid):
    a, f, r1 = foreign_with_ours_attached(world, wid)
    assert world.start_attaching(wid, r1).started is False
    assert world.start_attaching(wid, f).started is True  # f dedupes: it created the run
    d = describe(world, wid)
    assert (d.run_id, d.create_request_id, d.request_ids) == (a.run_id, f, {f, r1})


def test_the_attach_flag_needs_a_running_run_and_use_existing(world, wid):
    f = rid()
    start(world, wid, f)
    with pytest.raises(AlreadyStarted) as info:  # conflict policy FAIL: no attach
        world.start_attaching(wid, rid(), conflict="fail")
    assert info.value.start_request_id == f
    assert describe(world, wid).request_ids == {f}
    world.complete(wid)
    r2 = rid()
    fresh = world.start_attaching(wid, r2)  # nothing running: a plain create
    assert fresh.started is True and fresh.first_execution_run_id == fresh.run_id
    d = describe(world, wid)
    assert (d.run_id, d.create_request_id, d.request_ids) == (fresh.run_id, r2, {r2})


def test_after_continue_as_new_the_new_run_has_a_fresh_create_id_and_no_attached_ids(world,
                                                                                     wid):
    a, f, r1 = foreign_with_ours_attached(world, wid)
    b_run = world.continue_as_new(wid)
    b = describe(world, wid)
    assert (b.run_id, b.first_execution_run_id, b.status) == (b_run, a.run_id, "running")
    assert b.create_request_id not in ("", f, r1)
    assert (b.request_ids, b.attached_request_ids) == ({b.create_request_id}, frozenset())
    head = describe(world, wid, a.run_id)
    assert (head.status, head.create_request_id, head.attached_request_ids) == (
        "continued_as_new", f, {r1})
    # Neither id dedupes any more: the current run holds only its own create id.
    for request_id in (f, r1):
        err = already_started(world, wid, request_id)
        assert (err.start_request_id, err.run_id) == (b.create_request_id, b_run)
    got = start(world, wid, r1, conflict="use_existing")
    assert (got.run_id, got.first_execution_run_id, got.started) == (b_run, a.run_id, False)
