"""Temporal's Schedules API for the forward migration (domain.ports.ScheduleHost), mixed into
``TemporalDestination``: ListSchedules, DescribeSchedule, an UpdateSchedule that changes only
the pause and notes under the conflict token, DeleteSchedule.

A describe of a paused schedule carries the boundary's observation (domain/forward/boundary.py):
when the server's scheduler began and applied the pause, and which spec times after the last
start it lists were started, checked newest first by their action workflows' deterministic
ids. Every describe names the schedule's identity: the first run id of the server's scheduler
workflow ``temporal-sys-scheduler:<id>`` (a schedule created again at the id has another).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from temporalio.api.workflowservice.v1 import (DeleteScheduleRequest, DescribeScheduleRequest,
                                               ListSchedulesRequest, UpdateScheduleRequest)
from temporalio.service import RPCError, RPCStatusCode

from schedfence.domain.source.action import StartWorkflowAction, action_workflow_id, nominal_text
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.forward.boundary import (boundary_cursor, instant_text, observation,
                                                probe_plan)
from schedfence.domain.ids import WORKFLOW_ID_PREFIX
from schedfence.domain.ports import (ConflictTokenMoved, DestinationNotFound,
                                     ScheduleSnapshot)
from schedfence.domain.source.spec import ScheduleSpec
from schedfence.infra.adapters.destination.schedule_proto import program_docs



def _utc(ts: Any) -> datetime:
    return ts.ToDatetime(tzinfo=timezone.utc)


def _update_error(exc: RPCError) -> Exception:
    from schedfence.infra.adapters.destination.temporal_wire import describe_error
    if exc.status == RPCStatusCode.FAILED_PRECONDITION:
        return ConflictTokenMoved(exc.message)
    return describe_error(exc)


class TemporalScheduleHost:
    namespace: str
    identity: str

    def _rpc(self, what: str, method: str, rpc: Any, to_error: Any) -> Any: ...  # the adapter's
    def _check_namespace(self, namespace: str) -> None: ...
    def describe(self, namespace: str, workflow_id: str, run_id: str | None = None) -> Any: ...
    def _call(self, what: str, fn: Any) -> Any: ...

    def search_attribute_types(self, namespace: str) -> dict[str, str]:
        """Every search attribute the namespace has (system and registered), by type name."""
        from temporalio.api.enums.v1 import IndexedValueType
        from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

        from schedfence.infra.adapters.destination.temporal_wire import describe_error
        self._check_namespace(namespace)

        async def listing(client: Any) -> Any:
            try:
                return await client.operator_service.list_search_attributes(
                    ListSearchAttributesRequest(namespace=namespace))
            except RPCError as exc:
                raise describe_error(exc) from exc
        resp = self._call("list search attributes", listing)
        name = {v: k.removeprefix("INDEXED_VALUE_TYPE_").title().replace("_", "")
                for k, v in IndexedValueType.items()}
        return {k: name[v] for attrs in (resp.system_attributes, resp.custom_attributes)
                for k, v in attrs.items()}

    def list_schedules(self, namespace: str, page_token: bytes | None = None,
                       page_size: int = 100) -> tuple[list[str], bytes | None]:
        from schedfence.infra.adapters.destination.temporal_wire import describe_error
        self._check_namespace(namespace)
        resp = self._rpc("list schedules", "list_schedules", ListSchedulesRequest(
            namespace=namespace, maximum_page_size=page_size,
            next_page_token=page_token or b""), describe_error)
        return [s.schedule_id for s in resp.schedules], (resp.next_page_token or None)

    def _raw_describe(self, namespace: str, schedule_id: str) -> Any:
        from schedfence.infra.adapters.destination.temporal_wire import describe_error
        self._check_namespace(namespace)
        return self._rpc("describe schedule", "describe_schedule", DescribeScheduleRequest(
            namespace=namespace, schedule_id=schedule_id), describe_error)

    def describe_schedule(self, namespace: str, schedule_id: str) -> ScheduleSnapshot:
        resp = self._raw_describe(namespace, schedule_id)
        try:
            program = program_docs(resp.schedule, resp.memo)
        except (ValueError, InvalidArgument) as exc:  # no form on the source says the same
            program = {"unsupported": getattr(exc, "message", None) or str(exc)}
        info, state = resp.info, resp.schedule.state
        recent = tuple({"nominal": nominal_text(_utc(r.schedule_time)), "origin": "auto",
                        "workflow_id": r.start_workflow_result.workflow_id,
                        "run_id": r.start_workflow_result.run_id}
                       for r in info.recent_actions)
        running = tuple(w.workflow_id for w in info.running_workflows)
        boundary = self._boundary(namespace, program, info, recent, running) \
            if state.paused else None
        return ScheduleSnapshot(
            namespace=namespace, schedule_id=schedule_id,
            conflict_token=resp.conflict_token.hex(), paused=state.paused, notes=state.notes,
            program=program, action_count=info.action_count, recent_actions=recent,
            running=running, buffered=info.buffer_size,
            responsible_until=boundary_cursor(boundary, False) if boundary else None,
            identity=self._identity(namespace, schedule_id, info), boundary=boundary)

    def _identity(self, namespace: str, schedule_id: str, info: Any) -> str:
        """The first run id of the server's scheduler workflow (kept across its
        continue-as-new); the schedule's create time where the server runs none."""
        try:
            return self.describe(namespace, WORKFLOW_ID_PREFIX + schedule_id) \
                .first_execution_run_id
        except DestinationNotFound:
            return f"created {instant_text(_utc(info.create_time))}"

    def _boundary(self, namespace: str, program: dict, info: Any, recent: tuple,
                  running: tuple) -> dict[str, Any] | None:
        """What the server started, read once it shows paused (forward_boundary.py)."""
        if not program.get("spec"):
            return None
        spec = ScheduleSpec.model_validate(program["spec"])
        action = StartWorkflowAction.model_validate(program["action"]) \
            if program.get("action") else None
        created = _utc(info.create_time)
        applied = _utc(info.update_time) if info.HasField("update_time") else created
        floor, candidates = probe_plan(spec, action.workflow_id if action else "", created,
                                       applied, [r["nominal"] for r in recent], list(running))
        probed: list[tuple[datetime, bool]] = []
        for t in candidates:
            if action is None:
                break  # no action: nothing was ever started
            probed.append((t, self._exists(namespace, action_workflow_id(action, t))))
            if probed[-1][1]:
                break  # the newest started: every earlier time was the server's to decide
        return observation(created, applied, floor, probed)

    def _exists(self, namespace: str, workflow_id: str) -> bool:
        try:
            self.describe(namespace, workflow_id)
            return True
        except DestinationNotFound:
            return False

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
        from schedfence.infra.adapters.destination.temporal_wire import describe_error
        self._check_namespace(namespace)
        self._rpc("delete schedule", "delete_schedule", DeleteScheduleRequest(
            namespace=namespace, schedule_id=schedule_id, identity=self.identity),
            describe_error)
