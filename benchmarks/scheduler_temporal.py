"""The source scheduler on a real Temporal dev server (issue 30): N schedules every minute,
their offsets spread over the minute, run by ``schedfence scheduler`` for M minutes; then
every nominal time must have started exactly once, and the lag is read from the log.

The schedules are written straight to a PostgreSQL store (as ``create_schedule`` makes them,
without its per-schedule destination check). Their actions run on a task queue no worker
polls, with a 20 s execution timeout, so each closes by timing out and the scheduler's watch
(one visibility query per 100 workflow ids) sees it close. Afterwards:

- **the checker** (``verify``) over the whole history: I17 (no time started twice), I18
  (every passed-over time accounted for);
- **the server's own listing** of every ``<schedule>-<time>`` workflow, against the times
  each schedule's spec names between its creation and the scheduler's stop (a time within
  a few seconds of either end may or may not have been due: those are left out);
- **the lag**: each ``ActionStarted`` event's time minus its nominal time, p50 and p99.

    .venv/bin/python benchmarks/scheduler_temporal.py --schedules 1000 --minutes 10
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from benchkit import machine, pg_store  # noqa: I001 (sys.path first)

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.source.key import ScheduleKey
from schedfence.domain.source.program import Program
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.spec import make_spec, times_between
from schedfence.infra.application.service import open_service
from tests.temporal_server import start_dev_server

NS = "default"
QUEUE = "schedfence-bench-no-worker"
EDGE = timedelta(seconds=5)  # times this near the run's start or stop are not judged


def write(url: str, n: int, now: datetime) -> None:
    with open_service(url, "sim") as svc:
        policies = make_policies(overlap="allow_all")
        for start in range(0, n, 500):
            aggregates = []
            for i in range(start, min(n, start + 500)):
                program = Program(make_spec(intervals=[(60, i * 60 // n)]), make_action(
                    workflow_type="BenchAction", task_queue=QUEUE, workflow_id=f"t{i}",
                    execution_timeout=20), policies)
                key = ScheduleKey.create(NS, f"t{i}")
                aggregates += [key, Schedule.create(NS, f"t{i}", key.start_incarnation(), False,
                                                    "", None, 0, program, now)]
            svc.app.save(*aggregates)


async def listed(target: str) -> list[str]:
    """Every run of an action workflow (a time started twice lists twice: its id is reused
    once the first run has timed out)."""
    from temporalio.client import Client
    client = await Client.connect(target, namespace=NS)
    return [wf.id async for wf in client.list_workflows("WorkflowType = 'BenchAction'")]


def expected(n: int, begin: datetime, end: datetime) -> set[str]:
    ids = set()
    for i in range(n):
        spec = make_spec(intervals=[(60, i * 60 // n)])
        for t in times_between(spec, begin + EDGE, end - EDGE):
            ids.add(f"t{i}-{t.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    return ids


def lags(url: str) -> list[float]:
    with open_service(url, "sim") as svc:
        out, position = [], 0
        while True:
            page = svc.app.recorder.select_notifications(start=position + 1, limit=5000)
            if not page:
                return sorted(out)
            for note in page:
                if note.topic.endswith(".ActionStarted"):
                    event = svc.app.mapper.to_domain_event(note)
                    out.append((event.timestamp - parse_nominal(event.nominal)).total_seconds())
            position = page[-1].id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=10.0)
    args = parser.parse_args()
    print(f"# scheduler_temporal: {machine()}")
    server = start_dev_server(Path(tempfile.mkdtemp(prefix="schedfence-bench-temporal-")))
    try:
        with pg_store() as url:
            begin = datetime.now(timezone.utc)
            write(url, args.schedules, begin)
            cmd = [sys.executable, "-m", "schedfence.infra.cli", "--store", url,
                   "--destination", f"temporal://{server.target}/{NS}", "scheduler",
                   "--poll-interval", "0.2"]
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True)
            time.sleep(args.minutes * 60)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=120)
            end = datetime.now(timezone.utc)
            with open_service(url, "sim") as svc:
                violations = svc.verify()
            time.sleep(3)  # the server's visibility catches up
            runs = asyncio.run(listed(server.target))
            server_ids = set(runs)
            wanted = expected(args.schedules, begin, end)
            started = lags(url)
            print(f"schedules {args.schedules}, every 60 s, {args.minutes:g} min; scheduler "
                  f"exit {proc.returncode}; stderr lines {len(err.splitlines())}")
            print(f"checker violations: {len(violations)}")
            print(f"server runs listed: {len(runs)} ({len(runs) - len(server_ids)} of an id "
                  f"listed before); expected (edges left out): {len(wanted)}; missing: "
                  f"{len(wanted - server_ids)}; starts recorded: {len(started)}")
            if started:
                print(f"lag p50 {started[len(started) // 2]:.2f} s, "
                      f"p99 {started[int(len(started) * 0.99)]:.2f} s, "
                      f"max {started[-1]:.2f} s")
    finally:
        server.stop()
        sys.stdout.flush()
        os._exit(0)  # temporalio's client can crash at exit (sdk-python#300)


if __name__ == "__main__":
    main()
