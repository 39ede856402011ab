"""A batch job moving a fleet while the source scheduler keeps running it (issue 30): the job's
rate, the migrations parked, and every nominal time started once across the move.

N source schedules (``--count``, default 100,000) fire every ``--every`` seconds, their offsets
spread over the interval, each its own action workflow id (``a<i>``: a start names
``a<i>-<time>``); the simulator kept in the store is the runner and the destination. They are
written straight to the store in appends of 1,000 (as benchmarks/scheduler_fleet.py does: the
creation is not what is measured, but its time is printed). Then two processes at once:
``schedfence scheduler`` (passes every 0.2 s) and ``schedfence migrate --to workflow`` (the
batch job of infra/application/jobs.py, ``--concurrency`` worker threads), which fences, hands
over and closes the schedules page by page. A schedule whose start is in flight when the job
asks is left ``blocked`` (``phase_blocked``: nothing written); once its selection is decided,
the same job asks those again in its own rounds (``--blocked-rounds ROUNDS``, ``WAIT`` seconds
before each). The scheduler is stopped ``--after`` seconds after the job ends.

Afterwards: the job's rate (schedules moved a second, from its start to its end, driving and
rounds included), its counts (``parked`` 0 expected), what each round left blocked (read from
the job's own events), the invariant checker over the whole log
(``verify``: no time started twice by the source, no second chain, ...), and the exactly-once
oracle per schedule over what the simulator holds at a cut-off instant (the source's
``a<i>-<time>`` workflows and the times each destination schedule started by then): every
nominal time owed up to the cut-off started exactly once, on one side or the other.

    .venv/bin/python benchmarks/scheduler_move.py --count 100000 --every 3600
    .venv/bin/python benchmarks/scheduler_move.py --count 200 --every 10 --json
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from benchkit import ROOT, machine, pg_store, sqlite_store  # noqa: I001 (sys.path first)

from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.job import Job, job_aggregate_id
from schedfence.domain.invariants.exactly_once_log import check_listing
from schedfence.domain.ports import DestinationNotFound
from schedfence.domain.source.action import make_action, make_policies, nominal_text
from schedfence.domain.source.key import ScheduleKey
from schedfence.domain.source.program import Program
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import MigrationService, open_service

NS, JOB = "fleet", "move-fleet"
CHUNK = 1000
CUT_MARGIN = 2.0  # seconds before the scheduler stops: the oracle's cut-off
ROUNDS = 4  # rounds the job asks again what it left blocked (--blocked-rounds)
WAIT = 1.0  # seconds before each (--blocked-wait): a start in flight is answered in a pass or two


def write_fleet(svc: MigrationService, n: int, every: int, now: datetime,
                timeout: int | None = None) -> None:
    """``n`` schedules ``s<i>``, every ``every`` seconds at offset ``i * every // n``, each
    starting ``a<i>-<time>`` (``timeout``: its execution timeout, seconds; None: its runs
    never end), ``CHUNK`` to an append."""
    policies = make_policies(overlap="allow_all")
    for first in range(0, n, CHUNK):
        aggregates = []
        for i in range(first, min(n, first + CHUNK)):
            spec = make_spec(intervals=[(every, i * every // n)])
            program = Program(spec, make_action(workflow_type="W", task_queue="q",
                                                workflow_id=f"a{i}",
                                                execution_timeout=timeout), policies)
            key = ScheduleKey.create(NS, f"s{i}")
            aggregates += [key, Schedule.create(NS, f"s{i}", key.start_incarnation(), False, "",
                                                None, 0, program, now)]
        svc.app.save(*aggregates)


def cli(url: str, *args: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", "--store", url,
                             "--destination", "sim", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)


def move(url: str, concurrency: int, after: float, logs: Path) -> dict[str, Any]:
    """The scheduler and the job side by side; the job's report, its seconds, and the
    instant the oracle judges up to (the scheduler still running then)."""
    sched = cli(url, "scheduler", "--poll-interval", "0.2", log=logs / "scheduler.err")
    time.sleep(1.0)  # the scheduler's first pass under way: the job moves a running fleet
    began = time.monotonic()
    report = job(url, JOB, concurrency, logs)
    seconds = time.monotonic() - began
    time.sleep(after)
    cut = datetime.now(timezone.utc) - timedelta(seconds=CUT_MARGIN)
    sched.send_signal(signal.SIGTERM)
    sched.communicate(timeout=120)
    return {"report": report, "job_s": seconds, "scheduler_rc": sched.returncode, "cut": cut}


def job(url: str, job_id: str, concurrency: int, logs: Path) -> dict[str, Any]:
    """One ``schedfence migrate`` run to its end, its rounds included: its JSON report (and
    its exit code)."""
    proc = cli(url, "migrate", "--namespace", NS, "--to", "workflow", "--job-id", job_id,
               "--concurrency", str(concurrency), "--blocked-rounds", str(ROUNDS),
               "--blocked-wait", str(WAIT), "--json", log=logs / f"{job_id}.err")
    out, _ = proc.communicate()
    doc = json.loads(out) if out.strip() else {}
    if "counts" not in doc:  # no report: an error document (or nothing), said as it is
        raise SystemExit(f"job {job_id} exited {proc.returncode} without a report: "
                         f"{out.strip()[-1000:]} "
                         f"{(logs / f'{job_id}.err').read_text()[-2000:]}")
    return dict(doc, rc=proc.returncode)


def left_blocked(svc: MigrationService, job_id: str) -> list[int]:
    """What the job left blocked after its pages, then after each of its rounds (a start in
    flight when it asked: ``phase_blocked``), from its own events: a round records exactly
    the schedules still blocked before it (docs/usage.md, "Batch jobs")."""
    blocked, left = 0, []
    for event in svc.app.events.get(job_aggregate_id(job_id)):
        if isinstance(event, Job.PageDecided):
            blocked += sum(d["decision"] == "blocked" for d in event.decisions)
        elif isinstance(event, Job.BlockedAsked):
            left.append(blocked)
            blocked -= sum(d["decision"] != "blocked" for d in event.decisions)
    return left + [blocked]


def listing(svc: MigrationService, n: int, cut: datetime) -> tuple[list[str], int, int]:
    """The simulator's ``a<i>-<time>`` workflows (the source's starts) and each destination
    schedule's starts up to ``cut`` under the same ids: (ids, source starts, destination)."""
    sim = svc.destination
    source = [wid for ns, wid in sim.workflow_ids() if ns == NS and wid.startswith("a")]
    moved = []
    for i in range(n):
        try:
            times = sim.schedule_starts(NS, destination_workflow_id(f"s{i}"), cut)
        except DestinationNotFound:
            continue  # not moved: its starts are all the source's
        moved += [f"a{i}-{nominal_text(t)}" for t in times]
    return source + moved, len(source), len(moved)


def check(url: str, n: int, cut: datetime) -> dict[str, Any]:
    with open_service(url, "sim") as svc:
        rounds = left_blocked(svc, JOB)
        t0 = time.monotonic()
        violations = svc.verify()
        t1 = time.monotonic()
        ids, source, moved = listing(svc, n, cut)
        events = list(enumerate(_events(svc), 1))
        verdicts = check_listing(events, ids, cut)
        bad = {f"{k[0]}/{k[1]}": v.describe() for k, v in verdicts.items() if not v.ok}
        return {"violations": [str(v) for v in violations], "checker_s": t1 - t0,
                "oracle_s": time.monotonic() - t1, "judged": len(verdicts),
                "not_once": bad, "source_starts": source, "destination_starts": moved,
                "events": len(events), "rounds": rounds}


def _events(svc: MigrationService) -> Any:
    recorder, mapper, position = svc.app.recorder, svc.app.mapper, 0
    while page := recorder.select_notifications(start=position + 1, limit=5000):
        yield from (mapper.to_domain_event(note) for note in page)
        position = page[-1].id


def run(url: str, n: int, every: int, concurrency: int, after: float,
        logs: Path, timeout: int | None = None) -> dict[str, Any]:
    t0 = time.monotonic()
    with open_service(url, "sim") as svc:
        write_fleet(svc, n, every, datetime.now(timezone.utc), timeout)
    created = time.monotonic() - t0
    moved = move(url, concurrency, after, logs)
    report = moved["report"]
    result = check(url, n, moved["cut"])
    counts = report["counts"]
    return {"count": n, "every_s": every, "concurrency": concurrency, "create_s": created,
            "job_s": moved["job_s"], "job_rc": report["rc"],
            "scheduler_rc": moved["scheduler_rc"], "rate_per_s": counts["completed"] /
            moved["job_s"], "blocked_rounds": report["blocked_rounds"],
            "decided": report["decided"], "counts": counts,
            "cut": moved["cut"].isoformat(), **result}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("pg", "sqlite"), default="pg")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=3600, help="seconds between a "
                        "schedule's times (offsets spread over it)")
    parser.add_argument("--concurrency", type=int, default=4, help="the job's worker threads")
    parser.add_argument("--after", type=float, default=5.0, help="seconds the scheduler runs "
                        "on after the job")
    parser.add_argument("--timeout", type=int, default=60, help="each action's execution "
                        "timeout, seconds (its runs end, as real ones do; 0: never)")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args()
    store = pg_store if args.store == "pg" else sqlite_store
    with store() as url:
        logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"scheduler_move_{os.getpid()}"
        logs.mkdir(exist_ok=True)
        r = run(url, args.count, args.every, args.concurrency, args.after, logs,
                args.timeout or None)
    if args.json:
        print(json.dumps(r))
    else:
        print(f"# scheduler_move on {args.store}: {machine()}")
        print(f"{r['count']:,} schedules every {r['every_s']} s, actions timing out after "
              f"{args.timeout or 'never'} s, written in {r['create_s']:.1f} s")
        print(f"job: {r['counts']['completed']:,} moved in {r['job_s']:.1f} s = "
              f"{r['rate_per_s']:.1f}/s (concurrency {r['concurrency']}, exit {r['job_rc']}); "
              f"counts {r['counts']}; left blocked after its pages, then after each of its "
              f"{r['blocked_rounds']} round(s) asking them again: {r['rounds']}")
        print(f"starts: {r['source_starts']:,} by the source, {r['destination_starts']:,} by "
              f"the destination schedules, up to {r['cut']}")
        print(f"checker: {len(r['violations'])} violations over {r['events']:,} events "
              f"({r['checker_s']:.1f} s); exactly once: {r['judged'] - len(r['not_once']):,} of "
              f"{r['judged']:,} schedules ({r['oracle_s']:.1f} s)")
        for line in r["violations"][:10] + [f"{k}: {v}" for k, v in
                                            list(r["not_once"].items())[:10]]:
            print(f"  {line}")
    clean = not r["violations"] and not r["not_once"] and r["counts"].get("parked") == 0
    return 0 if clean and r["job_rc"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
