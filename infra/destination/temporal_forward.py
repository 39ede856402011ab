"""Temporal's Schedules API for the forward migration (domain.ports.ScheduleHost), mixed into
``TemporalDestination``: ListSchedules, DescribeSchedule, an UpdateSchedule that changes only
the pause and notes under the conflict token, DeleteSchedule.

``responsible_until`` is when the server applied the schedule's last update (our fence, once
it shows) or, for a schedule not paused, now; extended to any later spec time whose action
workflow exists on the server (by its deterministic id), so the source never starts a time
the server started.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from temporalio.api.workflowservice.v1 import (DeleteScheduleRequest, DescribeScheduleRequest,
                                               ListSchedulesRequest, UpdateScheduleRequest)
from temporalio.service import RPCError, RPCStatusCode

from schedfence.domain.action import StartWorkflowAction, action_workflow_id, nominal_text
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ports import (ConflictTokenMoved, DestinationNotFound,
                                     ScheduleSnapshot)
from schedfence.domain.spec import ScheduleSpec, times_between
from schedfence.infra.destination.schedule_proto import program_docs

LOOK_AHEAD = timedelta(minutes=2)  # spec times after the update checked by action workflow id


def _update_error(exc: RPCError) -> Exception:
    from schedfence.infra.destination.temporal import describe_error
    if exc.status == RPCStatusCode.FAILED_PRECONDITION:
        return ConflictTokenMoved(exc.message)
    return describe_error(exc)


class TemporalScheduleHost:
    namespace: str
    identity: str

    def _rpc(self, what: str, method: str, rpc: Any, to_error: Any) -> Any: ...  # the adapter's
    def _check_namespace(self, namespace: str) -> None: ...
    def describe(self, namespace: str, workflow_id: str, run_id: str | None = None) -> Any: ...

    def list_schedules(self, namespace: str, page_token: bytes | None = None,
                       page_size: int = 100) -> tuple[list[str], bytes | None]:
        from schedfence.infra.destination.temporal import describe_error
        self._check_namespace(namespace)
        resp = self._rpc("list schedules", "list_schedules", ListSchedulesRequest(
            namespace=namespace, maximum_page_size=page_size,
            next_page_token=page_token or b""), describe_error)
        return [s.schedule_id for s in resp.schedules], (resp.next_page_token or None)

    def _raw_describe(self, namespace: str, schedule_id: str) -> Any:
        from schedfence.infra.destination.temporal import describe_error
        self._check_namespace(namespace)
        return self._rpc("describe schedule", "describe_schedule", DescribeScheduleRequest(
            namespace=namespace, schedule_id=schedule_id), describe_error)

    def describe_schedule(self, namespace: str, schedule_id: str) -> ScheduleSnapshot:
        resp = self._raw_describe(namespace, schedule_id)
        try:
            program = program_docs(resp.schedule)
        except (ValueError, InvalidArgument) as exc:  # no form on the source says the same
            program = {"unsupported": getattr(exc, "message", None) or str(exc)}
        info, state = resp.info, resp.schedule.state
        recent = tuple({"nominal": nominal_text(r.schedule_time.ToDatetime(tzinfo=timezone.utc)),
                        "origin": "auto",
                        "workflow_id": r.start_workflow_result.workflow_id,
                        "run_id": r.start_workflow_result.run_id}
                       for r in info.recent_actions)
        return ScheduleSnapshot(
            namespace=namespace, schedule_id=schedule_id,
            conflict_token=resp.conflict_token.hex(), paused=state.paused, notes=state.notes,
            program=program, action_count=info.action_count, recent_actions=recent,
            running=tuple(w.workflow_id for w in info.running_workflows),
            buffered=info.buffer_size,
            responsible_until=self._responsible_until(namespace, program, info, state))

    def _responsible_until(self, namespace: str, program: dict, info: Any,
                           state: Any) -> str | None:
        now = datetime.now(timezone.utc).replace(microsecond=0)
        until = info.update_time.ToDatetime(tzinfo=timezone.utc).replace(microsecond=0) \
            if state.paused and info.HasField("update_time") else now
        for r in info.recent_actions:
            until = max(until, r.schedule_time.ToDatetime(tzinfo=timezone.utc))
        if program.get("spec") and program.get("action"):
            spec = ScheduleSpec.model_validate(program["spec"])
            action = StartWorkflowAction.model_validate(program["action"])
            for t in times_between(spec, until, until + LOOK_AHEAD):
                try:
                    self.describe(namespace, action_workflow_id(action, t))
                    until = t  # the server started it: it answers for it
                except DestinationNotFound:
                    pass
        return nominal_text(until)

    def update_schedule_state(self, namespace: str, schedule_id: str, conflict_token: str,
                              paused: bool, notes: str) -> None:
        resp = self._raw_describe(namespace, schedule_id)
        if resp.conflict_token.hex() != conflict_token:
            raise ConflictTokenMoved(f"schedule {schedule_id} changed since token "
                                     f"{conflict_token}")
        schedule = resp.schedule
        schedule.state.paused, schedule.state.notes = paused, notes
        self._rpc("update schedule", "update_schedule", UpdateScheduleRequest(
            namespace=namespace, schedule_id=schedule_id, schedule=schedule,
            conflict_token=bytes.fromhex(conflict_token), identity=self.identity,
            request_id=f"fence-{conflict_token}-{int(paused)}"), _update_error)

    def delete_schedule(self, namespace: str, schedule_id: str) -> None:
        from schedfence.infra.destination.temporal import describe_error
        self._check_namespace(namespace)
        self._rpc("delete schedule", "delete_schedule", DeleteScheduleRequest(
            namespace=namespace, schedule_id=schedule_id, identity=self.identity),
            describe_error)
