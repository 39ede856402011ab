"""Stores holding the failure modes' histories, for the projection tests.

One store, several schedules, each left in the state one failure mode produces; two workers
and two operators act, so audit queries by actor have something to tell apart. ``between`` runs
after every step (tests pass a catch-up there to project incrementally).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from schedfence.domain.ids import destination_workflow_id
from schedfence.infra.demo.legacy import plant_legacy_v1
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from tests.helpers import NS, start_foreign

OTHER_NS = "payments"


@dataclass
class Histories:
    service: MigrationService  # worker w1
    second: MigrationService  # worker w2, same store and destination
    dest: SimulatedDestination
    sids: dict[str, str] = field(default_factory=dict)  # scenario -> schedule id

    def close(self) -> None:
        self.second.close()
        self.service.close()


def build(store: str, between: Callable[[Histories], Any] | None = None) -> Histories:
    """Schedules in every state: completed (two), parked foreign / head_missing, claimed,
    pending, legacy_pending, adopted, aborted. ``store`` must be a file store (two services)."""
    dest = SimulatedDestination()
    # The histories compress time: a worker may reconcile another's claim at once (no grace).
    w1 = open_service(store, dest, worker_id="w1", claim_grace=0, retry_for=0)
    w2 = open_service(store, dest, worker_id="w2", claim_grace=0, retry_for=0)
    h = Histories(w1, w2, dest)
    steps = [
        lambda: _completed(h, "done", w1, actor="alice"),
        lambda: _completed(h, "done2", w2, actor="bob", ns=OTHER_NS),
        lambda: _foreign(h, "foreign", w1),
        lambda: _head_missing(h, "gone", w1),
        lambda: _legacy(h, "legacy", w1),
        lambda: _adopted(h, "adopted", w1),
        lambda: _aborted(h, "aborted", w2),
        # Last: no worker may run after these, or it would move them on.
        lambda: _lost(h, "claimed", w2),
        lambda: _pending(h, "pending", w1),
    ]
    for step in steps:
        step()
        if between is not None:
            between(h)
    if between is None:
        _unproject(h)
    return h


def _unproject(h: Histories) -> None:
    """Workers keep the projection current (it is their due-work index); unless a test
    projects step by step (``between``), it wants a log nobody has projected yet."""
    h.service.views.projector.view.drop_tables()
    h.service.views.close()
    h.second.views.close()


def _create(h: Histories, key: str, sid: str, svc: MigrationService, ns: str = NS) -> None:
    h.sids[key] = sid
    svc.create_schedule(ns, sid, notes=f"notes of {sid}")


def _completed(h: Histories, sid: str, svc: MigrationService, actor: str,
               ns: str = NS) -> None:
    _create(h, sid, sid, svc, ns)
    svc.rollback(ns, sid, request_id=f"req-{sid}", actor=actor)
    svc.run_until_idle()


def _foreign(h: Histories, sid: str, svc: MigrationService) -> None:
    _create(h, sid, sid, svc)
    start_foreign(h.dest, sid)
    svc.rollback(NS, sid, request_id=f"req-{sid}", actor="alice")
    svc.run_until_idle()  # parked foreign_destination, no commit proven


def _lost(h: Histories, sid: str, svc: MigrationService) -> None:
    """A committed start whose response was lost; the worker backs off, claim consumed."""
    _create(h, sid, sid, svc)
    svc.rollback(NS, sid, request_id=f"req-{sid}", actor="alice")
    h.dest.inject("start", "lose_response")
    svc.run_until_idle()


def _head_missing(h: Histories, sid: str, svc: MigrationService) -> None:
    _create(h, sid, sid, svc)
    svc.rollback(NS, sid, request_id=f"req-{sid}", actor="alice")
    h.dest.inject("start", "lose_response")
    svc.run_until_idle()  # claimed, outcome unknown ... then reconcile finds nothing
    h.dest.delete(NS, destination_workflow_id(sid))
    svc.run_until_idle()


def _pending(h: Histories, sid: str, svc: MigrationService) -> None:
    _create(h, sid, sid, svc)
    svc.rollback(NS, sid, request_id=f"req-{sid}", actor="carol")  # no worker runs after


def _legacy(h: Histories, sid: str, svc: MigrationService) -> None:
    _create(h, sid, sid, svc)
    plant_legacy_v1(svc, NS, sid)


def _adopted(h: Histories, sid: str, svc: MigrationService) -> None:
    _create(h, sid, sid, svc)
    plant_legacy_v1(svc, NS, sid)
    svc.recover("adopt", NS, sid, actor="dave", reason="ticket-7", request_id=f"req-{sid}")


def _aborted(h: Histories, sid: str, svc: MigrationService) -> None:
    _create(h, sid, sid, svc)
    start_foreign(h.dest, sid)
    svc.rollback(NS, sid, request_id=f"req-{sid}", actor="alice")
    svc.run_until_idle()
    svc.abort(NS, sid, reason="wrong-schedule", actor="bob")
