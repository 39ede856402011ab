"""Watching many action workflows of one namespace in one visibility query (``RunWatcher``).

``ListWorkflowExecutions`` with ``WorkflowId IN (...)`` (up to ``CHUNK`` ids a query, paged)
answers every listed workflow's runs; the latest started is the current one. Visibility lags
the workflows themselves, so the listing is trusted only to say "still running" (a run that
just closed may list as running: its close is seen a pass later). Every other id is described
on its own: one the listing does not name yet (just started), one it lists as closed (a
workflow that continued as new may list its closed run before its new one: ``describe`` names
the current run), and one a query string cannot quote plainly (a quote or a backslash in it);
``gone`` when there is no run at all, as ``describe`` says. So a pass costs one query per 100
running actions, plus one describe per action that closed.
"""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Sequence

from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.service import RPCError

from schedfence.domain.ports import DestinationNotFound, DestinationUnavailable
from schedfence.infra.adapters.destination.temporal_wire import status_name

if TYPE_CHECKING:
    from schedfence.infra.adapters.destination.temporal import TemporalDestination

CHUNK = 100  # ids per query
PAGE = 1000


def _listable(workflow_id: str) -> bool:
    return "'" not in workflow_id and "\\" not in workflow_id


def _listed(dest: TemporalDestination, namespace: str, ids: list[str]) -> dict[str, str]:
    """The current run's status of each of ``ids`` the visibility store lists."""
    query = "WorkflowId IN (" + ", ".join(f"'{w}'" for w in ids) + ")"
    latest: dict[str, tuple[datetime, str]] = {}
    token = b""
    while True:
        rpc = ListWorkflowExecutionsRequest(namespace=namespace, query=query, page_size=PAGE,
                                            next_page_token=token)
        resp = dest._rpc("watch", "list_workflow_executions", rpc, _unavailable)
        for info in resp.executions:
            started = info.start_time.ToDatetime()
            workflow_id = info.execution.workflow_id
            if workflow_id not in latest or started >= latest[workflow_id][0]:
                latest[workflow_id] = (started, status_name(info.status))
        token = resp.next_page_token
        if not token:
            return {w: status for w, (_, status) in latest.items()}


def _unavailable(exc: RPCError) -> Exception:
    return DestinationUnavailable(f"watch: list workflows: {exc.status.name}: {exc.message}")


def run_statuses(dest: TemporalDestination, namespace: str,
                 workflow_ids: Sequence[str]) -> dict[str, str]:
    """Each id's current run status (``gone``: no run), listed where visibility knows it."""
    wanted = sorted(set(workflow_ids))
    plain = [w for w in wanted if _listable(w)]
    statuses: dict[str, str] = {}
    for start in range(0, len(plain), CHUNK):
        listed = _listed(dest, namespace, plain[start:start + CHUNK])
        statuses.update((w, status) for w, status in listed.items() if status == "running")
    for workflow_id in wanted:
        if workflow_id not in statuses:  # not listed as running: ask the current run itself
            try:
                statuses[workflow_id] = dest.describe(namespace, workflow_id).status
            except DestinationNotFound:
                statuses[workflow_id] = "gone"
    return statuses
