"""The source scheduler over a fleet (issue 30): what an idle pass costs at 1,000 and at
100,000 schedules, and the starts a second it sustains, side by side in one run.

**Idle passes.** N schedules, daily, their next times hours away, written straight to the
store in appends of 1,000 (keys and schedules as ``create_schedule`` makes them, without its
per-schedule destination check: the creation is not what is measured). The first pass looks
at every schedule (each is new: due at once) and writes each one's next due time; then five
idle passes, each timed, with the events they appended (0 expected) and the due backlog.

**Sustained starts.** N schedules every second (``allow_all``), each action timing out
after ``--timeout`` seconds (its runs end, as real ones do, so the running set stays bounded),
the simulator as the runner (kept in the store), ``schedfence scheduler`` in 1 and then 2
processes for ``--seconds``; afterwards the log says how many actions started, the lag of each
start (the ``ActionStarted`` event's time minus its nominal time: p50, p99), and events per
action (the close of each run included). ``--saturate N`` repeats it with a fleet larger than
one process keeps up with, where 2 processes against 1 is a capacity ratio; but at such a
backlog one process, further behind, starts more times per visit of a schedule than two do,
so it is cheaper per start and the ratio understates two. ``--ladder N,N,...`` runs each size
with 1 and with 2 processes and prints which kept up (the lag of the run's last third of starts
at most ``KEPT_UP_GROWTH`` above its first third's: behind, it grows all run; and at least
``KEPT_UP_SHARE`` of the starts due a second made in the run's CPU window: a run at capacity
can start fewer times than are due while its lag, in a short run, does not yet grow by a
second): the largest size
each kept up with is its capacity at a bounded lag. Each run prints its CPU per start, the
schedulers' and the whole machine's (PostgreSQL too), and the schedulers' cores and the
machine's busy share, from the run's second second to its end (the processes' start-up left
out: with two, it was counted twice). The schedulers run with ``--poll 1.0`` by default (the
command's own default; it also wakes at each due time). ``--every S`` spreads the same rate
over a fleet S times as large, each schedule every S seconds at offset ``i % S``: no
whole-second burst, and a scheduler behind by less than S seconds still starts one time per
visit, so 1 and 2 processes are compared at the same cost per start. ``--capacity R1,R2``
runs 1 process at R1 and 2 at R2 starts due a second, each more than it starts, in
``--rounds`` pairs one after the other: each pair's ratio of the starts a second made is a
capacity ratio from runs minutes apart (this machine's speed drifts within an hour; a ladder's
sizes are run far apart and its steps are coarse).

    .venv/bin/python benchmarks/scheduler_fleet.py --idle 1000,100000 --fleet 500 --seconds 20
    .venv/bin/python benchmarks/scheduler_fleet.py --store sqlite --idle 1000,10000
    .venv/bin/python benchmarks/scheduler_fleet.py --idle "" --fleet 0 --capacity 1900,2900 \
        --every 10 --seconds 15 --rounds 3
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from typing import Callable

from benchkit import machine, pg_store, sqlite_store, timed_ms  # noqa: I001 (sys.path first)

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.source.key import ScheduleKey
from schedfence.domain.source.program import Program
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.spec import ScheduleSpec, make_spec
from schedfence.infra.application.service import MigrationService, open_service

NS = "fleet"
CHUNK = 1000
# Kept up with: the lag of the run's last third of starts at most this much above its first
# third's (medians, s). A fleet larger than the processes start falls further behind all run.
KEPT_UP_GROWTH = 1.0
KEPT_UP_SHARE = 0.97  # ... and at least this share of the starts due a second made (window)
P99_TARGET = 1.0  # s: the bound on a start's p99 lag
SETUP_S = 0.002  # s a schedule's writing and first indexing take at most (about 1.5 ms here)


def open_fleet(url: str) -> MigrationService:
    return open_service(url, "sim")


def write_fleet(svc: MigrationService, n: int, spec: Callable[[int], ScheduleSpec],
                now: datetime, timeout: int | None = None) -> None:
    """``n`` schedules ``s0 .. s<n-1>``, ``s<i>`` on ``spec(i)``, each its own action workflow
    id (``s<i>``: a start names ``s<i>-<time>``; ``timeout``: its execution timeout, seconds),
    ``CHUNK`` to an append."""
    policies = make_policies(overlap="allow_all")
    for start in range(0, n, CHUNK):
        aggregates = []
        for i in range(start, min(n, start + CHUNK)):
            program = Program(spec(i), make_action(workflow_type="W", task_queue="q",
                                                workflow_id=f"s{i}", execution_timeout=timeout),
                              policies)
            key = ScheduleKey.create(NS, f"s{i}")
            aggregates += [key, Schedule.create(NS, f"s{i}", key.start_incarnation(), False, "",
                                                None, 0, program, now)]
        svc.app.save(*aggregates)


def idle(url: str, n: int) -> dict[str, float]:
    now = datetime.now(timezone.utc)
    later = (now.hour * 3600 + now.minute * 60 + 12 * 3600) % 86400  # next time ~12 h away
    with open_fleet(url) as svc:
        daily = make_spec(intervals=[(86400, later)])
        create_ms, _ = timed_ms(lambda: write_fleet(svc, n, lambda _: daily, now))
        first_ms, report = timed_ms(svc.run_scheduler)
        assert report.schedules == n, (report.schedules, n)
        passes, events = [], []
        for _ in range(5):
            before = svc.event_count()
            ms, report = timed_ms(svc.run_scheduler)
            passes.append(ms)
            events.append(svc.event_count() - before)
            assert report.schedules == 0, report
        backlog = svc._schedule_due().backlog(datetime.now(timezone.utc))
    return {"n": n, "create_s": create_ms / 1000, "first_ms": first_ms,
            "idle_ms": statistics.median(passes), "idle_max_ms": max(passes),
            "idle_events": max(events), "backlog": backlog}


def started(url: str, since: int) -> tuple[list[float], list[float], int]:
    """Each ``ActionStarted`` after position ``since``: its lag (s) and its time (epoch s); and
    every event after it."""
    with open_fleet(url) as svc:
        lags, stamps, count, position = [], [], 0, since
        recorder, mapper = svc.app.recorder, svc.app.mapper
        while True:
            page = recorder.select_notifications(start=position + 1, limit=5000)
            if not page:
                return lags, stamps, count
            for note in page:
                count += 1
                event = mapper.to_domain_event(note)
                if type(event).__name__ == "ActionStarted":
                    lags.append((event.timestamp - parse_nominal(event.nominal)).total_seconds())
                    stamps.append(event.timestamp.timestamp())
            position = page[-1].id


def processes_cpu(procs: list[subprocess.Popen]) -> float:
    """CPU seconds (user + system) the running ``procs`` used so far (/proc/PID/stat)."""
    ticks = 0
    for p in procs:
        with open(f"/proc/{p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[int, int]:
    """The machine's busy and total CPU ticks so far, all cores (/proc/stat)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return sum(ticks) - idle, sum(ticks)


def sustained(url: str, rate: int, processes: int, seconds: float,
              timeout: int, poll: float = 1.0, every: int = 1) -> dict[str, float]:
    """``rate`` starts due a second: ``rate * every`` schedules every ``every`` seconds,
    schedule ``s<i>`` at offset ``i % every`` (spread evenly: with ``every`` 1, the whole fleet
    is due at each whole second)."""
    now, n = datetime.now(timezone.utc), rate * every
    # The first times come after the fleet is written and indexed (a large fleet's first
    # times were overdue before the schedulers ran: a backlog, not a sustained rate).
    first = now + timedelta(seconds=2 + n * SETUP_S)
    specs = [make_spec(intervals=[(every, offset)]) for offset in range(every)]
    with open_fleet(url) as svc:
        write_fleet(svc, n, lambda i: specs[i % every], first, timeout)
        svc.run_scheduler(now)  # the index: every schedule's first time
        since = svc.app.recorder.max_notification_id() or 0
    ahead = (first - datetime.now(timezone.utc)).total_seconds()
    if ahead < 1:
        print(f"# {n:,} schedules: written and indexed {-ahead:.1f}s after their first times "
              f"(raise SETUP_S)", file=sys.stderr)
    cmd = [sys.executable, "-m", "schedfence.infra.cli", "--store", url, "--destination", "sim",
           "scheduler", "--poll-interval", str(poll)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(processes)]  # each its own worker id (host:pid), its own leases
    # The CPU figures count from a second after the first times, and at least 3 s after the
    # processes began (their start-up, imports and first pass, left out) to the end.
    time.sleep(max(3.0, ahead + 1))
    since_s, cpu_before, busy_before = time.time(), processes_cpu(procs), machine_busy()
    time.sleep(max(seconds - 1, 0.1))
    cpu, busy, until = processes_cpu(procs), machine_busy(), time.time()
    for p in procs:
        p.send_signal(signal.SIGINT)
    for p in procs:
        p.wait(timeout=60)
    lags, stamps, events = started(url, since)
    third = max(len(lags) // 3, 1)  # in log order: the run's first and last thirds of starts
    growth = (statistics.median(lags[-third:]) - statistics.median(lags[:third])
              if lags else float("nan"))
    lags.sort()
    in_window = max(sum(since_s <= s <= until for s in stamps), 1)
    cores = (cpu - cpu_before) / (until - since_s)
    machine = (busy[0] - busy_before[0]) / max(busy[1] - busy_before[1], 1)
    machine_s = machine * (os.cpu_count() or 1) * (until - since_s)
    return {"n": rate, "processes": processes, "starts_per_s": len(lags) / seconds,
            # starts a second within the CPU window: a run that holds a steady lag starts
            # the rate due, where the count over the whole run misses the last second's
            # starts of a run further behind (they come after the stop)
            "window_starts_per_s": in_window / (until - since_s),
            "scheduler_cores": cores, "machine_busy": machine,
            # CPU per start in the window (ms): the schedulers', and the machine's (PostgreSQL
            # too)
            "scheduler_ms": (cpu - cpu_before) * 1000 / in_window,
            "machine_ms": machine_s * 1000 / in_window,
            "lag_growth_s": growth,
            "p50_lag_s": lags[len(lags) // 2] if lags else float("nan"),
            "p99_lag_s": lags[int(len(lags) * 0.99)] if lags else float("nan"),
            "events_per_action": events / len(lags) if lags else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("pg", "sqlite"), default="pg")
    parser.add_argument("--idle", default="1000,100000", help="fleet sizes for idle passes")
    parser.add_argument("--fleet", type=int, default=500,
                        help="starts due a second (schedules every second, or RATE x EVERY "
                             "with --every)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--timeout", type=int, default=2,
                        help="each action's execution timeout (s): the runs end, as real ones do")
    parser.add_argument("--saturate", type=int, default=0,
                        help="also this many starts due a second, more than one process can "
                             "start, to compare 1 and 2 processes at capacity")
    parser.add_argument("--poll", type=float, default=1.0,
                        help="schedfence scheduler's --poll-interval (it also wakes at each due "
                             "time)")
    parser.add_argument("--ladder", default="",
                        help="starts due a second, each run with 1 and 2 processes, to find "
                             "the largest each keeps up with")
    parser.add_argument("--every", type=int, default=1,
                        help="the sustained fleets' interval (s): RATE x EVERY schedules, their "
                             "offsets spread over it (1: all due at each whole second)")
    parser.add_argument("--capacity", default="",
                        help="R1,R2: starts due a second for 1 and for 2 processes, each above "
                             "what they start, run in --rounds pairs: the ratio of the starts "
                             "a second each made (their capacities) from pairs adjacent in time")
    parser.add_argument("--rounds", type=int, default=3, help="--capacity's pairs")
    args = parser.parse_args()
    store = pg_store if args.store == "pg" else sqlite_store
    print(f"# scheduler_fleet on {args.store}: {machine()}")
    rows = []
    for n in (int(x) for x in args.idle.split(",") if x):
        with store() as url:
            rows.append(idle(url, n))
    print("| schedules | written in (s) | first pass (ms) | idle pass median (ms) | max (ms) "
          "| events per idle pass | due backlog |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['n']:,} | {r['create_s']:.1f} | {r['first_ms']:.0f} | {r['idle_ms']:.1f} "
              f"| {r['idle_max_ms']:.1f} | {r['idle_events']} | {r['backlog']} |")
    if len(rows) > 1:
        print(f"idle pass at {rows[-1]['n']:,} / at {rows[0]['n']:,}: "
              f"{rows[-1]['idle_ms'] / rows[0]['idle_ms']:.2f}x")
    for fleet in (f for f in (args.fleet, args.saturate) if f):
        runs = []
        for processes in (1, 2):
            with store() as url:
                runs.append(sustained(url, fleet, processes, args.seconds, args.timeout,
                                      args.poll, args.every))
        print(f"| starts due a second (every {args.every} s) | processes | starts/s "
              "| p50 lag (s) | p99 lag (s) | events per action | scheduler cores | machine busy "
              "| CPU per start, schedulers / machine (ms) |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in runs:
            print(f"| {r['n']:,} | {r['processes']} | {r['starts_per_s']:.0f} "
                  f"| {r['p50_lag_s']:.2f} | {r['p99_lag_s']:.2f} "
                  f"| {r['events_per_action']:.2f} | {r['scheduler_cores']:.2f} "
                  f"| {r['machine_busy']:.0%} | {r['scheduler_ms']:.2f} / "
                  f"{r['machine_ms']:.2f} |")
        print(f"2 processes / 1: {runs[1]['starts_per_s'] / runs[0]['starts_per_s']:.2f}x")
    if args.ladder:
        ladder(store, [int(x) for x in args.ladder.split(",")], args.seconds, args.timeout,
               args.poll, args.every)
    if args.capacity:
        one, two = (int(x) for x in args.capacity.split(","))
        capacity(store, (one, two), args.rounds, args.seconds, args.timeout, args.poll,
                 args.every)


def ladder(store, sizes: list[int], seconds: float, timeout: int, poll: float,
           every: int = 1) -> None:
    """Each size with 1 and 2 processes: whether it kept up (its lag did not grow by more
    than ``KEPT_UP_GROWTH``, and it made ``KEPT_UP_SHARE`` of the starts due a second or more
    in its CPU window), and
    the largest size each kept up with; and the largest each
    kept up with at a p99 lag within ``P99_TARGET`` (the issue's bound on a start's lag)."""
    print(f"| starts due a second (every {every} s) | processes | starts/s (run / window) "
          "| p50 lag (s) "
          "| p99 lag (s) | lag growth (s) | scheduler cores | machine busy | CPU per start, "
          "schedulers / machine (ms) | kept up |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
    best, bounded = {1: 0, 2: 0}, {1: 0, 2: 0}
    for n in sizes:
        for processes in (1, 2):
            with store() as url:
                r = sustained(url, n, processes, seconds, timeout, poll, every)
            kept = r["lag_growth_s"] <= KEPT_UP_GROWTH and \
                r["window_starts_per_s"] >= KEPT_UP_SHARE * n
            if kept:
                best[processes] = max(best[processes], n)
                if r["p99_lag_s"] <= P99_TARGET:
                    bounded[processes] = max(bounded[processes], n)
            print(f"| {n:,} | {processes} | {r['starts_per_s']:.0f} "
                  f"/ {r['window_starts_per_s']:.0f} | {r['p50_lag_s']:.2f} "
                  f"| {r['p99_lag_s']:.2f} | {r['lag_growth_s']:.2f} "
                  f"| {r['scheduler_cores']:.2f} | {r['machine_busy']:.0%} "
                  f"| {r['scheduler_ms']:.2f} / {r['machine_ms']:.2f} "
                  f"| {'yes' if kept else 'no'} |", flush=True)
    for name, most in (("", best), (f" with p99 lag <= {P99_TARGET:g} s", bounded)):
        print(f"kept up{name} with at most: 1 process {most[1]:,}/s, 2 processes "
              f"{most[2]:,}/s" + (f" ({most[2] / most[1]:.2f}x)" if most[1] else ""))


def capacity(store, rates: tuple[int, int], rounds: int, seconds: float, timeout: int,
             poll: float, every: int) -> None:
    """1 process at ``rates[0]`` starts due a second and 2 at ``rates[1]``, each more than it
    starts, in ``rounds`` pairs run one after the other: what each starts a second in its CPU
    window is its capacity, and each pair's ratio compares two runs minutes apart (this
    machine's speed drifted by a third within an hour: ratios of runs far apart in time, or a
    ladder's steps, read that drift). A run that made ``KEPT_UP_SHARE`` of its rate was not at
    capacity (raise it); one whose p99 lag reached ``every`` started some schedules twice a
    visit, cheaper per start than one that did not (lower it, or raise ``every``)."""
    print(f"| round | processes | starts due a second (every {every} s) | starts/s (window) "
          "| p50 lag (s) | p99 lag (s) | scheduler cores | machine busy "
          "| CPU per start, schedulers / machine (ms) | at capacity |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
    ratios = []
    for k in range(1, rounds + 1):
        made = {}
        for processes, rate in zip((1, 2), rates):
            with store() as url:
                r = sustained(url, rate, processes, seconds, timeout, poll, every)
            made[processes] = r["window_starts_per_s"]
            full = r["window_starts_per_s"] < KEPT_UP_SHARE * rate and r["p99_lag_s"] < every
            print(f"| {k} | {processes} | {rate:,} | {made[processes]:.0f} "
                  f"| {r['p50_lag_s']:.2f} | {r['p99_lag_s']:.2f} "
                  f"| {r['scheduler_cores']:.2f} | {r['machine_busy']:.0%} "
                  f"| {r['scheduler_ms']:.2f} / {r['machine_ms']:.2f} "
                  f"| {'yes' if full else 'no'} |", flush=True)
        ratios.append(made[2] / made[1])
    print("2 processes / 1, each pair: " + ", ".join(f"{x:.2f}x" for x in ratios)
          + f"; median {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
