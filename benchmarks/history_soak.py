"""Generated histories, many of them: the state machine of tests/infra/test_state_machine.py
(passes, pauses, the scheduler down, triggers, backfills, deletes and re-creates, limits,
catch-up windows, rollbacks, forwards, round trips, crashes, faults and a hostile destination)
run as short histories on the in-memory store and the simulator, with the one oracle
(domain/invariants/exactly_once.py), the checker and every other invariant asserted after every step.
Prints the count of histories, the steps, the rate and the violations (a violation stops its
process and prints hypothesis' shrunk example).

    .venv/bin/python benchmarks/history_soak.py [--histories 100000] [--steps 12]
        [--processes 2] [--quick]
"""
from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 200  # histories per hypothesis run (a fresh random seed each)


def _run(histories: int, steps: int, out: "multiprocessing.Queue[tuple]") -> None:
    sys.path.insert(0, str(ROOT))
    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from tests.infra.test_state_machine import RollbackMachine

    class Counted(RollbackMachine):
        made = 0

        def __init__(self) -> None:
            super().__init__()
            Counted.made += 1

    done = 0
    try:
        while done < histories:
            before = Counted.made
            n = min(CHUNK, histories - done)
            run_state_machine_as_test(Counted, settings=settings(
                max_examples=n, stateful_step_count=steps, deadline=None, database=None,
                suppress_health_check=list(HealthCheck)))
            done += n
            out.put(("progress", Counted.made - before, ""))  # the histories really run
        out.put(("done", 0, ""))
    except BaseException:  # a violation: hypothesis' report names the steps
        out.put(("violation", 0, traceback.format_exc()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="40 histories of 6 steps")
    args = parser.parse_args()
    if args.quick:
        args.histories, args.steps, args.processes = 40, 6, 1
    share = [args.histories // args.processes + (i < args.histories % args.processes)
             for i in range(args.processes)]
    queue: multiprocessing.Queue[tuple] = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=_run, args=(n, args.steps, queue)) for n in share]
    start = time.monotonic()
    for p in procs:
        p.start()
    finished, histories, violations = 0, 0, []
    while finished < len(procs):
        kind, n, payload = queue.get()
        if kind == "progress":
            histories += n
            print(f"  {histories:,} histories, {time.monotonic() - start:,.0f} s", flush=True,
                  file=sys.stderr)
        elif kind == "violation":
            violations.append(payload)
            finished += 1
        else:
            finished += 1
    for p in procs:
        p.join()
    elapsed = time.monotonic() - start
    print(f"histories: {histories:,} ({args.steps} steps each, {args.processes} processes)")
    print(f"time: {elapsed:,.0f} s, {histories / elapsed:,.1f} histories/s")
    print(f"violations: {len(violations)}")
    for report in violations:
        print(report)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
