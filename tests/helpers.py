"""Shared test scaffolding: a service on the test's store (SQLite or PostgreSQL), a
scriptable crash hook, and given/when/then steps that name the failing step in an assertion
message.

The crash hook doubles as an *interleaving* hook: an action registered at a boundary runs
exactly there (once), so a test can make a second actor act between a worker's read and its
append, or raise ``Crash`` to simulate the process dying at that point.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import pytest

from schedfence.domain.ids import destination_workflow_id, schedule_aggregate_id
from schedfence.domain.ports import StartAccepted, StartWorkflow
from schedfence.infra.demo.legacy import plant_legacy_v1
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

NS = "default"
SID = "s1"
WID = destination_workflow_id(SID)
MEMORY = "sqlite:///:memory:"


class Crash(Exception):
    """A simulated process crash at a named boundary."""


class Hooks:
    """A crash hook (``callable(point)``) that records every boundary it sees.

    Actions are one-shot and removed *before* they run, so an action that re-enters the
    service (another worker, an admin call) does not trigger itself again.
    """

    def __init__(self) -> None:
        self.points: list[str] = []
        self._actions: dict[str, Callable[[], None]] = {}

    def __call__(self, point: str) -> None:
        self.points.append(point)
        action = self._actions.pop(point, None)
        if action is not None:
            action()

    def crash_once(self, point: str) -> None:
        def crash() -> None:
            raise Crash(point)
        self._actions[point] = crash

    def once(self, point: str, action: Callable[[], None]) -> None:
        self._actions[point] = action

    def seen(self, prefix: str) -> list[str]:
        return [p for p in self.points if p.startswith(prefix)]


@dataclass
class World:
    service: MigrationService
    dest: SimulatedDestination
    hooks: Hooks

    def schedule_state(self, sid: str = SID, ns: str = NS):
        """The source aggregate's folded state (read-only use)."""
        n = self.service.schedule(ns, sid).incarnation
        return self.service.app.repository.get(schedule_aggregate_id(ns, sid, n)).state

    def migration_events(self, sid: str = SID, migration_id: str | None = None,
                         ns: str = NS) -> list[str]:
        """Short event type names of the key's migration events (or one migration's)."""
        return [e.type.rsplit(".", 1)[-1] for e in self.service.history(ns, sid)
                if e.aggregate == "migration"
                and (migration_id is None or e.aggregate_id == migration_id)]

    def migration_entries(self, sid: str = SID, ns: str = NS):
        return [e for e in self.service.history(ns, sid) if e.aggregate == "migration"]

    def start_outcomes(self, sid: str = SID, ns: str = NS) -> list[str]:
        """Outcomes of the starts *our* migrations issued (their input names the schedule)."""
        return [kind for req, kind in self.dest.start_log(ns, destination_workflow_id(sid))
                if req.input.get("schedule_id") == sid]

    def created(self, sid: str = SID, request_id: str | None = None, ns: str = NS) -> int:
        return self.dest.created_count(ns, destination_workflow_id(sid), request_id)

    def chains(self, sid: str = SID, ns: str = NS) -> list[str]:
        return self.dest.chains(ns, destination_workflow_id(sid))

    def runs(self, sid: str = SID, ns: str = NS):
        return self.dest.runs(ns, destination_workflow_id(sid))


def new_world(store: str = MEMORY, dest: SimulatedDestination | None = None,
              worker_id: str = "w1", claim_grace: float = 0.0, retry_for: float = 0.0) -> World:
    """A service on ``store`` over a simulator. ``claim_grace`` and ``retry_for`` default to
    0: these tests play one worker step after another (``run_until_idle`` tries what backs
    off once), and a reconcile right after a crash or a lost answer should decide at once
    (tests of the grace and of draining pass their own, or use ``open_service``'s)."""
    hooks = Hooks()
    dest = dest if dest is not None else SimulatedDestination()
    service = open_service(store, dest, worker_id=worker_id, crash_hook=hooks,
                           claim_grace=claim_grace, retry_for=retry_for)
    return World(service, dest, hooks)


@pytest.fixture
def world(store_url: str) -> Iterator[World]:
    """A world on the test's store: SQLite in memory, or PostgreSQL (see tests/conftest.py)."""
    w = new_world(store_url)
    yield w
    w.service.close()


def start_foreign(dest: SimulatedDestination, sid: str = SID, *,
                  workflow_type: str = "user-workflow",
                  request_id: str = "foreign-request") -> StartAccepted:
    """Somebody else's workflow at the destination id."""
    return dest.start_workflow(StartWorkflow(NS, destination_workflow_id(sid), request_id,
                                             workflow_type))


def plant_legacy(service: MigrationService, sid: str = SID, *, ns: str = NS) -> str:
    """An identity-less pending migration, stored as the v1 record an older release wrote (F8)."""
    return plant_legacy_v1(service, ns, sid)


@contextmanager
def _step(kind: str, text: str) -> Iterator[None]:
    try:
        yield
    except AssertionError as exc:
        raise AssertionError(f"[{kind} {text}] {exc}") from exc


def given(text: str):
    return _step("given", text)


def when(text: str):
    return _step("when", text)


def then(text: str):
    return _step("then", text)


@contextmanager
def nothing_written(service: MigrationService) -> Iterator[None]:
    """The block must leave the store's event count exactly as it was."""
    before = service.event_count()
    yield
    after = service.event_count()
    assert after == before, f"{after - before} event(s) were written"


@contextmanager
def refused(service: MigrationService, error: type[Exception]) -> Iterator[None]:
    """The block raises ``error`` and writes nothing."""
    with nothing_written(service), pytest.raises(error):
        yield
