"""The one workflow this project runs on a Temporal server: the sentinel.

A rollback's start on Temporal creates a real Temporal Schedule, which the server's own
scheduler workflow runs at ``temporal-sys-scheduler:<id>`` (infra/adapters/destination/temporal_schedule.py).
What recovery starts at that id to hold it (a sentinel, docs/protocol.md) is an ordinary
workflow: ``SentinelWorkflow`` (``temporal-sys-dummy-workflow``) sleeps, 15 minutes by default,
and completes. ``schedfence destination-worker`` runs it.
"""
from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from schedfence.domain.ids import DUMMY_WORKFLOW_TYPE

SENTINEL_IDLE_SECONDS = 15 * 60.0


@workflow.defn(name=DUMMY_WORKFLOW_TYPE)
class SentinelWorkflow:
    @workflow.run
    async def run(self, args: dict[str, Any] | None = None) -> None:
        await workflow.sleep(float((args or {}).get("sleep_seconds", SENTINEL_IDLE_SECONDS)))


WORKFLOWS = (SentinelWorkflow,)
