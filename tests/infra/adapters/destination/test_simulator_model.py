"""The simulator's start semantics against a reference model, as a property test
(docs/protocol.md, 'What the destination tells us')."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedfence.domain.ports import AlreadyStarted, DestinationNotFound, InvalidStartRequest
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

from tests.infra.adapters.destination.sim_requests import (CLOSED, CONFLICT, INVALID_COMBOS, NS, REUSE, WID,
                                                  last_outcome, req)


# --- property tests against a reference model -------------------------------------------------

POOL = ("r1", "r2", "r3", "")
ops = st.lists(st.one_of(
    st.tuples(st.just("start"), st.sampled_from(POOL), st.sampled_from(REUSE), st.sampled_from(CONFLICT)),
    st.tuples(st.just("can")),
    st.tuples(st.just("close"), st.sampled_from(CLOSED)),
    st.tuples(st.just("delete")),
), max_size=40)


def expected_start(cur, rid, reuse, conflict):
    """A model of the start semantics; ``cur`` is None or {ids, running, status, head}."""
    if (reuse, conflict) in INVALID_COMBOS:
        return "invalid"
    if cur and rid in cur["ids"]:
        return "deduplicated"
    if cur and cur["running"]:
        if conflict == "terminate_existing" or reuse == "terminate_if_running":
            return "created"
        return "use_existing" if conflict == "use_existing" else "already_started"
    if cur and (reuse == "reject_duplicate"
                or (reuse == "allow_duplicate_failed_only" and cur["status"] == "completed")):
        return "already_started"
    return "created"


def apply_start(d, heads, cur, rid, reuse, conflict):
    expected = expected_start(cur, rid, reuse, conflict)
    before = d.created_count(NS, WID)
    try:
        acc = d.start_workflow(req(rid, reuse, conflict))
    except (AlreadyStarted, InvalidStartRequest):
        acc = None
    assert last_outcome(d) == expected
    created = d.created_count(NS, WID) - before
    assert created == (expected == "created")
    if cur and rid in cur["ids"]:
        assert created == 0
        assert expected == "invalid" or acc.run_id == d.describe(NS, WID).run_id
    if cur and cur["running"] and conflict == "fail" and reuse != "terminate_if_running":
        assert created == 0
    if expected == "created":
        assert acc.first_execution_run_id == acc.run_id
        heads[acc.run_id] = acc.run_id
        return {"ids": {rid} - {""}, "running": True, "status": "running", "head": acc.run_id}
    return cur


def apply_env(d, heads, cur, op):
    if op[0] == "can":
        if cur is None or not cur["running"]:
            with pytest.raises(DestinationNotFound if cur is None else ValueError):
                d.continue_as_new(NS, WID)
            return cur
        heads[d.continue_as_new(NS, WID)] = cur["head"]
        assert d.describe(NS, WID).first_execution_run_id == cur["head"]
        return {**cur, "ids": set()}  # the new run's id is server-generated, never in POOL
    if op[0] == "close":
        if cur is None or not cur["running"]:
            with pytest.raises(DestinationNotFound if cur is None else ValueError):
                d.close(NS, WID, op[1])
            return cur
        d.close(NS, WID, op[1])
        return {**cur, "running": False, "status": op[1]}
    if cur is None:
        with pytest.raises(DestinationNotFound):
            d.delete(NS, WID)
    else:
        d.delete(NS, WID)
    return None


@settings(max_examples=300, deadline=None)
@given(ops)
def test_start_semantics_match_reference_model(sequence):
    d, cur = SimulatedDestination(), None
    heads: dict[str, str] = {}  # run id -> chain head the model expects
    for op in sequence:
        cur = apply_start(d, heads, cur, *op[1:]) if op[0] == "start" else apply_env(d, heads, cur, op)
        assert d.created_count(NS, WID) == len(d.chains(NS, WID))
    assert {r.run_id: r.first_execution_run_id for r in d.runs(NS, WID)}.items() <= heads.items()
