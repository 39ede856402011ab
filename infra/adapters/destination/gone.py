"""The settle of a schedule deleted since the receipt, for any destination that starts plain
workflows (the Temporal adapter, temporal_gone.py; the simulator, sim_schedules.py): each time
``domain.handover_gone.owed_before_delete`` names is started at its action workflow id with
the handover's whole action, under ``gone_request_id``, reuse policy ``reject_duplicate`` and
conflict policy ``fail``, so a run already at the id (started by the server before the delete,
by someone else, or by an earlier try of this settle) is left alone. Nothing is assumed of
what the server did at or after the delete: ``read_after_delete`` reads its listing of the
action's workflows, and every time at or after the delete with a run there is recorded as
made (``Settled.after_delete``), so the log holds what the server really did.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable, Sequence

from schedfence.domain.source.action import action_workflow_id, nominal_text, parse_nominal
from schedfence.domain.rollback.handover import Handover
from schedfence.domain.rollback.handover_gone import GoneOwed, gone_request_id
from schedfence.domain.ports import AlreadyStarted, Settled, StartAccepted, StartWorkflow

Start = Callable[[StartWorkflow], StartAccepted]


def instant_text(t: datetime) -> str:
    """An instant as RFC 3339 UTC with its fraction (a delete is not on a whole second)."""
    return t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def start_owed(start: Start, request: StartWorkflow, h: Handover, owed: GoneOwed,
               deleted: datetime) -> Settled:
    """Start each owed time once; the times whose run this migration's request id created
    (now, or on an earlier try) are the settle's record: the spec's in ``started``, the
    carried ones named in ``detail``. Any other error is raised (the settle is asked again)."""
    assert h.action is not None
    ours: set[datetime] = set()
    for t in owed.times:
        rid = gone_request_id(request.request_id, nominal_text(t))
        try:
            mine = start(StartWorkflow(
                namespace=request.namespace, workflow_id=action_workflow_id(h.action, t),
                request_id=rid, workflow_type=h.action.workflow_type,
                id_reuse_policy="reject_duplicate", id_conflict_policy="fail",
                task_queue=h.action.task_queue, action=h.action)).started is True
        except AlreadyStarted as exc:  # a run at the id: ours from an earlier try, or not
            mine = exc.start_request_id == rid
        if mine:
            ours.add(t)
    spec = [nominal_text(t) for t in owed.spec if t in ours]
    carried = [nominal_text(t) for t in owed.carried if t in ours]
    detail = (f"the schedule was deleted at {instant_text(deleted)}, before the settle: "
              f"{len(spec)} of its {len(owed.spec)} owed boundary time(s) before the delete "
              f"started here as plain workflows (the rest had a run at their id)")
    if owed.carried:
        detail += f"; carried patch {len(carried)} of {len(owed.carried)}: {', '.join(carried)}"
    return Settled(spec, deleted_at=instant_text(deleted), detail=detail)


def read_after_delete(done: Settled, listing: Sequence[str], h: Handover,
                      deleted: datetime) -> Settled:
    """``done`` with the times of the listed ``<action workflow id>-<time>`` runs at or after
    ``deleted`` (the server's starts after the delete) recorded and named in its detail."""
    assert h.action is not None
    prefix = h.action.workflow_id + "-"
    after: set[datetime] = set()
    for wid in listing:
        if wid.startswith(prefix):
            try:
                t = parse_nominal(wid[len(prefix):])
            except ValueError:
                continue  # another schedule's id that shares the prefix
            if t >= deleted:
                after.add(t)
    if not after:
        return replace(done, detail=done.detail + "; the server's listing shows no start at "
                       "or after the delete")
    times = [nominal_text(t) for t in sorted(after)]
    return replace(done, after_delete=times, detail=done.detail + f"; the server itself "
                   f"started {len(times)} time(s) at or after the delete: {', '.join(times)}")
