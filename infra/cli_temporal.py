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
from urllib.parse import urlsplit

import click

from schedfence.domain.errors import InvalidArgument, Unavailable
from schedfence.domain.ids import validate_id

SCHEME = "temporal"
_used_temporal = False  # set once this process has created a temporal client


def parse_destination(url: str) -> tuple[str, str]:
    """``temporal://HOST:PORT[/NAMESPACE]`` → (``HOST:PORT``, namespace, default ``default``)."""
    if url.startswith("sim+"):  # never echoed: it may hold a database password
        raise InvalidArgument("a sim+ destination is the simulator, not a Temporal server")
    parts = urlsplit(url)
    if parts.scheme != SCHEME or not parts.hostname:
        raise InvalidArgument(f"destination must be {SCHEME}://HOST:PORT/NAMESPACE or "
                              f"sim+STORE_URL, got {url!r}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise InvalidArgument(f"destination {url!r} needs a port (Temporal's default is 7233)")
    if parts.query or parts.fragment:
        raise InvalidArgument(f"destination {url!r}: no query or fragment is accepted")
    namespace = parts.path.strip("/") or "default"
    validate_id("destination namespace", namespace)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}", namespace


def open_destination(url: str, **options: Any):
    """The Temporal adapter for ``url`` (it connects on first use), or for ``sim+STORE_URL``
    the simulator kept in a store of its own, shared by every process (infra/shared_sim.py)."""
    global _used_temporal
    from .shared_sim import is_shared_sim, open_shared_sim
    if is_shared_sim(url):
        return open_shared_sim(url)
    target, namespace = parse_destination(url)
    from .temporal_destination import TemporalDestination  # keep temporalio off other commands
    _used_temporal = True
    return TemporalDestination(target, namespace, **options)


@contextmanager
def leaving_cleanly() -> Iterator[None]:
    """Around a CLI entry point: after a temporal client was used, exit via ``os._exit``."""
    try:
        yield
    except SystemExit as exc:
        if not _used_temporal:
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

    from .destination_workflow import WORKFLOWS

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
    """Run the destination workflows on a Temporal server until SIGINT/SIGTERM.

    Needs --destination temporal://HOST:PORT/NAMESPACE (or SCHEDFENCE_DESTINATION)."""
    global _used_temporal
    url = getattr(ctx.find_root().obj, "destination", None)
    if not url:
        raise InvalidArgument("destination-worker needs --destination temporal://HOST:PORT/NS")
    target, namespace = parse_destination(url)
    from .temporal_destination import DEFAULT_TASK_QUEUE
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
