"""A bounded explorer over the pure decider (after Temporal's ``TestTransitionBoundedExplorer``).

No store and no service: our side is ``domain.decisions`` folded by ``evolve_migration`` and
``evolve_schedule``; the other side is a tiny pure model of the destination written here (runs,
current run, chain heads, request ids; start semantics under ALLOW_DUPLICATE/FAIL). A BFS
applies every input (worker step outcomes, crashes, environment changes, an abort request) to
every reached state up to a depth and checks, at each state: determinism, no input mutation, the
invariant checker over the path's events, safety against the destination model, and that
replaying the path rebuilds the state.
"""
from __future__ import annotations

import copy
import time
from collections import deque
from typing import Any
from uuid import UUID

from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE
from schedfence.domain.invariants.checker import check_history
from schedfence.domain.rollback.aggregate import Migration, MigrationState, evolve_migration
from schedfence.domain.ports import AlreadyStarted, StartAccepted
from schedfence.domain.source.schedule import Schedule, evolve_schedule
from schedfence.domain.source.state import ScheduleState
from schedfence.infra.demo.legacy import legacy_v1_record

from tests.domain.explorer_model import (Dest, INPUTS, LEGACY_MAPPER, MAX_DEPTH, NS, RID, SID,
                                         START_FAULTS, T, WID, World, _key, step)


# -- roots -----------------------------------------------------------------------------------

def _root(legacy: bool) -> tuple[World, list[Any]]:
    schedule = Schedule.create(NS, SID, 1, paused=False, notes="pre notes")
    fields = dict(namespace=NS, schedule_id=SID, source_id=str(schedule.id), incarnation=1,
                  workflow_id=WID, pre_paused=False, pre_notes="pre notes")
    mid = UUID(int=1)
    if legacy:
        # What an older release stored (v1, no request id), decoded as the store decodes it.
        created = [LEGACY_MAPPER.to_domain_event(legacy_v1_record(mid, timestamp=T, **fields))]
        schedule.fence_for_migration(None, mid)
    else:
        created = Migration.assign_request_id(mid, request_id=RID, origin="caller",
                                              claim_armed=True, **fields).collect_events()
        schedule.fence_for_migration(RID, mid)
    events = [e.model_copy(update={"timestamp": T})
              for e in [*schedule.collect_events(), *created]]
    s = m = None
    for e in events:
        if isinstance(e, Migration.Event):
            m = evolve_migration(m, e)
        else:
            s = evolve_schedule(s, e)
    return World(m, s, Dest(), 1, 2), events


# -- checks at every state -------------------------------------------------------------------

def _replay(events: list[Any]) -> tuple[MigrationState, ScheduleState]:
    m = s = None
    for e in events:
        if isinstance(e, Migration.Event):
            m = evolve_migration(m, e)
        else:
            s = evolve_schedule(s, e)
    return m, s


def _check_safety(w: World) -> None:
    m, s, dest = w.m, w.s, w.dest
    ours = [run for run, rid in dest.created if rid == m.request_id]
    assert len(ours) <= 1, f"more than one chain created by {m.request_id}: {ours}"
    if m.request_id is None:
        assert m.starts_issued == 0
        assert all(rid.startswith("foreign-") for _, rid in dest.created)
    if m.phase == "completed":
        assert s.closed and s.close_reason == "migrated"
        assert ours == [m.receipt], "closed on a chain this migration did not create"
    if m.receipt is not None:
        assert ours == [m.receipt]
    if m.is_open:
        assert s.paused and s.fence_migration_id == m.migration_id and not s.closed
    if m.phase == "aborted":
        assert (s.paused, s.notes, s.fence_migration_id) == (m.pre_paused, m.pre_notes, None)
        assert not ours, "the source was restored while a chain of ours exists"


def _check_state(root: World, inputs: list, events: list[Any], w: World) -> None:
    assert check_history(list(enumerate(events, start=1))) == []
    _check_safety(w)
    assert _replay(events) == (w.m, w.s)
    again = root
    for inp in inputs:
        result = step(again, inp)
        assert result is not None
        again = result[0]
    assert again == w


def explore(legacy: bool, depth: int = MAX_DEPTH) -> dict[str, Any]:
    root, root_events = _root(legacy)
    seen = {_key(root)}
    queue = deque([(root, [], root_events, 0)])
    stats: dict[str, Any] = {"states": 1, "transitions": 0, "max_depth": 0, "phases": set()}
    _check_state(root, [], root_events, root)
    while queue:
        w, inputs, events, level = queue.popleft()
        if level == depth:
            continue
        for inp in INPUTS:
            before = copy.deepcopy(w)
            result = step(w, inp)
            assert w == before, f"{inp} mutated its input state"
            if result is None:
                continue
            assert step(w, inp) == result, f"{inp} is not deterministic"
            stats["transitions"] += 1
            nxt, new_events = result
            key = _key(nxt)
            if key in seen:
                continue
            seen.add(key)
            path, log = inputs + [inp], events + new_events
            _check_state(root, path, log, nxt)
            stats["states"] += 1
            stats["max_depth"] = max(stats["max_depth"], level + 1)
            stats["phases"].add((nxt.m.phase, nxt.m.park_reason))
            queue.append((nxt, path, log, level + 1))
    return stats


def test_bounded_explorer_over_the_rollback_decider():
    started = time.monotonic()
    stats = explore(legacy=False)
    assert stats["states"] > 20, stats
    assert stats["max_depth"] == MAX_DEPTH
    assert time.monotonic() - started < 20, stats


def test_explorer_reaches_every_outcome_the_protocol_names():
    """The inputs are rich enough to drive the decider into each phase and park reason."""
    reached = explore(legacy=False, depth=4)["phases"]
    assert {("claimed", None), ("receipted", None), ("completed", None), ("aborted", None),
            ("parked", "foreign_destination"), ("parked", "head_missing"),
            ("pending", None)} <= reached


def test_explorer_over_an_identity_less_migration():
    stats = explore(legacy=True, depth=4)
    # Only the environment acts; the worker and the abort never do (fail closed, I6).
    assert 5 < stats["states"] < 50, stats
    root, _ = _root(legacy=True)
    for fault in START_FAULTS:
        assert step(root, ("worker", fault)) is None
    assert step(root, ("abort", "")) is None  # it must be adopted, never aborted


def test_destination_model_follows_b1():
    """The model the explorer trusts: dedupe on the current run, FAIL while running, new
    chain once closed, continue-as-new keeps the head with a fresh request id."""
    dest, first = Dest().start("X", SCHEDULER_WORKFLOW_TYPE)
    assert isinstance(first, StartAccepted) and first.run_id == first.first_execution_run_id
    same, again = dest.start("X", "other")
    assert (same, again) == (dest, first)
    _, conflict = dest.start("Y", "other")
    assert isinstance(conflict, AlreadyStarted) and conflict.start_request_id == "X"
    can = dest.continue_as_new()
    cur = can.describe()
    assert cur.first_execution_run_id == first.run_id and "X" not in cur.request_ids
    _, after_can = can.start("X", "t")
    assert isinstance(after_can, AlreadyStarted) and after_can.start_request_id != "X"
    closed = can.terminate()
    reborn, fresh = closed.start("X", "t")
    assert isinstance(fresh, StartAccepted) and fresh.first_execution_run_id != first.run_id
    assert len(reborn.created) == 2  # exactly the hole a consumed claim must close (F2)
    gone = dest.delete_head()
    assert gone.describe() is None and gone.describe(first.run_id) is None
