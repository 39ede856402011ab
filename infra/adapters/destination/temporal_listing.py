"""The action starts a Temporal namespace holds (``ActionListing``): ``ListWorkflowExecutions``
over the namespace, page by page, every run closed or running that visibility still keeps
(runs past the namespace's retention are gone from it). A chain continued as new lists one
execution per run; it counts once, by its first run id. Ids are filtered here, not in the
query (a visibility store's prefix operators differ by version), so a namespace's listing
costs one call per ``PAGE`` workflows.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from temporalio.api.workflowservice.v1 import ListWorkflowExecutionsRequest
from temporalio.service import RPCError

from schedfence.domain.ports import DestinationUnavailable

if TYPE_CHECKING:
    from schedfence.infra.adapters.destination.temporal import TemporalDestination

PAGE = 1000


def _unavailable(exc: RPCError) -> Exception:
    return DestinationUnavailable(f"list action workflows: {exc.status.name}: {exc.message}")


def wanted(workflow_id: str, prefixes: Sequence[str] | None) -> bool:
    return prefixes is None or any(workflow_id.startswith(p + "-") for p in prefixes)


def action_starts(dest: TemporalDestination, namespace: str,
                  prefixes: Sequence[str] | None = None) -> list[str]:
    """Each listed chain's workflow id once (see the module doc)."""
    chains: dict[str, str] = {}  # first run id -> workflow id
    token = b""
    while True:
        rpc = ListWorkflowExecutionsRequest(namespace=namespace, page_size=PAGE,
                                            next_page_token=token)
        resp = dest._rpc("list action workflows", "list_workflow_executions", rpc,
                         _unavailable)
        for info in resp.executions:
            wid = info.execution.workflow_id
            if wanted(wid, prefixes):
                chains[info.first_run_id or info.execution.run_id] = wid
        token = resp.next_page_token
        if not token:
            return sorted(chains.values())
