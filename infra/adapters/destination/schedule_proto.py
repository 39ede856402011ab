"""A handover (domain/rollback/handover.py) as Temporal's own Schedule, and back: pure functions over
the protobuf types the server's CreateSchedule takes.

- the spec, action, policies and state are the Schedule's own fields (what the server runs;
  the action whole, every field both ways: infra/adapters/destination/action_proto.py);
- the plan (domain.handover.patch_plan) is the create's initial patch: backfill requests and
  at most one trigger;
- what a Temporal Schedule has no field for (the source's incarnation, counts, cursor, recent
  and running actions, which patch entry came from which buffered start or backfill) rides in
  the schedule's memo under ``MEMO_KEY``, so ``from_temporal`` gives back the same handover.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.common.v1 import Memo, Payload
from temporalio.api.enums.v1 import ScheduleOverlapPolicy
from temporalio.api.schedule.v1 import (BackfillRequest, IntervalSpec, Schedule, ScheduleAction,
                                        SchedulePatch, SchedulePolicies, ScheduleSpec,
                                        ScheduleState, TriggerImmediatelyRequest)
from temporalio.converter import default as default_converter

from schedfence.domain.source import action as da
from schedfence.domain.source import spec as ds
from schedfence.domain.source.action import nominal_text, parse_nominal
from schedfence.domain.rollback.handover import SECOND, Handover, PatchPlan, pinned_start
from schedfence.domain.source.invoker import OVERLAPS, Overlap
from schedfence.infra.adapters.destination.action_proto import action_back, new_workflow_info
from schedfence.infra.adapters.destination.calendar_cron import calendar_crons

MEMO_KEY = "schedfence.handover"
OVERLAP: dict[str, ScheduleOverlapPolicy.ValueType] = {
    name: getattr(ScheduleOverlapPolicy, f"SCHEDULE_OVERLAP_POLICY_{name.upper()}")
    for name in OVERLAPS}
_OVERLAP_NAME: dict[ScheduleOverlapPolicy.ValueType, Overlap] = {
    OVERLAP[name]: name for name in OVERLAPS}


def _payload(value: Any) -> Payload:
    return default_converter().payload_converter.to_payloads([value])[0]


def _value(payload: Payload) -> Any:
    return default_converter().payload_converter.from_payloads([payload])[0]


def timestamp(t: datetime) -> Timestamp:
    out = Timestamp()
    out.FromDatetime(t.astimezone(timezone.utc))
    return out


def _time(ts: Timestamp) -> datetime:
    return ts.ToDatetime(tzinfo=timezone.utc)


def _spec(spec: ds.ScheduleSpec) -> ScheduleSpec:
    out = ScheduleSpec(
        interval=[IntervalSpec(interval=Duration(seconds=i.every),
                               phase=Duration(seconds=i.offset)) for i in spec.intervals],
        cron_string=list(spec.cron_expressions), jitter=Duration(seconds=spec.jitter),
        timezone_name=spec.time_zone)
    if spec.start_at is not None:
        out.start_time.CopyFrom(timestamp(spec.start_at))
    if spec.end_at is not None:
        out.end_time.CopyFrom(timestamp(spec.end_at))
    return out


def _action(action: da.StartWorkflowAction) -> ScheduleAction:
    return ScheduleAction(start_workflow=new_workflow_info(action))


def to_temporal(h: Handover, plan: PatchPlan,
                pin: datetime | None = None) -> tuple[Schedule, SchedulePatch, Memo]:
    """The Schedule to create, its initial patch, and the schedule memo (see module doc).
    With a ``pin`` (a limited handover, domain.handover.pin_instant) the spec starts at the
    pin (or the user's own later start), the memo keeps the pin and the user's start, and the
    patch is the settle's, sent once the pin is cleared (the create's is empty)."""
    assert h.spec is not None and h.action is not None
    policies = h.policies or da.SchedulePolicies()
    spec = _spec(h.spec)
    if pin is not None:
        spec.start_time.CopyFrom(timestamp(pinned_start(h, pin)))
    schedule = Schedule(
        spec=spec, action=_action(h.action),
        policies=SchedulePolicies(overlap_policy=OVERLAP[policies.overlap],
                                  catchup_window=Duration(seconds=policies.catchup_window),
                                  pause_on_failure=policies.pause_on_failure),
        state=ScheduleState(notes=h.notes, paused=h.paused,
                            limited_actions=h.remaining_actions is not None,
                            remaining_actions=plan.remaining or 0))
    patch = SchedulePatch(backfill_request=[
        BackfillRequest(start_time=timestamp(r.start), end_time=timestamp(r.end),
                        overlap_policy=OVERLAP[r.overlap]) for r in plan.backfills])
    if plan.trigger is not None:
        patch.trigger_immediately.CopyFrom(TriggerImmediatelyRequest(
            overlap_policy=OVERLAP[plan.trigger[1]], scheduled_time=timestamp(plan.trigger[0])))
    provenance = {
        "namespace": h.namespace, "schedule_id": h.schedule_id, "incarnation": h.incarnation,
        "has_policies": h.policies is not None, "action_count": h.action_count,
        "cursor": h.cursor, "recent_actions": list(h.recent_actions),
        "running": list(h.running), "buffered_origins": [b["origin"] for b in h.buffered],
        "backfills": [{"backfill_id": b["backfill_id"], "start": b["start"]}
                      for b in h.backfills],
        "gap_end": None if plan.until is None else nominal_text(plan.until),
        "remaining_actions": h.remaining_actions}
    if pin is not None:
        provenance.update(pin=nominal_text(pin), start_at=None if h.spec.start_at is None
                          else nominal_text(h.spec.start_at))
    return schedule, patch, Memo(fields={MEMO_KEY: _payload(provenance)})


def bare_schedule(namespace: str, schedule_id: str, incarnation: int, paused: bool,
                  notes: str) -> tuple[Schedule, Memo]:
    """A pause-and-notes schedule (no spec, no action) as a Temporal Schedule: the server's
    scheduler holds its pause and notes and never acts, as the source never did."""
    provenance = {"namespace": namespace, "schedule_id": schedule_id,
                  "incarnation": incarnation, "gap_end": None}
    return (Schedule(spec=ScheduleSpec(), state=ScheduleState(notes=notes, paused=paused)),
            Memo(fields={MEMO_KEY: _payload(provenance)}))


def _memo_time(memo: Memo, key: str) -> datetime | None:
    text = _value(memo.fields[MEMO_KEY]).get(key) if MEMO_KEY in memo.fields else None
    return None if text is None else parse_nominal(text)


def gap_end(memo: Memo) -> datetime | None:
    """The end of the handover's gap backfill, as the schedule's memo recorded it."""
    return _memo_time(memo, "gap_end")


def pin_of(memo: Memo) -> datetime | None:
    """The pin a limited handover's create set (None: not pinned, or an older create)."""
    return _memo_time(memo, "pin")


def pin_stands(spec: ScheduleSpec, memo: Memo) -> bool:
    """The spec's start time is still the pin, ahead of the user's own start."""
    pin = pin_of(memo)
    user = _memo_time(memo, "start_at")
    return pin is not None and spec.HasField("start_time") and \
        _time(spec.start_time) == pin and (user is None or user < pin)


def unpinned(spec: ScheduleSpec, memo: Memo) -> ScheduleSpec:
    """The spec as the user has it: a standing pin gives way to the user's own start (a
    read-back between the create and the settle must not show the pin as the program)."""
    out = ScheduleSpec()
    out.CopyFrom(spec)
    if pin_stands(spec, memo):
        user = _memo_time(memo, "start_at")
        out.ClearField("start_time")
        if user is not None:
            out.start_time.CopyFrom(timestamp(user))
    return out


def from_temporal(schedule: Schedule, patch: SchedulePatch, memo: Memo) -> Handover:
    """The handover ``to_temporal`` was given (the inverse, field for field)."""
    meta = _value(memo.fields[MEMO_KEY])
    ranges = list(patch.backfill_request)
    backfills = []
    for doc, r in zip(meta["backfills"], ranges):
        backfills.append({"backfill_id": doc["backfill_id"], "start": doc["start"],
                          "end": nominal_text(_time(r.end_time)),
                          "overlap": _OVERLAP_NAME[r.overlap_policy],
                          "cursor": nominal_text(_time(r.start_time) - SECOND)})
    rest = iter(ranges[len(backfills):])
    buffered = []
    for origin in meta["buffered_origins"]:
        if origin == "trigger":
            t, overlap = patch.trigger_immediately.scheduled_time, \
                patch.trigger_immediately.overlap_policy
        else:
            r = next(rest)
            t, overlap = r.start_time, r.overlap_policy
        buffered.append({"nominal": nominal_text(_time(t)), "origin": origin,
                         "overlap": _OVERLAP_NAME[overlap]})
    state, p = schedule.state, schedule.policies
    return Handover(
        namespace=meta["namespace"], schedule_id=meta["schedule_id"],
        incarnation=meta["incarnation"], paused=state.paused, notes=state.notes,
        spec=_spec_back(unpinned(schedule.spec, memo)), action=_action_back(schedule.action),
        policies=da.SchedulePolicies(
            overlap=_OVERLAP_NAME[p.overlap_policy], catchup_window=p.catchup_window.seconds,
            pause_on_failure=p.pause_on_failure) if meta["has_policies"] else None,
        remaining_actions=meta["remaining_actions"] if "remaining_actions" in meta else
        state.remaining_actions if state.limited_actions else None,
        action_count=meta["action_count"], cursor=meta["cursor"], buffered=tuple(buffered),
        backfills=tuple(backfills), recent_actions=tuple(meta["recent_actions"]),
        running=tuple(meta["running"]))


def program_docs(schedule: Schedule, memo: Memo | None = None) -> dict[str, Any]:
    """What a Temporal Schedule runs, as the source's JSON documents (None where absent); a
    standing pin (``memo``) is stripped."""
    has = schedule.action.HasField("start_workflow")
    spec = schedule.spec if memo is None else unpinned(schedule.spec, memo)
    empty = not (spec.interval or spec.cron_string or spec.structured_calendar or
                 spec.calendar)
    p, state = schedule.policies, schedule.state
    return {
        "spec": None if empty or not has else _spec_back(spec).model_dump(mode="json"),
        "action": _action_back(schedule.action).model_dump(mode="json") if has else None,
        "policies": da.SchedulePolicies(
            overlap=_OVERLAP_NAME.get(p.overlap_policy, "skip"),
            catchup_window=p.catchup_window.seconds or da.SchedulePolicies().catchup_window,
            pause_on_failure=p.pause_on_failure).model_dump(mode="json") if has else None,
        "remaining_actions": state.remaining_actions if state.limited_actions else None}


def _spec_back(spec: ScheduleSpec) -> ds.ScheduleSpec:
    """The source's spec, checked as a new schedule's is (``ValueError`` or a refusal,
    ``invalid_argument``: the source cannot run it the same)."""
    crons = tuple(spec.cron_string) + calendar_crons(spec)
    back = ds.make_spec(
        intervals=[(i.interval.seconds, i.phase.seconds) for i in spec.interval], cron=crons,
        start_at=_time(spec.start_time) if spec.HasField("start_time") else None,
        end_at=_time(spec.end_time) if spec.HasField("end_time") else None,
        jitter=spec.jitter.seconds, time_zone=spec.timezone_name or "UTC")
    ds.check_same_on_temporal(back)  # a clock change's hour runs differently here
    return back


def _action_back(action: ScheduleAction) -> da.StartWorkflowAction:
    """The source's action, every field whole (``invalid_argument`` naming one it cannot
    carry: infra/adapters/destination/action_proto.py)."""
    return action_back(action.start_workflow)
