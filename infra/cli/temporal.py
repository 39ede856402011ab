"""``--destination temporal://HOST:PORT/NAMESPACE[,...]`` and ``schedfence destination-worker``.

Temporal's SDK client can crash the interpreter at exit (PyGILState_Release, sdk-python#300), so
a CLI process that used one flushes its output and leaves with ``os._exit`` (``leaving_cleanly``)
after the client was closed.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator

import click

from schedfence.domain.errors import InvalidArgument, Unavailable
from schedfence.domain.ids import validate_id

from schedfence.domain.ports import DestinationNotReached

from schedfence.infra.adapters.destination.choose import (TemporalSpec, api_key_for, parse_temporal,
                                                 temporal_credentials, temporal_used)

_used_temporal = False  # set once the destination worker created a temporal client


@contextmanager
def leaving_cleanly() -> Iterator[None]:
    """Around a CLI entry point: after a temporal client was used, exit via ``os._exit``."""
    try:
        yield
    except SystemExit as exc:
        if not (_used_temporal or temporal_used()):
            raise
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


# -- the destination worker --------------------------------------------------------------------
async def _connect(spec: TemporalSpec, wait: float) -> Any:
    """Connect, retrying for up to ``wait`` s: a worker may start before its server."""
    import asyncio
    from schedfence.infra.adapters.destination.temporal_connect import connect_client

    tls, api_key = temporal_credentials(spec)
    deadline = time.monotonic() + wait
    while True:
        try:
            return await connect_client(spec.target, spec.namespace, tls=tls, api_key=api_key)
        except DestinationNotReached as exc:
            if time.monotonic() >= deadline:
                raise Unavailable(str(exc)) from None
        await asyncio.sleep(0.5)


async def _namespaces(client: Any, spec: TemporalSpec) -> list[str]:
    """The namespaces to serve: the URL's, or for ``/*`` those the server lists now."""
    if spec.namespaces != ("*",):
        return list(spec.namespaces)
    from schedfence.infra.adapters.destination.temporal_connect import registered_namespaces
    names = await registered_namespaces(client)
    if not names:
        raise Unavailable(f"the server at {spec.target} lists no namespace to serve")
    return names


async def _serve(spec: TemporalSpec, task_queue: str, announce: Any, wait: float) -> None:
    """One worker per served namespace, all on one connection, until SIGINT/SIGTERM."""
    import asyncio
    from contextlib import AsyncExitStack

    from temporalio.client import Client
    from temporalio.worker import Worker

    from schedfence.infra.adapters.destination.workflow import WORKFLOWS

    client = await _connect(spec, wait)
    namespaces = await _namespaces(client, spec)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with AsyncExitStack() as workers:
        for namespace in namespaces:
            ns_client = Client(client.service_client, namespace=namespace)
            await workers.enter_async_context(
                Worker(ns_client, task_queue=task_queue, workflows=list(WORKFLOWS)))
        announce(namespaces,
                 [getattr(wf, "__temporal_workflow_definition").name for wf in WORKFLOWS])
        await stop.wait()  # leaving the block shuts the workers down gracefully


@click.command("destination-worker")
@click.option("--task-queue", default=None,
              help="Task queue to poll (default: the adapter's, schedfence-destination).")
@click.option("--connect-wait", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds to keep retrying the first connection.")
@click.option("--json", "as_json", is_flag=True, help="Print the start and stop lines as JSON.")
@click.pass_context
def destination_worker(ctx: click.Context, task_queue: str | None, connect_wait: float,
                       as_json: bool) -> None:
    """Run the sentinel workflow (recovery holds an id with it) on a Temporal server until
    SIGINT/SIGTERM, in every namespace of the destination URL (``/*``: every namespace the
    server lists when the worker starts); the server runs the Temporal Schedules a rollback
    creates itself.

    Needs --destination temporal://HOST:PORT/NS[,NS...] (or SCHEDFENCE_DESTINATION), with
    ?tls=1&ca=F&cert=F&key=F for TLS and SCHEDFENCE_TEMPORAL_API_KEY for an API key."""
    global _used_temporal
    import asyncio
    url = getattr(ctx.find_root().obj, "destination", None)
    if not url:
        raise InvalidArgument("destination-worker needs --destination temporal://HOST:PORT/NS")
    spec = parse_temporal(url)
    api_key_for(spec)  # a key over plain text is refused before anything starts
    from schedfence.infra.adapters.destination.temporal import DEFAULT_TASK_QUEUE
    queue = task_queue or DEFAULT_TASK_QUEUE
    validate_id("task queue", queue)
    doc: dict[str, Any] = {"target": spec.target, "tls": bool(spec.tls), "task_queue": queue}

    def announce(namespaces: list[str], types: list[str]) -> None:
        # "namespace": the first served, as before several were.
        doc.update(namespace=namespaces[0], namespaces=namespaces)
        line = dict(doc, event="started", workflow_types=types)
        click.echo(json.dumps(line) if as_json else
                   f"destination worker: {', '.join(types)} on {spec.target} "
                   f"{'(TLS) ' if spec.tls else ''}in namespace(s) {', '.join(namespaces)}, "
                   f"task queue {queue} (SIGINT/SIGTERM stops)")
        sys.stdout.flush()  # a supervisor (or a test) waits for this line

    _used_temporal = True
    asyncio.run(_serve(spec, queue, announce, connect_wait))
    click.echo(json.dumps(dict(doc, event="stopped")) if as_json else
               "destination worker stopped")
