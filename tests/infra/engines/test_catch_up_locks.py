"""A catch-up of 20,000 owed times on the shared simulator kept in PostgreSQL: a
batch's starts used to take one advisory lock per workflow id in one transaction, and the
server's lock table ran out ("out of shared memory"); each failed pass then owed more. The
simulator now makes a batch call's starts ``START_CHUNK`` to a transaction, and every time
starts once: the runner's own log and the checker agree."""
from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.spec import make_spec, times_between
from schedfence.infra.adapters.destination.shared_sim import SharedSimDestination
from schedfence.infra.application.service import open_service
from tests import pgtools

NS, SCHEDULES, OWED = "ns", 20, 1000  # 20,000 owed times: one pass takes them all


def test_a_catch_up_of_over_ten_thousand_owed_times_completes(pg_store, pg_database):
    dest = SharedSimDestination("sim+" + pgtools.new_schema_url(pg_database))
    try:
        with open_service(pg_store, dest) as svc:
            for k in range(SCHEDULES):
                svc.create_schedule(NS, f"s{k}", spec=make_spec(intervals=[(1, 0)]),
                                    action=make_action(workflow_type="W", task_queue="q",
                                                       workflow_id=f"s{k}-act"),
                                    policies=make_policies(overlap="allow_all"))
            cursors = {k: datetime.fromisoformat(svc.load.source(NS, f"s{k}").state.cursor
                                                 .replace("Z", "+00:00"))
                       for k in range(SCHEDULES)}
            now = max(cursors.values()) + timedelta(seconds=OWED)
            started = 0
            for _ in range(6):  # passes until nothing is left to start
                report = svc.run_scheduler(now=now)
                assert report.errors == []
                started += report.started
                if report.started == 0:
                    break
            expected = {f"s{k}-act-{t.strftime('%Y-%m-%dT%H:%M:%SZ')}"
                        for k in range(SCHEDULES)
                        for t in times_between(make_spec(intervals=[(1, 0)]), cursors[k], now)}
            assert len(expected) >= 10_000 and started == len(expected)
            created = Counter(r.workflow_id for r, outcome in dest.start_log(NS)
                              if outcome == "created")
            assert set(created) == expected and set(created.values()) == {1}
            assert all(svc.load.source(NS, f"s{k}").state.issued == []
                       for k in range(SCHEDULES))
            assert svc.verify() == []
    finally:
        dest.close()
