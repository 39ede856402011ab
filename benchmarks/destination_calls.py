"""Destination calls per migration: the happy path and under 10% response loss.

    .venv/bin/python benchmarks/destination_calls.py [--rollbacks N] [--runs K] [--loss P] [--quick]

Each run opens a new SQLite store whose destination is the simulator wrapped in a counting
proxy, creates N schedules and rolls each back end to end: ``svc.rollback(...)`` (retried when
the admin call answers ``unavailable``), then ``svc.run_until_idle()`` until that migration is
no longer workable. Calls are counted per workflow id and per caller: the admin call's sentinel
preflight describe (required by invariant I12, so reported apart from the worker's calls) and the
worker's starts and describes. The lossy scenario uses the simulator's seeded
``FaultRates(lose_response=P)`` on every start and describe: the call takes effect (a start
commits) but the caller sees ``DestinationUnavailable``. Afterwards it checks one destination
chain per completed migration and the invariant checker over the whole store.
Not a timed test: these are counts, deterministic for a seed.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from benchkit import median, sqlite_store

from schedfence.domain.errors import Unavailable
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.rollback.phases import WORKER_PHASES
from schedfence.domain.ports import RunDescription, StartAccepted, StartWorkflow
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.simulator import FaultRates, SimulatedDestination

NS = "bench"
ADMIN_TRIES = 50  # a client retrying an `unavailable` admin call
WORKER_PASSES = 50  # run_until_idle calls per migration before it counts as stuck
WORKABLE = WORKER_PHASES


class CountingDestination:
    """The destination port, counted per (workflow id, caller, operation) before delegating,
    so a call that fails or whose answer is lost still counts."""

    def __init__(self, inner: SimulatedDestination) -> None:
        self.inner = inner
        self.caller = "worker"
        self.calls: Counter[tuple[str, str, str]] = Counter()

    def start_workflow(self, request: StartWorkflow) -> StartAccepted:
        self.calls[(request.workflow_id, self.caller, "start")] += 1
        return self.inner.start_workflow(request)

    def describe(self, namespace: str, workflow_id: str,
                 run_id: str | None = None) -> RunDescription:
        self.calls[(workflow_id, self.caller, "describe")] += 1
        return self.inner.describe(namespace, workflow_id, run_id)


@dataclass
class RunResult:
    per_migration: dict[str, list[int]] = field(default_factory=dict)  # figure -> one per mig
    outcomes: Counter[str] = field(default_factory=Counter)
    admin_retries: int = 0
    lost_starts: int = 0  # starts that committed but whose answer the worker never saw
    worker_passes: list[int] = field(default_factory=list)
    one_chain_each: bool = True
    violations: int = 0


def admin(proxy: CountingDestination, caller: str, call: Callable[[], object],
          result: RunResult) -> None:
    """An admin call that asks the destination first (the source create's running-chain
    check, I1; the rollback's sentinel preflight, I12); a lost answer wrote nothing, so it
    is retried, and its describes are counted under ``caller``."""
    proxy.caller = caller
    for _ in range(ADMIN_TRIES):
        try:
            call()
            break
        except Unavailable:
            result.admin_retries += 1
    else:
        raise RuntimeError(f"{caller}: the call never got through")
    proxy.caller = "worker"


def roll_back(svc: MigrationService, proxy: CountingDestination, sid: str,
              result: RunResult) -> None:
    admin(proxy, "admin", lambda: svc.rollback(NS, sid), result)
    for passes in range(1, WORKER_PASSES + 1):
        svc.run_until_idle()
        if svc.migration(NS, sid).state not in WORKABLE:
            break
    result.worker_passes.append(passes)


def one_run(n: int, seed: int, loss: float) -> RunResult:
    dest = SimulatedDestination(seed=seed, faults=FaultRates(lose_response=loss))
    proxy = CountingDestination(dest)
    result = RunResult()
    with sqlite_store() as url:
        svc = open_service(url, proxy, worker_id="bench")  # type: ignore[arg-type]
        try:
            sids = [f"s{i:04d}" for i in range(n)]
            for sid in sids:
                admin(proxy, "create", lambda sid=sid: svc.create_schedule(NS, sid), result)
            for sid in sids:
                roll_back(svc, proxy, sid, result)
            tally(svc, proxy, dest, sids, result)
        finally:
            svc.close()
    return result


def tally(svc: MigrationService, proxy: CountingDestination, dest: SimulatedDestination,
          sids: list[str], result: RunResult) -> None:
    figures = {"starts": ("worker", "start"), "worker describes": ("worker", "describe"),
               "admin describes": ("admin", "describe"),
               "create describes": ("create", "describe"),
               "admin starts": ("admin", "start")}  # must stay 0: the admin never starts
    for sid in sids:
        wid = destination_workflow_id(sid)
        for name, (caller, op) in figures.items():
            result.per_migration.setdefault(name, []).append(proxy.calls[(wid, caller, op)])
        view = svc.migration(NS, sid)
        outcome = view.state if view.state != "parked" else f"parked ({view.park_reason})"
        result.outcomes[outcome] += 1
        if view.state == "completed" and len(dest.chains(NS, wid)) != 1:
            result.one_chain_each = False
    result.lost_starts = sum(1 for _, outcome in dest.start_log(NS) if outcome == "lost_response")
    result.violations = len(svc.verify())


def report(title: str, runs: list[RunResult], target: bool) -> None:
    print(f"{title}: {len(runs[0].worker_passes)} rollbacks x {len(runs)} runs; per migration, "
          "median over runs of the mean [max over all runs]")
    for name in ("starts", "worker describes", "admin describes", "create describes",
                 "admin starts"):
        means = [statistics.fmean(r.per_migration[name]) for r in runs]
        top = max(max(r.per_migration[name]) for r in runs)
        low = min(min(r.per_migration[name]) for r in runs)
        line = f"  {name:<18} {median(means):6.3f} [min {low}, max {top}]"
        if target and name in ("starts", "worker describes"):
            want = 1 if name == "starts" else 0
            met = low == top == want
            line += f"   target exactly {want}: {'met' if met else 'NOT met'} (every migration)"
        if name == "admin describes":
            line += "   (sentinel preflight, I12; retries included)"
        if name == "create describes":
            line += "   (no running chain before a source create, I1; retries included)"
        print(line)
    retries = [r.admin_retries for r in runs]
    passes = [statistics.fmean(r.worker_passes) for r in runs]
    print(f"  lost start answers (start committed, reconciled by describe): "
          f"{[r.lost_starts for r in runs]} per run")
    print(f"  admin retries after `unavailable`: {retries} per run; "
          f"run_until_idle calls per migration: median mean {median(passes):.2f}, "
          f"max {max(max(r.worker_passes) for r in runs)}")
    outcomes = sum((r.outcomes for r in runs), Counter())
    print(f"  outcomes (all runs): {dict(sorted(outcomes.items()))}; one chain per completed "
          f"migration: {'yes' if all(r.one_chain_each for r in runs) else 'NO'}; checker: "
          f"{'ok' if not any(r.violations for r in runs) else 'VIOLATIONS'}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollbacks", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario (seeds 1..K)")
    parser.add_argument("--loss", type=float, default=0.10,
                        help="lose_response probability per start and describe")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 rollbacks")
    args = parser.parse_args(argv)
    if args.quick:
        args.rollbacks = 20
    if args.rollbacks < 1 or args.runs < 1 or not 0 <= args.loss < 1:
        parser.error("--rollbacks and --runs must be positive and --loss in [0, 1)")
    seeds = range(1, args.runs + 1)
    scenarios: list[tuple[str, float, bool]] = [("happy path (no faults)", 0.0, True), (
        f"{args.loss:.0%} response loss on starts and describes", args.loss, False)]
    ok = True
    for title, loss, target in scenarios:
        runs = [one_run(args.rollbacks, seed, loss) for seed in seeds]
        report(title, runs, target)
        ok &= all(r.one_chain_each and not r.violations for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
