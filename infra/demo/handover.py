"""Demo S2: a schedule with a backfill in progress is handed over whole, and every time it owed
starts exactly once across the handoff (I14). The simulator's clock moves with the source's
compressed time, as a server's clock moves with real time."""
from __future__ import annotations

from datetime import datetime, timedelta

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.source.spec import make_spec

from schedfence.infra.demo.kit import NS, DemoRun

SPEC = make_spec(intervals=[(60, 0)])


def s2(run: DemoRun) -> str:
    """Backfills, a handover mid-backfill, and the I14 verdict over both sides' starts."""
    sid = "s2-handover"
    run.create(sid, what="every 60 s, start ReportWorkflow", spec=SPEC,
               action=make_action(workflow_type="ReportWorkflow", task_queue="reports",
                                  workflow_id="report"),
               policies=make_policies(overlap="allow_all"))
    cursor = run.service.load.source(NS, sid).state.cursor
    assert cursor is not None  # a schedule with a spec keeps one
    first = parse_nominal(cursor)
    now = [first]
    run.dest.clock = lambda: now[0]
    done = (first - timedelta(hours=2), first - timedelta(hours=1))
    pending = (first - timedelta(minutes=30), first - timedelta(minutes=20))
    run.service.backfill_schedule(NS, sid, *done, now=first)
    report = run.service.run_scheduler(now=first + timedelta(minutes=3))
    run.step("source", f"a backfill of an hour and 3 minutes of the spec: {report.started} "
                       "action(s) started")
    run.service.backfill_schedule(NS, sid, *pending, now=first)
    run.step("source", "a second backfill (10 minutes) asked for, not yet processed")
    now[0] = (first + timedelta(minutes=4)).replace(second=0, microsecond=0) + \
        timedelta(seconds=1)  # a time is due that the source never ticked
    run.rollback(sid)
    run.worker()
    now[0] += timedelta(minutes=10)
    return _verdict(run, sid, first, now[0], (done, pending))


def _verdict(run: DemoRun, sid: str, first: datetime, until: datetime,
             backfills: tuple[tuple[datetime, datetime], ...]) -> str:
    source = [parse_nominal(e.data["nominal"]) for e in run.service.history(NS, sid)
              if e.type.endswith("ActionStartIssued")]
    destination = run.dest.schedule_starts(NS, destination_workflow_id(sid), until)
    verdict = check_exactly_once(Owed(SPEC, first, until, backfills=backfills), source,
                                 destination)
    run.step("dest", f"10 minutes later: {len(source)} time(s) started by the source, "
                            f"{len(destination)} by the destination ({verdict.describe()})")
    run.check("the backfill in progress was handed over and finished by the destination",
              len(destination) > 10)
    run.check("every owed time started exactly once across the handoff (I14)", verdict.ok)
    return f"{len(source)} + {len(destination)} starts, {verdict.describe()}; " + \
        run.expect_completed(sid)
