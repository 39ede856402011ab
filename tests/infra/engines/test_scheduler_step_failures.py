"""A scheduler pass whose step fails (infra/engines/step_failures.py): it gives its leases
back, a batch is stepped in parts so one poison schedule backs off alone while the rest run,
and no time starts twice or is lost (the runner's own count and the checker, I17)."""
from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from schedfence.domain.source.action import parse_nominal as _t
from schedfence.domain.source.spec import make_spec, times_between
from schedfence.domain.source.runs import ActionStarted
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from schedfence.infra.engines.schedule_due import ScheduleDue, due_rows
from schedfence.infra.engines.scheduler import Scheduler, run_until_stopped
from schedfence.infra.engines.step_failures import MAX_BACKOFF, backoff_seconds
from schedfence.projections.records import to_us
from tests.infra.cli.cli_runs import subprocess_cli
from tests.infra.engines.sched_world import world  # noqa: F401 (the fixture)
from tests.infra.engines.test_scheduler_fleet import NS, create, once_each, scheduler


class Throws:
    """A runner whose batch call raises (not a destination error: a bug, a lost connection
    mapped nowhere) when ``bad(request)`` holds for one of its starts."""

    def __init__(self, dest, bad=lambda request: True) -> None:
        self.dest, self.bad, self.calls = dest, bad, []

    def start_workflows(self, requests):
        self.calls.append(sorted({r.workflow_id.split("-act-")[0] for r in requests}))
        if any(self.bad(r) for r in requests):
            raise RuntimeError("boom: the runner threw")
        return self.dest.start_workflows(requests)

    def __getattr__(self, name):
        return getattr(self.dest, name)


def rows(svc) -> dict[str, tuple]:
    """Each schedule's due row: (schedule id, failures, lease_us, due_us, error)."""
    ids = {str(svc.load.source(NS, s).id): s for s in names(svc)}
    with svc.views.engine.connect() as conn:
        found = conn.execute(select(due_rows.c.aggregate_id, due_rows.c.failures,
                                    due_rows.c.lease_us, due_rows.c.due_us, due_rows.c.error))
        return {ids[r[0]]: tuple(r[1:]) for r in found if r[0] in ids}


def names(svc) -> list[str]:
    return [v.schedule_id for v in svc.list_schedules()]


def test_a_failed_pass_gives_its_leases_back_for_another_scheduler_at_once(world):
    svc, dest = world
    t0 = max(create(svc, f"s{k}") for k in range(4))
    broken = scheduler(svc, Throws(dest), "A", lease=600.0)
    report = broken.run_once(t0 + timedelta(seconds=1))
    assert report.started == 0 and report.step_failures == 4
    assert all(lease == 0 and failures == 1 and "boom" in error
               for failures, lease, _, error in rows(svc).values())
    # nothing succeeded there: the schedules are not put off, and another takes them now
    other = scheduler(svc, dest, "B", lease=600.0).run_once(t0 + timedelta(seconds=1))
    assert other.schedules == 4 and other.started >= 4 and other.errors == []
    assert all(failures == 0 for failures, *_ in rows(svc).values())  # a success resets
    assert {w.split("-act-")[0] for w in once_each(svc, dest)} == {f"s{k}" for k in range(4)}


def test_a_poison_schedule_backs_off_alone_while_the_rest_of_its_batch_runs(world):
    svc, dest = world
    t0 = max(create(svc, s) for s in ("p", "s0", "s1", "s2", "s3"))
    cursor = {s: svc.load.source(NS, s).state.cursor for s in names(svc)}
    runner = Throws(dest, bad=lambda r: r.workflow_id.startswith("p-act-"))
    passes, tried = 40, 0
    for k in range(1, passes + 1):
        now = t0 + timedelta(seconds=k)
        report = scheduler(svc, runner, "A", lease=600.0).run_once(now)
        assert report.started >= 4, (k, report)  # every other schedule's time, each pass
        tried += any("p" in call for call in runner.calls)
        runner.calls.clear()
        failures, lease, due_us, error = rows(svc)["p"]
        assert failures >= 1 and lease == 0 and "boom: the runner threw" in error
        assert all(r[0] == 0 for s, r in rows(svc).items() if s != "p")
    # looked at after 1, 2, 4, 8, 16 s... (not at every pass), and put off past the last
    assert 4 <= tried <= 10 and rows(svc)["p"][0] == tried
    assert due_us > to_us(now)
    for s in ("s0", "s1", "s2", "s3"):
        assert svc.load.source(NS, s).state.issued == []
    runner.bad = lambda r: False  # the poison is gone: its owed times start, none lost
    end = now + timedelta(seconds=MAX_BACKOFF)
    assert scheduler(svc, runner, "A", lease=600.0).run_once(end).started >= passes
    assert rows(svc)["p"][0] == 0
    started = [w.split("-act-")[0] for w in once_each(svc, dest)]  # each once, checker clean
    spec = make_spec(intervals=[(1, 0)])
    for s in names(svc):
        parse = svc.load.source(NS, s).state.cursor
        assert started.count(s) == len(times_between(spec, _t(cursor[s]), _t(parse)))
    assert _t(svc.load.source(NS, "p").state.cursor) == end


def test_backoff_is_exponential_capped_and_spares_what_an_unhealthy_scheduler_fails():
    assert [backoff_seconds(n, blamed=True) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff_seconds(10_000, blamed=True) == MAX_BACKOFF
    assert [backoff_seconds(n, blamed=False) for n in (1, 2, 3, 4)] == [0.0, 0.0, 1.0, 2.0]



def test_a_failing_schedule_is_on_call_and_in_the_metrics_read_from_a_fresh_process(
        file_store_url):
    dest = SimulatedDestination()
    with open_service(file_store_url, dest) as svc:
        t0 = max(create(svc, s) for s in ("p", "s0"))
        runner = Throws(dest, bad=lambda r: r.workflow_id.startswith("p-act-"))
        for k in (1, 2):
            scheduler(svc, runner, "A", lease=600.0).run_once(t0 + timedelta(seconds=k))
        [item] = svc.oncall_doc(900)["schedules"]  # the HTTP document
        assert (item["namespace"], item["schedule_id"], item["failures"]) == (NS, "p", 2)
        assert "boom: the runner threw" in item["last_error"] and item["next_look"]
    doc = json.loads(_cli(file_store_url, "oncall", "--json").stdout)
    [item] = doc["schedules"]
    assert (item["schedule_id"], item["failures"], item["category"]) == ("p", 2, "step_failing")
    assert "boom: the runner threw" in item["last_error"]
    text = _cli(file_store_url, "oncall").stdout
    assert f"{NS}/p (failed 2 in a row" in text and "boom: the runner threw" in text
    metrics = _cli(file_store_url, "metrics").stdout
    assert "schedfence_schedules_step_failing 1.0" in metrics
    [series] = [line for line in metrics.splitlines()
                if line.startswith("schedfence_schedules_step_failing_by_error{")]
    assert f'namespace="{NS}"' in series and "boom: the runner threw" in series
    assert series.endswith(" 1.0")


def _cli(store: str, *args: str):
    done = subprocess_cli(store, *args)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return done


def test_beside_a_scheduler_failing_every_pass_another_starts_each_time_within_a_lease(
        pg_store):
    lease, seconds = 10.0, 22.0  # the bound is the lease, chosen generous
    dest = SimulatedDestination()
    with open_service(pg_store, dest) as svc:
        cursors = {f"s{k}": create(svc, f"s{k}") for k in range(8)}
        stop, reports = threading.Event(), {"A": [], "B": []}

        def run(holder: str, runner) -> None:
            sched = Scheduler(svc.load, runner, ScheduleDue(
                svc.views.engine, svc.app.recorder, lease_seconds=lease), holder=holder)

            def one_pass():
                report = sched.run_once()
                reports[holder].append(report)
                return report
            run_until_stopped(one_pass, stop, 0.2, lambda report: None)
        threads = [threading.Thread(target=run, args=("A", Throws(dest))),
                   threading.Thread(target=run, args=("B", dest))]
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
        end = datetime.now(timezone.utc)
        started = [w for w in once_each(svc, dest)]  # each once, checker clean
        spec = make_spec(intervals=[(1, 0)])
        for sid, cursor in cursors.items():
            owed = {f"{sid}-act-{t.strftime('%Y-%m-%dT%H:%M:%SZ')}"
                    for t in times_between(spec, cursor, end - timedelta(seconds=lease))}
            assert owed and owed <= set(started), sid
        lags = [(e.timestamp - _t(e.nominal)).total_seconds()
                for e in map(svc.app.mapper.to_domain_event,
                             svc.app.notifications((ActionStarted.TOPIC,)))]
        assert lags and max(lags) <= lease, max(lags)
        assert sum(r.step_failures for r in reports["A"]) > 0  # A took and failed some
        assert sum(r.started for r in reports["A"]) == 0


def test_the_web_oncall_page_lists_a_failing_schedule_with_its_error(tmp_path):
    from fastapi.testclient import TestClient
    from tests.infra.web.fake_app import READER_TOKEN, make_app
    from tests.infra.web.scrape import read
    dest = SimulatedDestination()
    with open_service(f"sqlite:///{tmp_path / 'store.db'}", dest) as svc:
        t0 = max(create(svc, s) for s in ("p", "s0"))
        runner = Throws(dest, bad=lambda r: r.workflow_id.startswith("p-act-"))
        scheduler(svc, runner, "A", lease=600.0).run_once(t0 + timedelta(seconds=1))
        client = TestClient(make_app(svc), headers={"Authorization": f"Bearer {READER_TOKEN}"})
        response = client.get("/ui/")
        assert response.status_code == 200
        shown = read(response.text)
        assert "step failing" in shown.text and "boom: the runner threw" in shown.text
        assert (f"/ui/schedule?namespace={NS}&schedule=p", f"{NS}/p") in shown.links
        assert "Nothing needs an operator" not in shown.text


def test_a_due_table_of_an_older_release_gets_the_failure_columns_on_first_use(store_url):
    """A store whose due index an older release made (no failure columns): a scheduler of
    this release adds them on its first pass, and a read before that finds no failing one."""
    dest = SimulatedDestination()
    with open_service(store_url, dest) as svc:
        t0 = create(svc, "p")
        with svc.views.engine.begin() as conn:  # the older release's table
            conn.exec_driver_sql(
                "CREATE TABLE schedfence_schedule_due (aggregate_id VARCHAR(36) PRIMARY KEY, "
                "version INTEGER NOT NULL, due_us BIGINT, holder VARCHAR(300) NOT NULL, "
                "lease_us BIGINT NOT NULL)")
            conn.exec_driver_sql("CREATE INDEX schedfence_schedule_due_at ON "
                                 "schedfence_schedule_due (due_us)")
        assert ScheduleDue(svc.views.engine, svc.app.recorder).failing() == []
        runner = Throws(dest, bad=lambda r: r.workflow_id.startswith("p-act-"))
        report = scheduler(svc, runner, "A", lease=600.0).run_once(t0 + timedelta(seconds=1))
        assert report.step_failures == 1
        [row] = ScheduleDue(svc.views.engine, svc.app.recorder).failing()
        assert row.failures == 1 and "boom" in row.error


def test_a_pass_that_cannot_record_a_failure_still_gives_its_leases_back(world, monkeypatch):
    """Where even the failure's bookkeeping fails (the store lost mid-pass), the pass fails,
    and what it still leased is given back as far as the store lets it: not kept for the
    lease's length."""
    svc, dest = world
    t0 = max(create(svc, f"s{k}") for k in range(4))
    broken = scheduler(svc, Throws(dest), "A", lease=600.0)
    monkeypatch.setattr(broken.due, "fail", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        broken.run_once(t0 + timedelta(seconds=1))
    assert all(lease == 0 for _, lease, _, _ in rows(svc).values())
    assert scheduler(svc, dest, "B", lease=600.0).run_once(t0 + timedelta(seconds=1)) \
        .schedules == 4
