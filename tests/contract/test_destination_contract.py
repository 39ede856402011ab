"""Destination semantics (docs/protocol.md, 'What the destination tells us'), one suite for
the simulator and a real server.

Every test runs twice: against ``SimulatedDestination`` and against ``TemporalDestination`` on a
Temporal dev server (the ``world`` fixture, tests/contract/conftest.py). The server is the
reference: a test that passes on one and fails on the other is a bug in the simulator.
"""
from __future__ import annotations

import uuid

import pytest

from schedfence.domain.ports import DestinationNotFound, InvalidStartRequest
from tests.contract.chain_workflow import CHAIN_WORKFLOW_TYPE
from tests.contract.worlds import already_started, describe, rid, start

REUSE = ("allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate",
         "terminate_if_running")
CONFLICT = ("fail", "use_existing", "terminate_existing")
INVALID = [("terminate_if_running", "use_existing"),
           ("terminate_if_running", "terminate_existing"),
           ("reject_duplicate", "terminate_existing")]
VALID = [(r, c) for r in REUSE for c in CONFLICT if (r, c) not in INVALID]
CLOSE = ["complete", "terminate"]
CLOSED_STATUS = {"complete": "completed", "terminate": "terminated"}


# -- a fresh start, describe ---------------------------------------------------------------
def test_a_fresh_start_is_its_own_chain_head(world, wid):
    r1 = rid()
    a = start(world, wid, r1)
    assert a.status == "running" and a.first_execution_run_id == a.run_id
    current, by_id = describe(world, wid), describe(world, wid, a.run_id)
    assert current == by_id
    assert (current.run_id, current.first_execution_run_id, current.workflow_type,
            current.status, current.request_ids) == (
        a.run_id, a.run_id, CHAIN_WORKFLOW_TYPE, "running", frozenset({r1}))


def test_describe_of_an_unknown_workflow_or_run_is_not_found(world, wid):
    with pytest.raises(DestinationNotFound):
        describe(world, wid)
    start(world, wid, rid())
    with pytest.raises(DestinationNotFound):
        describe(world, wid, str(uuid.uuid4()))


# -- dedupe on the current run, running or closed, under every policy ----------------------
@pytest.mark.parametrize("reuse,conflict", VALID)
def test_a_retry_dedupes_on_the_running_run(world, wid, reuse, conflict):
    r1 = rid()
    a = start(world, wid, r1)
    # Type and input differ: the server ignores both when it dedupes.
    again = start(world, wid, r1, reuse, conflict, workflow_type="something-else", input={})
    assert (again.run_id, again.first_execution_run_id, again.status) == (
        a.run_id, a.run_id, "running")
    assert describe(world, wid).request_ids == {r1}


@pytest.mark.parametrize("close", CLOSE)
@pytest.mark.parametrize("reuse,conflict", VALID)
def test_a_retry_dedupes_on_a_closed_run(world, wid, reuse, conflict, close):
    r1 = rid()
    a = start(world, wid, r1)
    getattr(world, close)(wid)
    again = start(world, wid, r1, reuse, conflict)  # no new run, even allow_duplicate
    assert (again.run_id, again.first_execution_run_id, again.status) == (
        a.run_id, a.run_id, CLOSED_STATUS[close])


# -- another request id ---------------------------------------------------------------------
def test_another_id_while_running_gets_already_started_with_the_current_run(world, wid):
    r1 = rid()
    a = start(world, wid, r1)
    err = already_started(world, wid, rid())
    assert (err.start_request_id, err.run_id, err.first_execution_run_id) == (
        r1, a.run_id, a.run_id)


@pytest.mark.parametrize("close", CLOSE)
def test_another_id_after_close_starts_a_new_chain(world, wid, close):
    r1, r2 = rid(), rid()
    a = start(world, wid, r1)
    getattr(world, close)(wid)
    b = start(world, wid, r2)
    assert b.run_id != a.run_id and b.first_execution_run_id == b.run_id
    assert b.status == "running"
    old = describe(world, wid, a.run_id)
    assert (old.status, old.request_ids) == (CLOSED_STATUS[close], {r1})
    assert describe(world, wid).run_id == b.run_id


@pytest.mark.parametrize("close", CLOSE)
def test_reject_duplicate_after_close_reports_the_closed_run(world, wid, close):
    r1 = rid()
    a = start(world, wid, r1)
    getattr(world, close)(wid)
    err = already_started(world, wid, rid(), reuse="reject_duplicate")
    assert (err.start_request_id, err.run_id, err.first_execution_run_id) == (
        r1, a.run_id, a.run_id)


def test_failed_only_reuse_refuses_after_success_and_allows_after_termination(world, wid):
    r1 = rid()
    a = start(world, wid, r1)
    world.complete(wid)
    err = already_started(world, wid, rid(), reuse="allow_duplicate_failed_only")
    assert (err.start_request_id, err.run_id) == (r1, a.run_id)
    other = f"{wid}-t"
    t = start(world, other, rid())
    world.terminate(other)
    fresh = start(world, other, rid(), reuse="allow_duplicate_failed_only")
    assert fresh.run_id != t.run_id and fresh.first_execution_run_id == fresh.run_id


def test_use_existing_returns_the_running_run_without_attaching_the_id(world, wid):
    r1 = rid()
    a = start(world, wid, r1)
    got = start(world, wid, rid(), conflict="use_existing")
    assert (got.run_id, got.status) == (a.run_id, "running")
    assert describe(world, wid).request_ids == {r1}


@pytest.mark.parametrize("reuse,conflict", [("allow_duplicate", "terminate_existing"),
                                            ("terminate_if_running", "fail")])
def test_terminating_policies_replace_the_running_run_with_a_new_chain(world, wid, reuse,
                                                                       conflict):
    a = start(world, wid, rid())
    r2 = rid()
    b = start(world, wid, r2, reuse, conflict)
    assert b.run_id != a.run_id and b.first_execution_run_id == b.run_id
    assert describe(world, wid, a.run_id).status == "terminated"
    assert describe(world, wid).request_ids == {r2}


@pytest.mark.parametrize("reuse,conflict", INVALID)
def test_invalid_policy_combinations_are_refused_before_dedupe(world, wid, reuse, conflict):
    with pytest.raises(InvalidStartRequest):
        start(world, wid, rid(), reuse, conflict)
    with pytest.raises(DestinationNotFound):
        describe(world, wid)  # nothing was created
    r1 = rid()
    start(world, wid, r1)
    with pytest.raises(InvalidStartRequest):  # even a retry that would dedupe
        start(world, wid, r1, reuse, conflict)


def test_empty_request_ids_never_dedupe(world, wid):
    a = start(world, wid, "")
    err = already_started(world, wid, "")
    assert err.run_id == a.run_id and err.start_request_id not in ("", None)
    assert describe(world, wid).request_ids == {err.start_request_id}


# -- continue-as-new ------------------------------------------------------------------------
def test_after_continue_as_new_the_request_id_is_only_on_the_first_run(world, wid):
    r1 = rid()
    a = start(world, wid, r1)
    b_run = world.continue_as_new(wid)
    b = describe(world, wid)
    assert (b.run_id, b.first_execution_run_id, b.status) == (b_run, a.run_id, "running")
    assert r1 not in b.request_ids and len(b.request_ids) == 1
    head = describe(world, wid, a.run_id)
    assert (head.status, head.request_ids, head.first_execution_run_id) == (
        "continued_as_new", {r1}, a.run_id)
    err = already_started(world, wid, r1)  # the retry no longer dedupes
    assert (err.run_id, err.first_execution_run_id) == (b_run, a.run_id)
    assert err.start_request_id in b.request_ids and err.start_request_id != r1


def test_a_retry_after_the_continued_chain_closed_starts_a_new_chain(world, wid):
    r1 = rid()
    a = start(world, wid, r1)
    world.continue_as_new(wid)
    world.complete(wid)
    c = start(world, wid, r1)
    assert c.run_id != a.run_id and c.first_execution_run_id == c.run_id
    assert c.status == "running"
