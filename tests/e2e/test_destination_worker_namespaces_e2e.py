"""``schedfence destination-worker`` serves every namespace of its URL, on a real dev server
(which registers ``default`` and ``payments``): a sentinel started in ``payments`` runs only once
a worker whose URL names ``payments`` (or ``/*``) polls its task queue."""
from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from schedfence.domain.ids import DUMMY_WORKFLOW_TYPE
from tests.contract.temporal_env import (NS, TemporalEnv, start_destination_worker,  # noqa: F401
                                         stop_process, temporal_env)
from tests.temporal_server import EXTRA_NAMESPACE


def sentinel_finishes(env: TemporalEnv, namespace: str, queue: str, within: float) -> bool:
    """Start a zero-second sentinel in ``namespace`` on ``queue``; did it complete in time?"""
    from temporalio.client import Client

    async def run() -> bool:
        client = Client(env.ops.client.service_client, namespace=namespace)
        handle = await client.start_workflow(
            DUMMY_WORKFLOW_TYPE, {"sleep_seconds": 0}, id=f"ns-probe-{uuid.uuid4().hex[:8]}",
            task_queue=queue, execution_timeout=timedelta(seconds=60))
        try:
            await asyncio.wait_for(handle.result(), within)
            return True
        except asyncio.TimeoutError:
            await handle.terminate(reason="probe over")
            return False
    return env.ops.run(run, within + 10)


@pytest.fixture
def queue() -> str:
    return f"ns-queue-{uuid.uuid4().hex[:8]}"


def test_a_worker_serves_each_namespace_of_its_url(temporal_env: TemporalEnv, queue: str) -> None:
    target = temporal_env.server.target
    only_default, started = start_destination_worker(f"temporal://{target}/{NS}",
                                                     "--task-queue", queue)
    try:
        assert started["namespaces"] == [NS] and started["tls"] is False
        assert sentinel_finishes(temporal_env, NS, queue, 10.0)
        # Nobody polls the queue in payments: the sentinel waits there.
        assert not sentinel_finishes(temporal_env, EXTRA_NAMESPACE, queue, 2.0)
    finally:
        assert stop_process(only_default) == 0
    both, started = start_destination_worker(f"temporal://{target}/{NS},{EXTRA_NAMESPACE}",
                                             "--task-queue", queue)
    try:
        assert started["namespaces"] == [NS, EXTRA_NAMESPACE]
        assert started["namespace"] == NS  # the first, as before several were served
        for namespace in (EXTRA_NAMESPACE, NS):
            assert sentinel_finishes(temporal_env, namespace, queue, 10.0), namespace
    finally:
        assert stop_process(both) == 0


def test_every_namespace_is_the_servers_registered_ones(temporal_env: TemporalEnv,
                                                        queue: str) -> None:
    proc, started = start_destination_worker(f"temporal://{temporal_env.server.target}/*",
                                             "--task-queue", queue)
    try:
        assert {NS, EXTRA_NAMESPACE} <= set(started["namespaces"])
        assert "temporal-system" not in started["namespaces"]  # the server's own
        assert sentinel_finishes(temporal_env, EXTRA_NAMESPACE, queue, 10.0)
    finally:
        assert stop_process(proc) == 0
