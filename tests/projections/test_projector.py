"""The projector: exactly-once under crashes at every step, rebuild = incremental, resumption,
racing projectors, and a hard stop (naming the position) at a gap or an undecodable event."""
from __future__ import annotations

import sqlite3
import threading
import uuid

import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent, Tracking

from schedfence.domain.errors import DomainError
from schedfence.domain.rollback.aggregate import Migration
from schedfence.infra.adapters.store.codec import UndecodableEvent
from schedfence.infra.adapters.store.sql import WRITE_OPTIONS, engine_for_application, row_writer_for
from schedfence.projections.projection import FenceProjection
from schedfence.projections.runner import Projector, ProjectionGap, ProjectionStopped
from schedfence.projections.view import FenceViews
from tests import pgtools
from tests.helpers import Crash
from tests.projections.histories import Histories, build

POINTS = ("projection.rows_written", "projection.tracking_written", "projection.committed")


@pytest.fixture
def store(file_store_url: str) -> str:
    """A SQLite file or a PostgreSQL schema: every test runs on both (tests/conftest.py)."""
    return file_store_url


@pytest.fixture
def hist(store: str):
    h = build(store)
    yield h
    h.close()


class CrashAt:
    """Raise ``Crash`` the ``nth`` time (from 1) ``point`` is reached; count every point."""

    def __init__(self, point: str, nth: int) -> None:
        self.point, self.nth, self.seen = point, nth, 0

    def __call__(self, point: str) -> None:
        if point == self.point:
            self.seen += 1
            if self.seen == self.nth:
                raise Crash(point)


def projector(h: Histories, hook=None, batch_size: int = 500) -> Projector:
    """A projector of its own (own engine), as a separate process would have, writing as the
    service's does (COPY and a commit thread on PostgreSQL: infra/application/views.py)."""
    engine = engine_for_application(h.service.app)
    view = FenceViews(engine, FenceProjection.name, hook, write_options=WRITE_OPTIONS,
                      rows=row_writer_for(engine))
    view.create_tables()
    return Projector(h.service.app, view, batch_size=batch_size,
                     pipeline=engine.dialect.name == "postgresql")


def clean_rebuild(h: Histories) -> dict:
    p = projector(h)
    p.rebuild()
    return p.view.dump()


# -- exactly once -----------------------------------------------------------------------------
@pytest.mark.parametrize("point", POINTS)
@pytest.mark.parametrize("batch_size", [1, 7])
def test_a_crash_at_every_batch_then_resume_equals_a_clean_rebuild(hist: Histories, point: str,
                                                                    batch_size: int) -> None:
    """Every batch crashes once at ``point`` (each run: a fresh projector, as after a restart).

    Inside the transaction the crashed batch applies nothing, so the next run redoes it first
    and crashes at the one after; after the commit the batch is kept."""
    events, inside = hist.service.event_count(), not point.endswith("committed")
    crashes, nth = 0, 1
    while True:
        p = projector(hist, CrashAt(point, nth), batch_size)
        before = p.position
        try:
            p.catch_up()
            break
        except Crash:
            crashes += 1
            after = projector(hist).position
            assert after == min(before + (nth - 1 if inside else 1) * batch_size, events)
            nth = 2 if inside else 1
        finally:
            p.view.engine.dispose()
    batches = -(-events // batch_size)
    assert crashes == batches  # inside: batch 1 by the first run, each later one by the next
    resumed = projector(hist).view.dump()
    assert resumed == clean_rebuild(hist)
    assert len(resumed["schedfence_proj_audit"]) == events


def test_crash_inside_the_transaction_leaves_position_and_rows_untouched(hist: Histories) -> None:
    p = projector(hist, CrashAt("projection.tracking_written", 1), batch_size=10)
    with pytest.raises(Crash):
        p.catch_up()
    assert p.position == 0
    assert all(rows == [] for rows in p.view.dump().values())


def test_projecting_after_every_step_equals_a_rebuild(store: str) -> None:
    positions: list[int] = []

    def project(h: Histories) -> None:
        h.service.catch_up()  # workers may have projected part of the step already
        positions.append(h.service.views.projector.position)

    h = build(store, between=project)
    try:
        # Really incremental: every step's events were projected before the next step.
        assert len(positions) > 5 and positions == sorted(set(positions))
        assert positions[-1] == h.service.event_count()
        assert h.service.views.projector.view.dump() == clean_rebuild(h)
    finally:
        h.close()


def test_rebuild_from_zero_gives_the_same_views(hist: Histories) -> None:
    hist.service.catch_up()
    first = hist.service.views.projector.view.dump()
    assert hist.service.views.rebuild() == hist.service.event_count()
    assert hist.service.views.projector.view.dump() == first


def test_catch_up_is_a_no_op_when_nothing_is_new(hist: Histories) -> None:
    assert hist.service.catch_up() == hist.service.event_count()
    assert hist.service.catch_up() == 0
    hist.service.create_schedule("default", "late")
    assert hist.service.catch_up() == 3  # key created, incarnation, schedule created


def test_a_projector_resumes_where_another_process_stopped(hist: Histories) -> None:
    first = projector(hist, batch_size=5)
    first._one_batch()
    first._one_batch()
    assert first.position == 10
    second = projector(hist, batch_size=5)
    assert second.catch_up() == hist.service.event_count() - 10
    assert second.view.dump() == clean_rebuild(hist)


def test_racing_projectors_apply_each_event_once(hist: Histories) -> None:
    a, b = projector(hist, batch_size=3), projector(hist, batch_size=3)
    raced = {"done": False}
    original = a.view.prefetch

    def prefetch_after_b_won(ids) -> None:  # a read its batch; b commits the same positions
        if not raced["done"]:
            raced["done"] = True
            b.catch_up()
        original(ids)

    a.view.prefetch = prefetch_after_b_won  # type: ignore[method-assign]  # wraps the real one
    assert a.catch_up() == 0  # a's batch conflicted; on retry nothing was left
    assert a.view.dump() == clean_rebuild(hist)


def test_a_commit_that_loses_the_race_drops_the_batch_built_on_it(hist: Histories) -> None:
    """While a's first batch commits (in its commit thread on PostgreSQL), a builds the next
    batch on top of it; b commits the same positions first, so a's commit conflicts and the
    batch built on it must be dropped and read again from what b stored."""
    a, b = projector(hist, batch_size=3), projector(hist, batch_size=3)
    original, raced = a.view.commit_batch, {"done": False}

    def commit_after_b_won(batch) -> None:
        if not raced["done"]:
            raced["done"] = True
            b.catch_up()
        original(batch)

    a.view.commit_batch = commit_after_b_won  # type: ignore[method-assign, assignment]  # wraps it
    assert a.catch_up() == 0  # a's first commit conflicted; on retry nothing was left
    assert raced["done"] and a.view.dump() == clean_rebuild(hist)


def test_projectors_taking_turns_read_what_the_other_stored(hist: Histories) -> None:
    """Each keeps the rows of its last batch; after the other's batch they are stale and must
    not be used (the stored position moved), or the folds would miss the other's events."""
    a, b = projector(hist, batch_size=4), projector(hist, batch_size=4)
    turns = 0
    while a.position < hist.service.event_count():
        (a if turns % 2 == 0 else b)._one_batch()
        turns += 1
    assert turns > 4
    assert a.view.dump() == b.view.dump() == clean_rebuild(hist)


def test_a_rebuild_reads_in_big_batches_and_restores_the_batch_size(hist: Histories) -> None:
    p = projector(hist, batch_size=7)
    sizes: list[int] = []
    p.rebuild(on_batch=lambda batch: sizes.append(batch.applied))
    assert sizes == [hist.service.event_count()]  # one batch: the log is under 5,000 events
    assert p.batch_size == 7
    assert p.view.dump() == clean_rebuild(hist)


def test_threads_projecting_concurrently_agree_with_rebuild(hist: Histories) -> None:
    projectors = [projector(hist, batch_size=4) for _ in range(3)]
    errors: list = []

    def run(p: Projector) -> None:
        try:
            p.catch_up()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(p,)) for p in projectors]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert projectors[0].view.dump() == clean_rebuild(hist)


# -- the TrackingRecorder interface ----------------------------------------------------------
def test_tracking_recorder_interface(hist: Histories) -> None:
    view = projector(hist).view
    name = hist.service.app.name
    assert view.max_tracking_id(name) is None
    assert view.has_tracking_id(name, None)
    assert not view.has_tracking_id(name, 1)
    view.insert_tracking(Tracking(name, 4))
    assert view.max_tracking_id(name) == 4
    assert view.has_tracking_id(name, 3) and not view.has_tracking_id(name, 5)
    with pytest.raises(IntegrityError):
        view.insert_tracking(Tracking(name, 4))  # only forwards: an event applies once
    assert view.max_tracking_id("other-app") is None


# -- stopping, never skipping ------------------------------------------------------------------
def _raw_insert(h: Histories, topic: str, state: bytes) -> int:
    h.service.app.recorder.insert_events(
        [StoredEvent(originator_id=uuid.uuid4(), originator_version=1, topic=topic, state=state)])
    return h.service.event_count()


@pytest.mark.parametrize("topic,state", [
    ("schedfence.migration.NoSuchEvent", b"{}"),
    (Migration.StartClaimConsumed.TOPIC, b"not json"),
    (Migration.StartClaimConsumed.TOPIC, b'{"request_id": 5}'),
])
def test_an_undecodable_event_stops_the_projector_at_its_position(hist: Histories, topic: str,
                                                                  state: bytes) -> None:
    bad = _raw_insert(hist, topic, state)
    hist.service.create_schedule("default", "after-bad")
    p = projector(hist, batch_size=7)
    with pytest.raises(UndecodableEvent) as err:
        p.catch_up()
    assert err.value.position == bad
    assert f"log position {bad}" in err.value.message
    assert f"stopped after position {bad - 1}" in err.value.message
    assert p.position == bad - 1  # everything before it applied, nothing after
    with pytest.raises(UndecodableEvent):
        p.catch_up()  # and it stays stopped there
    assert p.position == bad - 1
    with pytest.raises(UndecodableEvent) as via_service:
        hist.service.audit(schedule="default/done")
    assert via_service.value.code == "undecodable_event"


def test_an_event_the_reducer_rejects_stops_the_projector(hist: Histories) -> None:
    orphan = Migration.StartClaimConsumed(originator_id=uuid.uuid4(), originator_version=2,
                                          request_id="r", attempt=1, worker="w9")
    hist.service.app.recorder.insert_events([hist.service.app.mapper.to_stored_event(orphan)])
    bad = hist.service.event_count()
    p = projector(hist)
    with pytest.raises(ProjectionStopped) as err:
        p.catch_up()
    assert err.value.position == bad and f"log position {bad}" in err.value.message
    assert p.position == bad - 1


def _delete_rows(store: str, *positions: int) -> None:
    """Lose events from the log, as a damaged store would (a hole on either store)."""
    if store.startswith("sqlite:///"):
        with sqlite3.connect(store.removeprefix("sqlite:///")) as db:
            db.executemany("DELETE FROM stored_events WHERE rowid = ?",
                           [(p,) for p in positions])
        return
    with pgtools.connect(store) as db:
        db.execute("DELETE FROM schedfence_events WHERE notification_id = ANY(%s)",
                   (list(positions),))


@pytest.mark.parametrize("missing", [[1], [20], [20, 21, 22]])
def test_a_gap_in_the_log_stops_the_projector_naming_the_position(
        hist: Histories, store: str, missing: list[int]) -> None:
    _delete_rows(store, *missing)
    p = projector(hist, batch_size=500)
    with pytest.raises(ProjectionGap) as err:
        p.catch_up()
    first = missing[0]
    assert err.value.position == first
    assert f"position {first}" in err.value.message
    if len(missing) > 1:
        assert f"{first}..{missing[-1]}" in err.value.message
    assert p.position == first - 1
    assert isinstance(err.value, DomainError) and err.value.code == "projection_gap"


def test_a_gap_at_a_batch_boundary_is_found_too(hist: Histories, store: str) -> None:
    _delete_rows(store, 11)
    p = projector(hist, batch_size=10)
    with pytest.raises(ProjectionGap) as err:
        p.catch_up()
    assert err.value.position == 11 and p.position == 10


def test_tolerated_gaps_pass_only_when_asked(hist: Histories, store: str) -> None:
    """PostgreSQL's mode: a rolled-back sequence value is not a lost event."""
    _delete_rows(store, 20)
    view = projector(hist).view
    p = Projector(hist.service.app, view, tolerate_gaps=True)
    assert p.catch_up() == hist.service.event_count() - 1
    assert 20 not in [row[0] for row in view.dump()["schedfence_proj_audit"]]


# -- where the tables live --------------------------------------------------------------------
def test_tables_live_in_the_store_file_with_the_prefix(hist: Histories, store: str) -> None:
    """Beside the events: in the SQLite file, or in the store's own PostgreSQL schema."""
    hist.service.catch_up()
    if store.startswith("sqlite:///"):
        with sqlite3.connect(store.removeprefix("sqlite:///")) as db:
            names = {r[0] for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
        events_table = "stored_events"
    else:
        names, events_table = pgtools.table_names(store), "schedfence_events"
    ours = {n for n in names if n.startswith("schedfence_proj_")}
    assert ours == {"schedfence_proj_tracking", "schedfence_proj_aggregates",
                    "schedfence_proj_audit", "schedfence_proj_migrations",
                    "schedfence_proj_counts", "schedfence_proj_start_lag"}
    assert events_table in names


def test_a_memory_store_projects_into_its_own_shared_database(store_kind: str,
                                                               new_store_url) -> None:
    """Two SQLite memory stores (two PostgreSQL schemas of one database) never mix views."""
    from tests.helpers import MEMORY, new_world
    if store_kind == "sqlite":
        w, other = new_world(MEMORY), new_world(MEMORY)
    else:
        w, other = new_world(new_store_url("a")), new_world(new_store_url("b"))
    try:
        w.service.create_schedule("default", "m1")
        other.service.create_schedule("default", "m2")
        other.service.create_schedule("default", "m3")
        assert w.service.catch_up() == 3 and other.service.catch_up() == 6
        assert [e.schedule_id for e in w.service.audit().entries] == ["m1"] * 3
    finally:
        w.service.close()
        other.service.close()


def test_a_projection_of_another_schema_version_is_rebuilt(hist: Histories, monkeypatch) -> None:
    hist.service.catch_up()
    before = hist.service.views.projector.view.dump()
    from schedfence.projections import tables
    monkeypatch.setattr(tables, "SCHEMA_VERSION", tables.SCHEMA_VERSION + 1)
    p = projector(hist)
    assert p.position == 0  # the old projection was dropped ...
    p.catch_up()
    assert p.view.dump() == before  # ... and rebuilds to the same views


def test_threads_sharing_one_service_query_safely(hist: Histories) -> None:
    """A server answering queries on several threads shares one projector."""
    errors: list = []

    def ask() -> None:
        try:
            for _ in range(5):
                hist.service.stats()
                hist.service.audit(actor="w1", newest_first=True)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert hist.service.views.projector.view.dump() == clean_rebuild(hist)
