"""Seeded random workloads for the replay corpus: admin calls, worker runs that crash at random
boundaries, lost responses and outages, continue-as-new, foreign starts, closes and deletes.

The same seed gives the same sequence of actions and faults; only timestamps differ between
two recordings. A workload must leave a history the invariant checker accepts.
"""
from __future__ import annotations

import random
from collections import Counter

from schedfence.domain.errors import DomainError
from schedfence.domain.ids import (DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE,
                                   destination_workflow_id)
from schedfence.domain.ports import DestinationError, StartWorkflow
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import FaultRates, SimulatedDestination
from tests.helpers import MEMORY, NS, Crash, World

SIDS = ("ra", "rb", "rc", "rd", "re")
BOUNDARIES = tuple(f"{label}.{when}" for label in ("claim", "answer", "chain", "close",
                                                    "rearm")
                   for when in ("before_append", "after_append")) + (
    "start.before_call", "start.after_call", "describe.after_call")
FAULTS = FaultRates(lose_response=0.15, fail_before_commit=0.05, unavailable=0.1)


class ArmedCrash:
    """A crash hook armed for at most one boundary of the next worker run."""

    point: str | None = None
    fired = 0

    def __call__(self, point: str) -> None:
        if point == self.point:
            self.point, self.fired = None, self.fired + 1
            raise Crash(point)


class Workload:
    def __init__(self, seed: int, store: str = MEMORY) -> None:
        self.rng = random.Random(seed)
        self.crash = ArmedCrash()
        dest = SimulatedDestination(seed=seed, faults=FAULTS)
        service = open_service(store, dest, worker_id=f"w{seed}",
                               crash_hook=self.crash)
        self.world = World(service, dest, self.crash)  # type: ignore[arg-type]  # a Crash as the hooks
        self.foreign = 0
        self.done: Counter[str] = Counter()  # actions that took effect, for the file's header

    # -- actions ----------------------------------------------------------------------------
    def create(self, sid: str) -> None:
        self.world.service.create_schedule(NS, sid, notes=f"notes-{self.rng.randrange(100)}",
                                           paused=self.rng.random() < 0.3)

    def rollback(self, sid: str) -> None:
        rid = self.rng.choice([None, None, f"req-{self.rng.randrange(4)}"])
        self.world.service.rollback(NS, sid, rid)

    def work(self, sid: str) -> None:
        if self.rng.random() < 0.35:
            self.crash.point = self.rng.choice(BOUNDARIES)
        try:
            self.world.service.run_until_idle(max_attempts=self.rng.randrange(1, 6))
        except Crash:
            pass  # the process died there; a later run (a new worker) takes over
        self.crash.point = None  # an unfired crash must not leak into later steps

    def environment(self, sid: str) -> None:
        dest, wid = self.world.dest, destination_workflow_id(sid)
        op = self.rng.choice(["continue_as_new", "complete", "terminate", "delete", "foreign"])
        if op == "foreign":
            self.foreign += 1
            kind = self.rng.choice([SCHEDULER_WORKFLOW_TYPE, DUMMY_WORKFLOW_TYPE, "user-wf"])
            dest.start_workflow(StartWorkflow(NS, wid, f"foreign-{self.foreign}", kind))
        else:
            getattr(dest, op)(NS, wid)
        self.done[op] += 1

    def mutate(self, sid: str) -> None:
        svc = self.world.service
        if self.rng.random() < 0.5:
            svc.update_schedule(NS, sid, paused=self.rng.random() < 0.5)
        else:
            svc.update_schedule(NS, sid, notes=f"edited-{self.rng.randrange(100)}")

    def abort(self, sid: str) -> None:
        self.world.service.abort(NS, sid, "random-abort", "ops")

    # -- the run ----------------------------------------------------------------------------
    def run(self, steps: int) -> World:
        actions = [(self.create, 2), (self.rollback, 4), (self.work, 6),
                   (self.environment, 3), (self.mutate, 2), (self.abort, 1)]
        fns, weights = zip(*actions)
        for _ in range(steps):
            fn = self.rng.choices(fns, weights)[0]
            try:
                fn(self.rng.choice(SIDS))
                self.done[fn.__name__] += 1
            except (DomainError, DestinationError, ValueError):
                self.done[f"{fn.__name__}_refused"] += 1  # wrote nothing / impossible
        self.world.service.run_until_idle()
        return self.world


    def stats(self) -> dict[str, int]:
        """What the workload exercised: actions, crashes fired, start outcomes."""
        outcomes = Counter(kind for _, kind in self.world.dest.start_log())
        return dict(sorted((self.done + Counter(crashes=self.crash.fired) + Counter(
            {f"start_{k}": n for k, n in outcomes.items()})).items()))


def random_history(seed: int, steps: int,
                   store: str = MEMORY) -> tuple[World, dict[str, int]]:
    workload = Workload(seed, store)
    return workload.run(steps), workload.stats()
