"""The simulator as Temporal's Schedules API for the forward migration (domain.ports.ScheduleHost):
list, describe, update the pause and notes under a conflict token, delete.

A schedule here is one the simulator runs (sim_schedules.py): a chain at
``temporal-sys-scheduler:<id>`` whose head carries a handover. Its mutable state lives on the
head (``sched``: token, pause, notes, when the pause applied, when it was deleted). As on the
server, an update may be accepted and applied later: with ``defer_updates`` on, an accepted
update waits until ``apply_updates()`` (or is dropped then, if the token moved meanwhile).
``user_update`` is someone else's update (it moves the token).
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable

from schedfence.domain.source.action import nominal_text, parse_nominal
from schedfence.domain.forward.boundary import boundary_cursor, observation, probe_plan
from schedfence.domain.rollback.handover import Handover, destination_starts
from schedfence.domain.ids import WORKFLOW_ID_PREFIX
from schedfence.domain.ports import (ConflictTokenMoved, DestinationNotFound,
                                     DestinationUnavailable, ScheduleSnapshot)
from schedfence.domain.source.spec import ScheduleSpec

PAGE_SIZE_MAX = 1000


class SimScheduleHost:
    """Mixed into ``SimulatedDestination`` (``_state``, ``clock``, ``_next_fault``,
    ``_chain_head``)."""

    _state: Any
    clock: Callable[[], datetime]
    if TYPE_CHECKING:  # SimulatedDestination's, and SimSchedules'
        def _next_fault(self, op: str) -> str | None: ...
        def _chain_head(self, tx: Any, namespace: str, workflow_id: str) -> dict: ...

    defer_updates: bool = False
    # How far the server's scheduler lags when a pause lands: the spec times due in that
    # stretch before it are dropped, never started (Temporal's scheduler buffers a time and
    # drops it when the pause comes in the same workflow task; issue 27, item 5).
    pause_lag: timedelta = timedelta(0)

    # -- the port ---------------------------------------------------------------------------
    def list_schedules(self, namespace: str, page_token: bytes | None = None,
                       page_size: int = 100) -> tuple[list[str], bytes | None]:
        """Live schedules of ``namespace`` by id, in a stable order, a page at a time."""
        with self._state.session() as tx:
            ids = sorted(wid.removeprefix(WORKFLOW_ID_PREFIX) for ns, wid in tx.workflow_ids()
                         if ns == namespace and wid.startswith(WORKFLOW_ID_PREFIX)
                         and self._live_head(tx, ns, wid) is not None)
        after = page_token.decode() if page_token else None
        rest = [i for i in ids if after is None or i > after]
        page = rest[:max(1, min(page_size, PAGE_SIZE_MAX))]
        more = len(rest) > len(page)
        return page, (page[-1].encode() if more else None)

    def describe_schedule(self, namespace: str, schedule_id: str) -> ScheduleSnapshot:
        if self._next_fault("describe") in ("unavailable", "fail_before_commit",
                                            "lose_response"):
            raise DestinationUnavailable("describe schedule: unavailable")
        with self._state.session() as tx:
            head = self._head(tx, namespace, schedule_id)
            return self._snapshot(namespace, schedule_id, head)

    def update_schedule_state(self, namespace: str, schedule_id: str, conflict_token: str,
                              paused: bool, notes: str) -> None:
        fault = self._next_fault("update")
        if fault in ("unavailable", "fail_before_commit"):
            raise DestinationUnavailable("update schedule: unavailable")
        with self._state.session() as tx:
            head = self._head(tx, namespace, schedule_id)
            sched = self._sched(head)
            if str(sched["token"]) != conflict_token:
                raise ConflictTokenMoved(f"schedule {schedule_id}: conflict token "
                                         f"{conflict_token} is stale")
            if self.defer_updates:
                sched.setdefault("pending", []).append([conflict_token, paused, notes])
            else:
                self._apply(sched, paused, notes)
        if fault == "lose_response":
            raise DestinationUnavailable("update schedule accepted but its response was lost")

    def delete_schedule(self, namespace: str, schedule_id: str) -> None:
        fault = self._next_fault("delete_schedule")
        if fault in ("unavailable", "fail_before_commit"):
            raise DestinationUnavailable("delete schedule: unavailable")
        with self._state.session() as tx:
            head = self._head(tx, namespace, schedule_id)
            self._sched(head)["deleted_at"] = self.clock().isoformat()
            runs = tx.runs(namespace, WORKFLOW_ID_PREFIX + schedule_id)
            # the server's scheduler workflow completes (its close: the delete's instant)
            now = self.clock().isoformat()
            runs[-1].update(status="completed", closed_at=now)
        if fault == "lose_response":
            raise DestinationUnavailable("delete schedule committed but its response was lost")

    # -- environment operations ---------------------------------------------------------------
    def apply_updates(self, namespace: str, schedule_id: str) -> None:
        """The server's scheduler applies the updates it accepted, each only if its token is
        still the schedule's (else it is dropped, as the server drops it)."""
        with self._state.session() as tx:
            sched = self._sched(self._head(tx, namespace, schedule_id))
            for token, paused, notes in sched.pop("pending", []):
                if str(sched["token"]) == token:
                    self._apply(sched, paused, notes)

    def user_update(self, namespace: str, schedule_id: str, paused: bool, notes: str) -> None:
        """Someone else's update, applied at once."""
        with self._state.session() as tx:
            self._apply(self._sched(self._head(tx, namespace, schedule_id)), paused, notes)

    def temporal_starts(self, namespace: str, schedule_id: str,
                        now: datetime | None = None) -> list[datetime]:
        """The Temporal side's record of action starts, deleted or not: its handover's patch,
        its settled boundary and its own spec times until it was paused or deleted."""
        with self._state.session() as tx:
            runs = tx.runs(namespace, WORKFLOW_ID_PREFIX + schedule_id)
            heads = [r for r in runs if "created_at" in r]
            if not heads:
                raise DestinationNotFound(f"no schedule {namespace}/{schedule_id}")
            head = heads[-1]
        sched = head.get("sched", {})
        if not head["input"].get("handover"):
            return []
        stops = [parse_nominal(t) for t in (sched.get("paused_at"), sched.get("deleted_at"))
                 if t] + [now or self.clock()]
        if sched.get("paused_at"):
            stops.append(parse_nominal(sched["paused_at"]) - self.pause_lag)
        return destination_starts(Handover.model_validate(head["input"]["handover"]),
                                  parse_nominal(head["created_at"]),
                                  [parse_nominal(t) for t in head.get("settled", [])],
                                  min(stops))

    # -- helpers --------------------------------------------------------------------------------
    def _live_head(self, tx: Any, namespace: str, workflow_id: str) -> dict | None:
        try:
            return self._chain_head(tx, namespace, workflow_id)
        except DestinationNotFound:
            return None

    def _head(self, tx: Any, namespace: str, schedule_id: str) -> dict:
        return self._chain_head(tx, namespace, WORKFLOW_ID_PREFIX + schedule_id)

    @staticmethod
    def _sched(head: dict) -> dict:
        doc = head["input"]
        return head.setdefault("sched", {"token": 1, "paused": bool(doc.get("paused")),
                                         "notes": str(doc.get("notes", ""))})

    def _apply(self, sched: dict, paused: bool, notes: str) -> None:
        now = self.clock().isoformat()
        if paused and not sched["paused"]:
            sched["paused_at"] = now
        sched.update(token=int(sched["token"]) + 1, paused=paused, notes=notes, updated_at=now)

    def _snapshot(self, namespace: str, schedule_id: str, head: dict) -> ScheduleSnapshot:
        sched = self._sched(head)
        doc = head["input"].get("handover") or {}
        program = {k: doc.get(k) for k in ("spec", "action", "policies", "remaining_actions")}
        created = parse_nominal(head["created_at"])
        started = self._started(head, doc, sched)
        recent = tuple({"nominal": nominal_text(t), "origin": "auto"} for t in started[-10:])
        boundary = None
        if doc.get("spec") and sched["paused"]:  # applied: when the last update was
            applied = parse_nominal(sched.get("updated_at") or head["created_at"])
            boundary = self._boundary(doc, created, applied, recent, set(started))
        return ScheduleSnapshot(
            namespace=namespace, schedule_id=schedule_id, conflict_token=str(sched["token"]),
            paused=sched["paused"], notes=sched["notes"], program=program,
            action_count=int(doc.get("action_count", 0)) + len(started),
            recent_actions=recent, running=(), buffered=0,
            responsible_until=boundary_cursor(boundary, False) if boundary else None,
            identity=str(head["first_execution_run_id"]), boundary=boundary)

    def _started(self, head: dict, doc: dict, sched: dict) -> list[datetime]:
        """What this side started: its handover's patch, the settled boundary, and its own
        spec times until the pause, but for the ``pause_lag`` before it (dropped)."""
        if not doc.get("spec"):
            return []
        stops = [parse_nominal(sched["paused_at"]) - self.pause_lag] \
            if sched.get("paused_at") else []
        return destination_starts(
            Handover.model_validate(doc), parse_nominal(head["created_at"]),
            [parse_nominal(t) for t in head.get("settled", [])],
            min([*stops, self.clock()]))

    @staticmethod
    def _boundary(doc: dict, created: datetime, applied: datetime, recent: tuple,
                  started: set[datetime]) -> dict[str, Any]:
        """The observation the Temporal host makes (forward_boundary.py), from this side's
        own record of starts in place of describes by workflow id."""
        spec = ScheduleSpec.model_validate(doc["spec"])
        floor, candidates = probe_plan(spec, "", created, applied,
                                       [r["nominal"] for r in recent], [])
        probed: list[tuple[datetime, bool]] = []
        for t in candidates:
            probed.append((t, t in started))
            if probed[-1][1]:
                break
        return observation(created, applied, floor, probed)
