"""A scheduler pass that fails (issue 45, item 2), on PostgreSQL:

- **catch-up**: ``--schedules`` schedules every second, ``--owed`` seconds behind, caught up
  through the simulator kept in a schema of its own (``sim+``), whose batch call makes its
  starts ``START_CHUNK`` to a transaction: a pass's starts, wall time and CPU;
- **poison**: ``--batch`` schedules every second, one of whose starts the runner throws on:
  passes with and without it, each one's batch calls, starts, wall time and CPU (the batch is
  stepped in halves down to the poison, then it is put off 1, 2, 4 ... s).

    .venv/bin/python benchmarks/scheduler_failures.py --schedules 20 --owed 1000 --batch 200
"""
from __future__ import annotations

import argparse
import time
from datetime import datetime, timedelta

from benchkit import machine, pg_store  # noqa: I001 (sys.path first)

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.shared_sim import SharedSimDestination
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from schedfence.infra.engines.schedule_due import ScheduleDue
from schedfence.infra.engines.scheduler import Scheduler

NS = "ns"


def create(svc, sid: str) -> datetime:
    svc.create_schedule(NS, sid, spec=make_spec(intervals=[(1, 0)]),
                        action=make_action(workflow_type="W", task_queue="q",
                                           workflow_id=f"{sid}-act"),
                        policies=make_policies(overlap="allow_all"))
    return datetime.fromisoformat(svc.load.source(NS, sid).state.cursor.replace("Z", "+00:00"))


def timed(label: str, one_pass) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    report, calls = one_pass()
    print(f"{label}: {report.started} started, {calls} batch call(s), "
          f"{report.step_failures} failed alone, {time.perf_counter() - wall:.2f} s wall, "
          f"{time.process_time() - cpu:.2f} s CPU")


def catch_up(schedules: int, owed: int) -> None:
    with pg_store() as store, pg_store() as sim_store:
        dest = SharedSimDestination("sim+" + sim_store)
        with open_service(store, dest) as svc:
            now = max(create(svc, f"s{k}") for k in range(schedules)) + timedelta(seconds=owed)
            for n in range(3):
                timed(f"catch-up pass {n + 1}", lambda: (svc.run_scheduler(now=now), 1))
        dest.close()


class Throws:
    def __init__(self, dest, poison: str) -> None:
        self.dest, self.poison, self.calls = dest, poison, 0

    def start_workflows(self, requests):
        self.calls += 1
        if any(r.workflow_id.startswith(self.poison) for r in requests):
            raise RuntimeError("the runner threw")
        return self.dest.start_workflows(requests)

    def __getattr__(self, name):
        return getattr(self.dest, name)


def poison(batch: int) -> None:
    with pg_store() as store:
        dest = SimulatedDestination()
        with open_service(store, dest) as svc:
            t0 = max(create(svc, f"s{k:04d}") for k in range(batch))
            due = ScheduleDue(svc.views.engine, svc.app.recorder)
            Scheduler(svc.load, dest, due, holder="A").run_once(t0)
            for label, bad in (("healthy", "none-"), ("one poison", f"s{batch // 2:04d}-"),
                               ("healthy again", "none-")):
                runner = Throws(dest, bad)
                for _ in range(2):
                    t0 += timedelta(seconds=1)
                    runner.calls = 0

                    def one_pass():
                        report = Scheduler(svc.load, runner, due, holder="A").run_once(t0)
                        return report, runner.calls
                    timed(f"{label} ({batch})", one_pass)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=20)
    parser.add_argument("--owed", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()
    print(machine())
    catch_up(args.schedules, args.owed)
    poison(args.batch)


if __name__ == "__main__":
    main()
