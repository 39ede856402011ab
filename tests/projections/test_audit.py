"""Audit queries on the failure modes' histories: by schedule, request id, migration, actor,
time range, newest-first and limits — and exact time filters when clocks disagree with the log."""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedfence.domain.errors import InvalidArgument, NotFound
from schedfence.domain.source.key import ScheduleKey
from schedfence.infra.application.actor import default_actor
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from tests.projections.histories import OTHER_NS, Histories, build

NS = "default"
DONE_FLOW = ["FencedForMigration", "RequestIdAssigned", "StartClaimConsumed",
             "DestinationStartIssued", "DestinationAnswered", "OwnershipAccepted",
             "ClosedByMigration", "SourceClosed"]


@pytest.fixture(scope="module")
def hist(stores):
    h = build(stores.new())  # a SQLite file or a PostgreSQL schema (tests/conftest.py)
    yield h
    h.close()


def everything(h: Histories) -> list:
    return h.service.audit(limit=10_000).entries


@pytest.mark.parametrize("sid", ["done", "foreign", "gone", "legacy", "adopted", "aborted",
                                 "claimed", "pending"])
def test_by_schedule_is_the_keys_whole_history_in_log_order(hist: Histories, sid: str) -> None:
    page = hist.service.audit(schedule=f"{NS}/{sid}")
    history = hist.service.history(NS, sid)
    assert [e.position for e in page.entries] == [e.position for e in history]
    assert [e.type for e in page.entries] == [e.type.rsplit(".", 1)[-1] for e in history]
    assert {(e.namespace, e.schedule_id) for e in page.entries} == {(NS, sid)}
    assert not page.truncated and page.projected_through == hist.service.event_count()


def test_by_request_id_is_the_migration_and_the_source_steps_it_drove(hist: Histories) -> None:
    entries = hist.service.audit(request_id="req-done").entries
    assert [e.type for e in entries] == DONE_FLOW
    assert {e.schedule_id for e in entries} == {"done"}
    aborted = [e.type for e in hist.service.audit(request_id="req-aborted").entries]
    assert set(aborted[-2:]) == {"MigrationAborted", "FenceReleased"}  # one append
    assert hist.service.audit(request_id="never-used").entries == []


def test_an_adopted_legacy_migration_is_found_by_its_new_request_id(hist: Histories) -> None:
    types = [e.type for e in hist.service.audit(request_id="req-adopted").entries]
    assert sorted(types) == ["FenceAdopted", "LegacyMigrationAdopted"]  # one append
    by_schedule = hist.service.audit(schedule=f"{NS}/adopted").entries
    legacy = [e for e in by_schedule if e.type == "RequestIdAssigned"]
    assert len(legacy) == 1 and legacy[0].request_id is None and legacy[0].actor is None


def test_by_migration_is_its_events_and_the_source_events_naming_it(hist: Histories) -> None:
    mid = hist.service.migration(NS, "gone").migration_id
    entries = hist.service.audit(migration_id=mid).entries
    history = hist.service.history(NS, "gone")
    expected = [e.position for e in history if e.aggregate_id == mid
                or e.data.get("migration_id") == mid]
    assert [e.position for e in entries] == expected
    assert entries[-1].type == "MigrationParked" and entries[0].type == "FencedForMigration"
    assert hist.service.audit(migration_id=uuid.UUID(mid)).entries == entries


def test_by_actor_tells_operators_and_workers_apart(hist: Histories) -> None:
    def seen(actor: str) -> set[tuple[str | None, str]]:
        return {(e.schedule_id, e.type) for e in hist.service.audit(actor=actor).entries}

    assert seen("alice") == {(s, "RequestIdAssigned") for s in
                             ("done", "foreign", "gone", "aborted", "claimed")}
    assert seen("bob") == {("done2", "RequestIdAssigned"), ("aborted", "MigrationAborted")}
    assert seen("dave") == {("adopted", "LegacyMigrationAdopted")}
    w2 = seen("w2")
    assert {s for s, _ in w2} == {"done2", "aborted", "claimed"}
    assert ("claimed", "StartClaimConsumed") in w2 and ("done2", "SourceClosed") in w2
    assert all(t not in ("RequestIdAssigned", "MigrationAborted") for _, t in w2)


def test_filters_combine(hist: Histories) -> None:
    entries = hist.service.audit(actor="w2", schedule=f"{OTHER_NS}/done2").entries
    # The worker w2 drove it; who created it (no actor named) is the default actor, the
    # person (user@host: infra/application/actor.py), never the worker id.
    assert [e.type for e in entries] == DONE_FLOW[2:6] + ["SourceClosed"]
    created = hist.service.audit(actor=default_actor(), schedule=f"{OTHER_NS}/done2").entries
    assert [e.type for e in created] == ["Created"]
    assert hist.service.audit(actor="alice", request_id="req-done2").entries == []


def test_time_range_is_inclusive_and_exact(hist: Histories) -> None:
    log = everything(hist)
    since, until = log[10].time, log[30].time
    got = hist.service.audit(since=since, until=until, limit=10_000).entries
    expected = [e.position for e in log if since <= e.time <= until]
    assert [e.position for e in got] == expected and expected[0] <= 11
    naive = datetime.fromisoformat(since).astimezone(timezone.utc).replace(tzinfo=None)
    assert hist.service.audit(since=naive.isoformat(), until=until,
                              limit=10_000).entries == got  # naive means UTC
    assert hist.service.audit(since=datetime.fromisoformat(since), until=until,
                              limit=10_000).entries == got


def test_relative_times(hist: Histories) -> None:
    assert len(hist.service.audit(since="1d", limit=10_000).entries) == len(everything(hist))
    future = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat()
    assert hist.service.audit(since=future).entries == []
    assert hist.service.audit(until="1d").entries == []  # nothing older than a day


def test_newest_first_and_limit(hist: Histories) -> None:
    log = everything(hist)
    newest = hist.service.audit(newest_first=True, limit=5)
    assert [e.position for e in newest.entries] == [e.position for e in log[::-1][:5]]
    assert newest.truncated
    oldest = hist.service.audit(limit=5)
    assert [e.position for e in oldest.entries] == [1, 2, 3, 4, 5] and oldest.truncated
    whole = hist.service.audit(schedule=f"{NS}/done", newest_first=True)
    assert [e.position for e in whole.entries] == sorted(
        (e.position for e in whole.entries), reverse=True) and not whole.truncated


@pytest.mark.parametrize("filters,error,text", [
    ({"since": "yesterday"}, InvalidArgument, "not a time"),
    ({"until": "2026-13-40"}, InvalidArgument, "not a time"),
    ({"since": "2026-12-02T10:00:00Z", "until": "2026-12-01"}, InvalidArgument, "after"),
    ({"schedule": "no-slash"}, InvalidArgument, "NAMESPACE/SCHEDULE_ID"),
    ({"schedule": "default/"}, InvalidArgument, "schedule id"),
    ({"schedule": "default/nope"}, NotFound, "default/nope"),
    ({"migration_id": "not-a-uuid"}, InvalidArgument, "not a UUID"),
    ({"migration_id": str(uuid.uuid4())}, NotFound, "migration"),
    ({"limit": 0}, InvalidArgument, "limit"),
    ({"limit": 10_001}, InvalidArgument, "limit"),
    ({"actor": ""}, InvalidArgument, "actor"),
])
def test_bad_arguments_are_domain_errors(hist: Histories, filters: dict, error: type,
                                         text: str) -> None:
    with pytest.raises(error) as err:
        hist.service.audit(**filters)
    assert text in err.value.message


def test_queries_catch_up_first(hist: Histories) -> None:
    hist.service.create_schedule(NS, "fresh")
    entries = hist.service.audit(schedule=f"{NS}/fresh").entries
    assert [e.type for e in entries] == ["Created", "IncarnationStarted", "Created"]
    assert entries[-1].position == hist.service.event_count()


# -- clocks that disagree with the log order --------------------------------------------------
def _store_with_times(url: str, offsets: list[int], batch: int) -> tuple:
    """One key event per offset (seconds from a base), written in the given order."""
    service = open_service(url, SimulatedDestination())
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    records = []
    for i, off in enumerate(offsets):
        key = ScheduleKey.create("clock", f"k{i}")
        ev = key.collect_events()[0].model_copy(update={"timestamp": base + timedelta(
            seconds=off)})
        records.append(service.app.mapper.to_stored_event(ev))
    for start in range(0, len(records), batch):  # several projector batches see the skew
        service.app.recorder.insert_events(records[start:start + batch])
        service.catch_up()
    return service, base


@settings(max_examples=40, deadline=None)
@given(offsets=st.lists(st.integers(0, 50), min_size=1, max_size=30),
       batch=st.integers(1, 8), lo=st.integers(-2, 52), width=st.integers(0, 30),
       newest=st.booleans(), limit=st.integers(1, 40))
def test_time_filters_are_exact_when_clocks_run_backwards(stores, offsets, batch, lo, width,
                                                          newest, limit) -> None:
    service, base = _store_with_times(stores.new(), offsets, batch)
    try:
        since, until = base + timedelta(seconds=lo), base + timedelta(seconds=lo + width)
        got = service.audit(since=since, until=until, newest_first=newest, limit=limit)
        match = [i + 1 for i, off in enumerate(offsets) if lo <= off <= lo + width]
        ordered = match[::-1] if newest else match
        assert [e.position for e in got.entries] == ordered[:limit]
        assert got.truncated == (len(match) > limit)
        only_since = service.audit(since=since, limit=40)
        assert [e.position for e in only_since.entries] == \
            [i + 1 for i, off in enumerate(offsets) if off >= lo]
        only_until = service.audit(until=until, newest_first=True, limit=40)
        assert [e.position for e in only_until.entries] == \
            [i + 1 for i, off in enumerate(offsets) if off <= lo + width][::-1]
    finally:
        service.close()
