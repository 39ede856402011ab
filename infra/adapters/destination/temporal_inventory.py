"""A Temporal namespace's schedules for the ownership audit (domain.ports.ScheduleInventory),
mixed into ``TemporalDestination``: ListSchedules pages (each entry's info carries its pause
and its future action times) and one DescribeSchedule per schedule asked for."""
from __future__ import annotations

from datetime import timezone
from typing import TYPE_CHECKING, Any

from temporalio.api.workflowservice.v1 import ListSchedulesRequest

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ports import DestinationNotFound, ListedSchedule
from schedfence.domain.source.action import nominal_text
from schedfence.infra.adapters.destination.schedule_proto import MEMO_KEY, program_docs

PAGE_SIZE_MAX = 1000


def _first_time(times: Any) -> str | None:
    return nominal_text(times[0].ToDatetime(tzinfo=timezone.utc)) if len(times) else None


class TemporalInventory:
    if TYPE_CHECKING:  # TemporalDestination's, and TemporalScheduleHost's
        def _rpc(self, what: str, method: str, rpc: Any, to_error: Any) -> Any: ...
        def _check_namespace(self, namespace: str) -> None: ...
        def _raw_describe(self, namespace: str, schedule_id: str) -> Any: ...

    def list_schedule_page(self, namespace: str, page_token: bytes | None = None,
                           page_size: int = 1000
                           ) -> tuple[list[ListedSchedule], bytes | None]:
        from schedfence.infra.adapters.destination.temporal_wire import describe_error
        self._check_namespace(namespace)
        resp = self._rpc("list schedules", "list_schedules", ListSchedulesRequest(
            namespace=namespace, maximum_page_size=max(1, min(page_size, PAGE_SIZE_MAX)),
            next_page_token=page_token or b""), describe_error)
        found = [ListedSchedule(s.schedule_id, s.info.paused,
                                None if s.info.paused else _first_time(s.info.future_action_times),
                                handed_over=MEMO_KEY in s.memo.fields)
                 for s in resp.schedules]
        return found, (resp.next_page_token or None)

    def find_schedule(self, namespace: str, schedule_id: str) -> ListedSchedule | None:
        try:
            resp = self._raw_describe(namespace, schedule_id)
        except DestinationNotFound:
            return None
        try:
            program = program_docs(resp.schedule, resp.memo)
        except (ValueError, InvalidArgument) as exc:  # no form on the source says the same
            program = {"unsupported": getattr(exc, "message", None) or str(exc)}
        paused = resp.schedule.state.paused
        return ListedSchedule(schedule_id, paused, None if paused else
                              _first_time(resp.info.future_action_times),
                              {"spec": program.get("spec"), "action": program.get("action")},
                              MEMO_KEY in resp.memo.fields)
