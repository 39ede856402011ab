"""Following the log (projections/follow.py): woken by PostgreSQL's subscription without
polling, polling on SQLite, exactly once across a restart, and the projector's own errors at a
gap or an undecodable event."""
from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from typing import Any, Callable

from eventsourcing.persistence import StoredEvent

from schedfence.domain.errors import InvalidArgument
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.store.codec import UndecodableEvent
from schedfence.projections.follow import (POLL_INTERVAL, SAFETY_INTERVAL, Applied,
                                           ProjectionFollower)
from schedfence.projections.runner import ProjectionGap

WAIT = 15.0  # seconds: far below any interval these tests set where it matters


def wait_until(check: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(0.02)


class Running:
    """A follower running in a thread, its batches and its outcome recorded."""

    def __init__(self, service: MigrationService, **options: Any) -> None:
        self.batches: list[Applied] = []
        self.catch_ups = 0
        self.error: BaseException | None = None
        self.follower = ProjectionFollower(self._counted(service), service.app.recorder,
                                           on_batch=self.batches.append, **options)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _counted(self, service: MigrationService) -> Callable[[], Any]:
        def make() -> Any:
            projector = service.views.projector
            inner = projector.catch_up

            def catch_up(*args: Any, **kwargs: Any) -> int:
                self.catch_ups += 1
                return inner(*args, **kwargs)
            projector.catch_up = catch_up  # type: ignore[method-assign]  # counts, then calls it
            return projector
        return make

    def _run(self) -> None:
        try:
            self.follower.run()
        except BaseException as exc:  # noqa: BLE001  (the test inspects it)
            self.error = exc

    @property
    def position(self) -> int:
        return self.batches[-1].position if self.batches else 0

    def stop(self) -> None:
        self.follower.stop_now()
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the follower did not stop"
        assert self.error is None, self.error

    def failed(self) -> BaseException:
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "the follower did not stop"
        assert self.error is not None, "the follower stopped without an error"
        return self.error


def service(url: str) -> MigrationService:
    return open_service(url, SimulatedDestination())


def tip(svc: MigrationService) -> int:
    return svc.event_count()


def test_a_subscription_wakes_the_follower_without_polling(pg_store: str) -> None:
    """A check interval of an hour: only the NOTIFY of an append can bring its events in."""
    with service(pg_store) as writer, service(pg_store) as reader:
        writer.create_schedule("default", "before")
        run = Running(reader, mode="subscribe", interval=3600)
        wait_until(lambda: run.position == tip(writer), "the first catch-up")
        assert run.follower.waker is not None
        for n in range(3):
            writer.create_schedule("default", f"after-{n}")
            wait_until(lambda: run.position == tip(writer), f"append {n} applied")
        assert run.catch_ups <= 1 + 3  # the first catch-up, then one per wake-up at most
        assert [b.position for b in run.batches] == [3, 6, 9, 12]
        assert all(b.events == 3 and b.lag_seconds >= 0 for b in run.batches)
        run.stop()  # at once, though its interval is an hour
        assert reader.views.status()["projected_through"] == tip(writer)


def test_auto_subscribes_on_postgres_with_a_long_safety_interval(pg_store: str) -> None:
    with service(pg_store) as svc:
        run = Running(svc)
        wait_until(lambda: run.follower.waker is not None, "the subscription")
        assert run.follower.interval == SAFETY_INTERVAL
        run.stop()


def test_sqlite_falls_back_to_polling(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with service(url) as writer, service(url) as reader:
        writer.create_schedule("default", "before")
        run = Running(reader, interval=0.05)  # auto
        wait_until(lambda: run.position == tip(writer), "the first catch-up")
        assert run.follower.waker is None
        writer.create_schedule("default", "after")
        wait_until(lambda: run.position == tip(writer), "the append polled in")
        wait_until(lambda: run.catch_ups >= 6, "it keeps polling, every 0.05 s")
        run.stop()
        assert ProjectionFollower(lambda: reader.views.projector, reader.app.recorder).interval \
            == POLL_INTERVAL


def test_subscribe_on_sqlite_is_refused_before_anything_is_written(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with service(url) as writer:
        writer.create_schedule("default", "s")
    with service(url) as reader:
        run = Running(reader, mode="subscribe")
        err = run.failed()
        assert isinstance(err, InvalidArgument) and "--mode poll" in err.message
    with sqlite3.connect(tmp_path / "store.db") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert not [t for t in tables if t.startswith("schedfence_proj")], tables


def test_exactly_once_across_a_restart(file_store_url: str, store_kind: str) -> None:
    url = file_store_url
    with service(url) as writer:
        writer.create_schedule("default", "a")
        with service(url) as reader:
            first = Running(reader, interval=0.05)
            writer.create_schedule("default", "b")
            wait_until(lambda: first.position == tip(writer), "the first follower")
            first.stop()
        writer.create_schedule("default", "c")  # while nobody follows
        writer.create_schedule("default", "d")
        with service(url) as reader:
            second = Running(reader, interval=0.05)
            writer.create_schedule("default", "e")
            wait_until(lambda: second.position == tip(writer), "the second follower")
            assert (second.follower.waker is not None) == (store_kind == "postgres")
            second.stop()
            batches = first.batches + second.batches
            assert sum(b.events for b in batches) == tip(writer) == 15
            positions = [b.position for b in batches]
            assert positions == sorted(set(positions))  # each event in one batch only
            assert second.batches[0].position > first.batches[-1].position
            status = reader.views.status()
            assert status["projected_through"] == tip(writer)
            followed = reader.views.projector.view.dump()
            reader.views.rebuild()
            assert reader.views.projector.view.dump() == followed  # no row twice, none missing


def _raw_insert(svc: MigrationService, topic: str, state: bytes) -> int:
    svc.app.recorder.insert_events([StoredEvent(originator_id=uuid.uuid4(),
                                                originator_version=1, topic=topic, state=state)])
    return tip(svc)


def test_an_undecodable_event_stops_the_follower_at_its_position(file_store_url: str) -> None:
    with service(file_store_url) as writer, service(file_store_url) as reader:
        writer.create_schedule("default", "good")
        run = Running(reader, interval=0.05 if file_store_url.startswith("sqlite") else 3600)
        wait_until(lambda: run.position == tip(writer), "the first catch-up")
        bad = _raw_insert(writer, "schedfence.migration.NoSuchEvent", b"{}")
        writer.create_schedule("default", "after-bad")
        err = run.failed()
        assert isinstance(err, UndecodableEvent) and err.position == bad
        assert f"stopped after position {bad - 1}" in err.message
        assert reader.views.projector.position == bad - 1


def test_a_gap_stops_the_follower_with_the_projection_error(tmp_path) -> None:
    """SQLite's log has no holes, so a hole is a lost event (PostgreSQL's views pass holes:
    a rolled-back sequence value; see ``Projector``)."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with service(url) as writer:
        for n in range(3):
            writer.create_schedule("default", f"s{n}")
    with sqlite3.connect(tmp_path / "store.db") as db:
        db.execute("DELETE FROM stored_events WHERE rowid = 5")
    with service(url) as reader:
        run = Running(reader, interval=0.05)
        err = run.failed()
        assert isinstance(err, ProjectionGap) and err.position == 5
        assert [(b.position, b.events) for b in run.batches] == [(4, 4)]  # before the gap
        assert reader.views.projector.position == 4
