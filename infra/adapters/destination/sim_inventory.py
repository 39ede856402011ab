"""The simulator as a schedule inventory (domain.ports.ScheduleInventory), mixed into
``SimulatedDestination``: its live schedules (sim_forward.py's chains at
``temporal-sys-scheduler:<id>``) with their pause, next spec time on the simulator's clock
and, from ``find_schedule``, their program. ``create_by_hand`` is an environment operation:
someone creating a schedule with Temporal's own tools (no migration, no handover of ours)."""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable

from schedfence.domain.ids import SCHEDULER_WORKFLOW_TYPE, WORKFLOW_ID_PREFIX
from schedfence.domain.ports import (DestinationUnavailable, ListedSchedule, StartAccepted,
                                     StartWorkflow)
from schedfence.domain.source.action import nominal_text
from schedfence.domain.source.spec import ScheduleSpec, times_after

PAGE_SIZE_MAX = 1000


class SimInventory:
    """Mixed into ``SimulatedDestination`` (``_state``, ``clock``, ``_next_fault``,
    ``_live_head``)."""

    _state: Any
    clock: Callable[[], datetime]
    if TYPE_CHECKING:  # SimulatedDestination's, and SimScheduleHost's
        def _next_fault(self, op: str) -> str | None: ...
        def _live_head(self, tx: Any, namespace: str, workflow_id: str) -> dict | None: ...
        def start_workflow(self, request: StartWorkflow) -> StartAccepted: ...

    def list_schedule_page(self, namespace: str, page_token: bytes | None = None,
                           page_size: int = 1000
                           ) -> tuple[list[ListedSchedule], bytes | None]:
        after = page_token.decode() if page_token else ""
        size = max(1, min(page_size, PAGE_SIZE_MAX))
        with self._state.session() as tx:
            ids = sorted(wid for ns, wid in tx.workflow_ids()
                         if ns == namespace and wid.startswith(WORKFLOW_ID_PREFIX)
                         and wid.removeprefix(WORKFLOW_ID_PREFIX) > after)
            found: list[ListedSchedule] = []
            for wid in ids:
                head = self._live_head(tx, namespace, wid)
                if head is not None:
                    found.append(self._listed(wid.removeprefix(WORKFLOW_ID_PREFIX), head))
                    if len(found) > size:
                        break
        page = found[:size]
        return page, (page[-1].schedule_id.encode() if len(found) > size else None)

    def find_schedule(self, namespace: str, schedule_id: str) -> ListedSchedule | None:
        if self._next_fault("describe") in ("unavailable", "fail_before_commit",
                                            "lose_response"):
            raise DestinationUnavailable("describe schedule: unavailable")
        with self._state.session() as tx:
            head = self._live_head(tx, namespace, WORKFLOW_ID_PREFIX + schedule_id)
            if head is None:
                return None
            listed = self._listed(schedule_id, head)
        doc = head["input"].get("handover") or {}
        return ListedSchedule(listed.schedule_id, listed.paused, listed.next_run,
                              {"spec": doc.get("spec"), "action": doc.get("action")},
                              listed.handed_over)

    def _listed(self, schedule_id: str, head: dict) -> ListedSchedule:
        sched = head.get("sched") or {"paused": head["input"].get("paused")}  # read, not set
        paused = bool(sched["paused"])
        spec = (head["input"].get("handover") or {}).get("spec")
        upcoming = None
        if spec and not paused:
            upcoming = next(times_after(ScheduleSpec.model_validate(spec), self.clock()), None)
        # A rollback's create carries its handover (the memo on Temporal); one by hand not.
        return ListedSchedule(schedule_id, paused,
                              nominal_text(upcoming) if upcoming else None,
                              handed_over=not head["input"].get("by_hand"))

    # -- environment operations ---------------------------------------------------------------
    def create_by_hand(self, namespace: str, schedule_id: str, spec: dict | None = None,
                       action: dict | None = None, paused: bool = False) -> None:
        """A schedule someone made with Temporal's tools, not handed over by a migration."""
        handover = {"namespace": namespace, "schedule_id": schedule_id, "incarnation": 0,
                    "paused": paused, "notes": "made by hand", "spec": spec, "action": action,
                    "cursor": nominal_text(self.clock())}  # it acts from its create on
        self.start_workflow(StartWorkflow(
            namespace=namespace, workflow_id=WORKFLOW_ID_PREFIX + schedule_id,
            request_id=f"by-hand/{schedule_id}/{self.clock().isoformat()}",
            workflow_type=SCHEDULER_WORKFLOW_TYPE,
            input={"handover": handover, "paused": paused, "notes": "made by hand",
                   "by_hand": True}))
