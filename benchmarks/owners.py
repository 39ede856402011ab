"""``schedfence owners`` over N keys and N Temporal schedules on a real dev server: calls made
and seconds, without and with ``--deep``.

    .venv/bin/python benchmarks/owners.py [--count 10000] [--concurrency 16] [--quick]

Set-up (not timed): a dev server of its own (tests/temporal_server.py) and a SQLite store
(its projection caught up); N source keys (pause-and-notes schedules) and N Temporal
Schedules at other ids (a daily interval, a workflow action) made with raw CreateSchedule
calls, 50 in flight, so the audit lists N schedules the store never knew (``native``). (A
handover per schedule would be the realistic set-up, but the dev server hands over only a
few per second on 2 cores: hours for 10,000.) Timed: the audit as ``schedfence owners`` runs it
(infra/application/owners.py: catch-up, the projection read, ListSchedules pages, the
describes that confirm drift, the recorded event), in a fresh process each
(``schedfence owners --json``), without and then with ``--deep`` (one describe per schedule,
``--concurrency`` in flight). Every row must be a source or native, without drift. Not a timed
test: the figures depend on the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import ROOT, machine  # noqa: E402

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tests.temporal_server import start_dev_server  # noqa: E402

NS = "default"
CHUNK = 500


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def make_keys(store: str, target: str, count: int) -> None:
    """N pause-and-notes source schedules (each create makes the destination check: one
    describe on the server)."""
    from schedfence.infra.application.service import open_service
    t0 = time.perf_counter()
    with open_service(store, f"temporal://{target}/{NS}", worker_id="bench") as svc:
        for i in range(count):
            svc.create_schedule(NS, f"src-{i:06d}", notes="benchmark")
        svc.catch_up()
    say(f"set-up: {count} source keys in {time.perf_counter() - t0:.0f}s")


def make_schedules(target: str, count: int, in_flight: int = 50) -> None:
    """N Temporal Schedules (a daily interval, a workflow action) made with raw
    CreateSchedule calls, ``in_flight`` at a time: schedules the store never knew."""
    import asyncio

    from google.protobuf.duration_pb2 import Duration
    from temporalio.api.common.v1 import WorkflowType
    from temporalio.api.schedule.v1 import (IntervalSpec, Schedule, ScheduleAction,
                                            ScheduleSpec)
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflow.v1 import NewWorkflowExecutionInfo
    from temporalio.api.workflowservice.v1 import CreateScheduleRequest
    from temporalio.client import Client
    from temporalio.service import RPCError, RPCStatusCode

    async def run() -> None:
        client = await Client.connect(target, namespace=NS)
        gate = asyncio.Semaphore(in_flight)

        async def one(i: int) -> None:
            sid = f"tmp-{i:06d}"
            action = ScheduleAction(start_workflow=NewWorkflowExecutionInfo(
                workflow_id=f"act-{sid}", workflow_type=WorkflowType(name="Nightly"),
                task_queue=TaskQueue(name="q")))
            spec = ScheduleSpec(interval=[IntervalSpec(interval=Duration(seconds=86400))])
            rpc = CreateScheduleRequest(namespace=NS, schedule_id=sid,
                                        request_id=str(uuid.uuid4()),
                                        schedule=Schedule(spec=spec, action=action),
                                        identity="bench")
            async with gate:
                for attempt in range(10):  # a busy dev server times some out: the same
                    try:  # request id again (a create that landed answers the same)
                        await client.workflow_service.create_schedule(
                            rpc, timeout=timedelta(seconds=30))
                        return
                    except RPCError as exc:
                        if exc.status == RPCStatusCode.ALREADY_EXISTS:
                            return
                        await asyncio.sleep(1 + attempt)
                raise SystemExit(f"set-up: CreateSchedule {sid} kept failing")
        await asyncio.gather(*(one(i) for i in range(count)))
    t0 = time.perf_counter()
    asyncio.run(run())
    say(f"set-up: {count} Temporal schedules in {time.perf_counter() - t0:.0f}s")


def wait_listed(target: str, count: int) -> None:
    """Until ListSchedules shows them all (its visibility lags the creates; a busy dev server
    may time a listing out: tried again)."""
    from schedfence.domain.ports import DestinationUnavailable
    from schedfence.infra.adapters.destination.temporal import TemporalDestination
    t0 = time.perf_counter()
    with TemporalDestination(target, NS, rpc_timeout=60.0) as dest:
        while True:
            seen, token = 0, None
            try:
                while True:
                    page, token = dest.list_schedule_page(NS, token, 1000)
                    seen += len(page)
                    if not token:
                        break
            except DestinationUnavailable as exc:
                say(f"  listing: {exc}")
            if seen >= count:
                say(f"set-up: all listed after {time.perf_counter() - t0:.0f}s")
                return
            time.sleep(2)


def audit(store: str, target: str, concurrency: int, *extra: str) -> tuple[float, dict]:
    env = dict(os.environ, SCHEDFENCE_STORE=store,
               SCHEDFENCE_DESTINATION=f"temporal://{target}/{NS}")
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "owners",
                           "--namespace", NS, "--json", "--concurrency", str(concurrency),
                           *extra], cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"owners {' '.join(extra)} exited {done.returncode}: "
                         f"{done.stdout[-500:]} {done.stderr[-500:]}")
    return seconds, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10_000, help="keys and schedules")
    parser.add_argument("--concurrency", type=int, default=16, help="describes in flight")
    parser.add_argument("--quick", action="store_true", help="--count 50 (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.count = 50
    work = Path(tempfile.mkdtemp(prefix="schedfence-owners-bench-"))
    server = start_dev_server(work / "temporal", tied=True)
    try:
        store = f"sqlite:///{work / 'fence.db'}"
        make_keys(store, server.target, args.count)
        make_schedules(server.target, args.count)
        wait_listed(server.target, args.count)
        print(f"machine: {machine()}")
        print(f"{args.count} source keys and {args.count} Temporal schedules the store never "
              f"knew (native); dev server {server.target}; describes in flight: "
              f"{args.concurrency}")
        print("| audit | seconds (fresh process) | ListSchedules | DescribeSchedule | rows |"
              " native | drift |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for label, extra in (("owners", ()), ("owners --deep", ("--deep",))):
            seconds, doc = audit(store, server.target, args.concurrency, *extra)
            kinds = doc["counts"]["kind"]
            drift = sum(n for k, n in kinds.items() if k not in ("none", "native"))
            print(f"| {label} | {seconds:.1f} | {doc['calls']['list']} | "
                  f"{doc['calls']['describe']} | {len(doc['rows'])} | "
                  f"{kinds['native']} | {drift} |", flush=True)
            if kinds["native"] != args.count or len(doc["rows"]) != 2 * args.count or drift:
                raise SystemExit(f"unexpected rows: {doc['counts']}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
