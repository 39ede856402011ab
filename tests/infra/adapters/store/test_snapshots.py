"""Snapshots of evolving aggregates: exact round trips, and loads equal to full replays.

A snapshot is a cache of the fold. These tests hold it to that: through the store's own mapper
it gives back exactly the state it was taken from, and a snapshotting store loads every version
of a long migration to the same aggregate as a store that replays everything.
"""
from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

import pytest
from eventsourcing.persistence import OperationalError

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.rollback.aggregate import Migration, MigrationState
from schedfence.domain.model import EvolvingAggregate, state_fields
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.key import ScheduleKey
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.adapters.store.eventstore import FenceApplication, open_application, parse_store_url

NS = "default"
INTERVAL = 7  # small, so a short test history crosses many snapshot points
RECONCILES = 40  # unavailable reconciles: the history grows to ~45 events


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'snap.db'}"
    return request.getfixturevalue("pg_store")


def _open(url: str, monkeypatch: pytest.MonkeyPatch, interval: int | None,
          dest: SimulatedDestination | None = None) -> MigrationService:
    if interval is None:
        monkeypatch.delenv("SCHEDFENCE_SNAPSHOT_INTERVAL", raising=False)
    else:
        monkeypatch.setenv("SCHEDFENCE_SNAPSHOT_INTERVAL", str(interval))
    return open_service(url, dest or SimulatedDestination(), worker_id="w")


def _long_migration(svc: MigrationService, schedule_id: str) -> UUID:
    """Driven by the real worker: a lost start response, then ``RECONCILES`` unavailable
    describes, then the destination answers and the migration completes."""
    dest = svc.destination
    svc.create_schedule(NS, schedule_id, notes="nightly")
    dest.inject("start", "lose_response")
    mid = UUID(svc.rollback(NS, schedule_id).migration_id)
    dest.inject("describe", "unavailable", times=RECONCILES)
    for _ in range(RECONCILES + 2):
        svc.worker.attempt(mid)
    return mid


def _snapshot_round_trip(app: FenceApplication, aggregate: EvolvingAggregate) -> object:
    snapshot = type(aggregate).Snapshot.take(aggregate)
    stored = app.mapper.to_stored_event(snapshot)
    assert stored.topic == "schedfence.Snapshot"
    return app.mapper.to_domain_event(stored).mutate(None)


def test_a_snapshot_round_trips_the_state_exactly(tmp_path, monkeypatch) -> None:
    svc = _open(f"sqlite:///{tmp_path / 'rt.db'}", monkeypatch, None)
    with svc:
        mid = _long_migration(svc, "s1")
        mig = svc.app.repository.get(mid, version=5)  # claimed, a nested last_answer dict
        assert isinstance(mig.state.last_answer, dict) and mig.state.phase == "claimed"
        source = svc.app.repository.get(UUID(mig.state.source_id))
        for aggregate in (mig, svc.app.repository.get(mid), source):
            restored = _snapshot_round_trip(svc.app, aggregate)
            assert restored == aggregate  # every attribute: id, version, times, state
            assert type(restored.state) is type(aggregate.state)
            assert restored.modified_on == aggregate.modified_on  # the worker reads it
        restored = _snapshot_round_trip(svc.app, mig)
        assert restored.state.last_answer is not mig.state.last_answer  # nothing shared


def test_a_schedule_key_snapshot_round_trips(tmp_path, monkeypatch) -> None:
    svc = _open(f"sqlite:///{tmp_path / 'key.db'}", monkeypatch, None)
    with svc:
        svc.create_schedule(NS, "k1")
        key = next(svc.app.repository.get(n.originator_id)
                   for n in svc.app.notifications((ScheduleKey.Created.TOPIC,)))
        assert _snapshot_round_trip(svc.app, key) == key


def test_state_that_json_would_change_is_refused() -> None:
    @dataclass(frozen=True)
    class Lossy:
        ids: tuple[str, ...]

    with pytest.raises(TypeError, match="not snapshot-safe"):
        state_fields(Lossy(("a", "b")))
    with pytest.raises(TypeError, match="non-string key"):
        state_fields(Lossy([{1: "x"}]))  # type: ignore[arg-type]  # the wrong value is the point


def test_old_snapshot_state_is_upcast_and_newer_is_refused(tmp_path, monkeypatch) -> None:
    svc = _open(f"sqlite:///{tmp_path / 'up.db'}", monkeypatch, None)
    with svc:
        mig = svc.app.repository.get(_long_migration(svc, "s1"))
        snapshot = Migration.Snapshot.take(mig)
        assert snapshot.state_version == Migration.class_version == 4
        assert snapshot.state["destination"]["kind"] == "sim"  # what it was accepted on
        older = {k: v for k, v in snapshot.state.items()
                 if k not in ("job_id", "destination")}  # before job ids and bindings
        old = snapshot.model_copy(update={"state_version": 2, "state": older})
        # the real upcast_v2_v3 and upcast_v3_v4: no job, and an unknown destination
        assert (old.mutate(None).state.job_id, old.mutate(None).state.destination) == (None,
                                                                                     None)

        def upcast_v4_v5(fields: dict) -> None:
            fields["park_detail"] = "upcast"

        monkeypatch.setattr(Migration, "class_version", 5, raising=False)
        monkeypatch.setattr(Migration, "upcast_v4_v5", staticmethod(upcast_v4_v5),
                            raising=False)
        assert snapshot.mutate(None).state.park_detail == "upcast"
        newer = snapshot.model_copy(update={"state_version": 6})
        with pytest.raises(ValueError, match="newer than this code"):
            newer.mutate(None)


def test_snapshot_loads_equal_full_replay_at_every_version(url, monkeypatch) -> None:
    svc = _open(url, monkeypatch, INTERVAL)
    plain = None
    try:
        assert svc.app.snapshots is not None
        mid = _long_migration(svc, "s1")
        head = svc.app.repository.get(mid)
        assert head.state.phase == "completed" and head.version > 4 * INTERVAL
        assert svc.verify() == []
        taken = [s.originator_version for s in svc.app.snapshots.get(mid)]
        assert taken == list(range(INTERVAL, head.version + 1, INTERVAL))  # every multiple
        monkeypatch.delenv("SCHEDFENCE_SNAPSHOT_INTERVAL")
        plain = open_application(parse_store_url(url))
        assert plain.snapshots is None  # replays everything
        for version in range(1, head.version + 1):
            assert svc.app.repository.get(mid, version=version) == \
                plain.repository.get(mid, version=version), f"version {version}"
        wid = destination_workflow_id("s1")
        assert len(svc.destination.chains(NS, wid)) == 1
    finally:
        if plain is not None:
            plain.close()
        svc.close()


def test_a_manual_snapshot_is_used_for_the_next_load(url, monkeypatch) -> None:
    svc = _open(url, monkeypatch, 1000)  # enabled, but no automatic snapshot this short
    try:
        mid = _long_migration(svc, "s1")
        source_id = UUID(svc.app.repository.get(mid).state.source_id)
        assert list(svc.app.snapshots.get(mid)) == []
        svc.app.take_snapshot(mid)
        svc.app.take_snapshot(source_id)
        assert isinstance(svc.app.repository.get(source_id), Schedule)
        (snap,) = svc.app.snapshots.get(mid)
        assert isinstance(snap, EvolvingAggregate.Snapshot)
        assert snap.topic == Migration.TOPIC and type(snap.mutate(None).state) is MigrationState
        assert svc.migration(NS, "s1").state == "completed"
    finally:
        svc.close()


def test_snapshots_are_off_by_default_and_the_interval_is_checked(tmp_path,
                                                                  monkeypatch) -> None:
    svc = _open(f"sqlite:///{tmp_path / 'off.db'}", monkeypatch, None)
    with svc:
        assert svc.app.snapshots is None and not svc.app.snapshotting_intervals
    monkeypatch.setenv("SCHEDFENCE_SNAPSHOT_INTERVAL", "often")
    with pytest.raises(InvalidArgument, match="SNAPSHOT_INTERVAL"):
        open_application(parse_store_url(f"sqlite:///{tmp_path / 'bad.db'}"))
    monkeypatch.delenv("SCHEDFENCE_SNAPSHOT_INTERVAL")
    app = FenceApplication(env={"PERSISTENCE_MODULE": "eventsourcing.popo",
                                "SNAPSHOT_INTERVAL": "50"})
    assert app.snapshots is not None and set(app.snapshotting_intervals.values()) == {50}


def test_a_failed_snapshot_write_does_not_fail_the_committed_save(tmp_path,
                                                                  monkeypatch) -> None:
    svc = _open(f"sqlite:///{tmp_path / 'fail.db'}", monkeypatch, 2)
    failed: list[object] = []

    def broken(*args: object, **kwargs: object) -> None:
        failed.append(args)
        raise OperationalError("snapshot table unavailable")

    with svc:
        monkeypatch.setattr(svc.app.snapshots, "put", broken)
        svc.create_schedule(NS, "s1")
        result = svc.rollback(NS, "s1")
        svc.worker.attempt(UUID(result.migration_id))
        assert svc.migration(NS, "s1").state == "completed"
        assert failed and svc.verify() == []
