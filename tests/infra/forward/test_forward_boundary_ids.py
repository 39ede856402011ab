"""Forward migration in the simulator, issue 27 items 5 and 8.

Item 5: a pause that lands while the server's scheduler lags drops the times it had not
started yet; the cursor handed to the source is the last time started, so the source starts
them (each once across both sides).

Item 8: a forward without a request id derives it from the Temporal Schedule it takes over
(its scheduler workflow's first run id) and the conflict token: a round trip's new Temporal
Schedule is a new forward; a retry of a pending one answers that one.
"""
from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from eventsourcing.persistence import StoredEvent

from schedfence.domain.source.action import parse_nominal
from schedfence.domain.errors import MigrationPending
from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
from schedfence.domain.forward.aggregate import ForwardMigration
from schedfence.domain.source.runs import ActionStartIssued
from tests.infra.forward.test_forward import NS, SID, SPEC, env, on_temporal  # noqa: F401


def source_starts(svc) -> list:
    return [parse_nominal(e.nominal) for e in recorded(svc, ActionStartIssued)]


def recorded(svc, event_class: type) -> list:
    return [svc.app.mapper.to_domain_event(n)
            for n in svc.app.notifications((event_class.TOPIC,))]


def test_times_the_pause_dropped_are_started_by_the_source_each_once(env):  # noqa: F811
    svc, dest, clock = env
    first = on_temporal(svc, clock)
    clock.now += timedelta(minutes=5, seconds=30)
    dest.pause_lag = timedelta(seconds=150)  # the last two times before the pause: dropped
    svc.forward(NS, SID, "F1")
    svc.run_until_idle(retry_for=0)
    st = svc.forward_state(NS, SID, "F1")
    assert st.phase == "completed", st
    temporal = dest.temporal_starts(NS, SID, clock.now)
    source = svc.load.source(NS, SID).state
    assert source.cursor == st.handover["cursor"] == temporal[-1].strftime("%Y-%m-%dT%H:%M:%SZ")
    (fenced,) = recorded(svc, ForwardMigration.TemporalFenced)
    assert fenced.boundary["floor"] == source.cursor  # the last recent action
    dropped = [t for t, found in fenced.boundary["probed"] if not found]
    assert len(dropped) == len(fenced.boundary["probed"]) >= 2  # checked, never started
    clock.now += timedelta(minutes=2)
    svc.run_scheduler(now=clock.now)
    verdict = check_exactly_once(Owed(SPEC, first, clock.now), source_starts(svc), temporal)
    assert verdict.ok, verdict.describe()
    assert svc.verify() == []


def test_a_forward_without_an_id_after_a_round_trip_is_a_new_migration(env):  # noqa: F811
    svc, dest, clock = env
    on_temporal(svc, clock)
    ids = []
    for trip in range(3):
        clock.now += timedelta(minutes=2)
        asked = svc.forward(NS, SID)
        assert (asked.outcome, asked.request_id_origin) == ("accepted", "derived"), trip
        again = svc.forward(NS, SID)  # the caller's retry, before the worker moved it
        assert (again.outcome, again.request_id, again.migration_id) == (
            "already_pending", asked.request_id, asked.migration_id)
        svc.run_until_idle(retry_for=0)
        assert svc.forward_state(NS, SID, asked.request_id).phase == "completed"
        ids.append(asked.request_id)
        clock.now += timedelta(minutes=1)
        svc.rollback(NS, SID)
        svc.run_until_idle(retry_for=0)
        assert svc.migration(NS, SID).state == "completed"
    assert len(set(ids)) == 3
    assert svc.verify() == []


def test_the_request_records_the_schedule_it_was_asked_of(env):  # noqa: F811
    svc, dest, clock = env
    on_temporal(svc, clock)
    snap = dest.describe_schedule(NS, SID)
    asked = svc.forward(NS, SID)
    (requested,) = recorded(svc, ForwardMigration.ForwardRequested)
    assert snap.identity and snap.identity == dest.describe(
        NS, f"temporal-sys-scheduler:{SID}").first_execution_run_id
    assert (requested.request_id, requested.schedule_identity, requested.conflict_token) == (
        asked.request_id, snap.identity, snap.conflict_token)


def test_a_forward_of_a_moved_schedule_while_another_is_pending_is_refused(env):  # noqa: F811
    svc, dest, clock = env
    on_temporal(svc, clock)
    dest.defer_updates = True  # our fence is not applied yet
    svc.forward(NS, SID)
    dest.user_update(NS, SID, paused=False, notes="someone else's")  # the token moves
    before = svc.event_count()
    with pytest.raises(MigrationPending):
        svc.forward(NS, SID)
    assert svc.event_count() == before


def test_version_1_forward_events_are_upcast_not_rewritten(env):  # noqa: F811
    svc, _, _ = env
    oid = uuid.uuid4()
    base = {"originator_id": str(oid), "originator_version": 2,
            "timestamp": "2026-01-01T00:00:00Z", "request_id": "F1"}
    requested = dict(base, originator_version=1, namespace=NS, schedule_id=SID,
                     request_id_origin="caller", actor="a",
                     originator_topic=ForwardMigration.TOPIC)
    fenced = dict(base, conflict_token="5", handover={})
    read = [svc.app.mapper.to_domain_event(StoredEvent(oid, doc["originator_version"],
                                                       cls.TOPIC, json.dumps(doc).encode()))
            for cls, doc in ((ForwardMigration.ForwardRequested, requested),
                             (ForwardMigration.TemporalFenced, fenced))]
    assert (read[0].schedule_identity, read[0].conflict_token) == ("", "")
    assert read[1].boundary is None
    again = svc.app.mapper.to_stored_event(read[1])
    assert b'"class_version":2' in again.state
