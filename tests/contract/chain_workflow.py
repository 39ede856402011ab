"""A test-only workflow for the contract suite: it runs until told to complete, and
continues-as-new when told to, so the suite can drive Temporal's start semantics (dedupe,
reuse and conflict policies, attached request ids, chains) on a real server as the simulator
models them. Its type cannot collide with anything the service starts.

``python -m tests.contract.chain_workflow TARGET`` runs a worker for it on ``CHAIN_QUEUE`` and
prints one line once it polls.
"""
from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from temporalio import workflow

CHAIN_WORKFLOW_TYPE = "schedfence-test-chain"
CHAIN_QUEUE = "schedfence-test-chain"
COMPLETE_SIGNAL = "complete"
FORCE_CAN_SIGNAL = "force-continue-as-new"  # the name Temporal's own scheduler answers


@workflow.defn(name=CHAIN_WORKFLOW_TYPE)
class ChainWorkflow:
    @workflow.init
    def __init__(self, args: Any = None) -> None:
        self._done = False
        self._again = False

    @workflow.run
    async def run(self, args: Any = None) -> None:
        await workflow.wait_condition(lambda: self._done or self._again)
        if not self._done:
            workflow.continue_as_new(args)

    @workflow.signal(name=COMPLETE_SIGNAL)
    def complete(self) -> None:
        self._done = True

    @workflow.signal(name=FORCE_CAN_SIGNAL)
    def force_continue_as_new(self) -> None:
        self._again = True


async def _serve(target: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker
    client = await Client.connect(target)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with Worker(client, task_queue=CHAIN_QUEUE, workflows=[ChainWorkflow]):
        print("polling", flush=True)
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1]))
    sys.stdout.flush()
    os._exit(0)  # a process holding a temporalio client can crash at exit (sdk-python#300)
