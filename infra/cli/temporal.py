"""``--destination temporal://HOST:PORT/NAMESPACE`` and ``schedfence destination-worker``.

Temporal's SDK client can crash the interpreter at exit (PyGILState_Release, sdk-python#300), so
a CLI process that used one flushes its output and leaves with ``os._exit`` (``leaving_cleanly``)
after the client was closed.
"""
from __future__ import annotations

import asyncio
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

from schedfence.infra.destination.choose import parse_destination, temporal_used

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
async def _connect(target: str, namespace: str, wait: float) -> Any:
    """Connect, retrying for up to ``wait`` s: a worker may start before its server."""
    from temporalio.client import Client

    deadline = time.monotonic() + wait
    while True:
        try:
            return await Client.connect(target, namespace=namespace)
        except RuntimeError as exc:
            if time.monotonic() >= deadline:
                raise Unavailable(f"cannot connect to Temporal at {target}: {exc}") from None
        await asyncio.sleep(0.5)


async def _serve(target: str, namespace: str, task_queue: str, announce: Any,
                 wait: float) -> None:
    from temporalio.worker import Worker

    from schedfence.infra.destination.workflow import WORKFLOWS

    client = await _connect(target, namespace, wait)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with Worker(client, task_queue=task_queue, workflows=list(WORKFLOWS)):
        announce([getattr(wf, "__temporal_workflow_definition").name for wf in WORKFLOWS])
        await stop.wait()  # leaving the block shuts the worker down gracefully


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
    SIGINT/SIGTERM; the server runs the Temporal Schedules a rollback creates itself.

    Needs --destination temporal://HOST:PORT/NAMESPACE (or SCHEDFENCE_DESTINATION)."""
    global _used_temporal
    url = getattr(ctx.find_root().obj, "destination", None)
    if not url:
        raise InvalidArgument("destination-worker needs --destination temporal://HOST:PORT/NS")
    target, namespace = parse_destination(url)
    from schedfence.infra.destination.temporal import DEFAULT_TASK_QUEUE
    queue = task_queue or DEFAULT_TASK_QUEUE
    validate_id("task queue", queue)
    doc = {"target": target, "namespace": namespace, "task_queue": queue}

    def announce(types: list[str]) -> None:
        line = dict(doc, event="started", workflow_types=types)
        click.echo(json.dumps(line) if as_json else
                   f"destination worker: {', '.join(types)} on {target}/{namespace}, "
                   f"task queue {queue} (SIGINT/SIGTERM stops)")
        sys.stdout.flush()  # a supervisor (or a test) waits for this line

    _used_temporal = True
    asyncio.run(_serve(target, namespace, queue, announce, connect_wait))
    click.echo(json.dumps(dict(doc, event="stopped")) if as_json else
               "destination worker stopped")
