"""Starts the Temporal server made after its schedule was deleted by hand (issue 45, item 4), on
a real dev server: the settle reads them from the server's listing and records them
(BoundarySettled ``after_delete``), ``verify`` names them, and ``verify --against-destination``
names the first, both from a fresh process.

The server's starts after the delete are constructed, deterministically: after the delete,
two ``<prefix>-<time>`` workflows at spec times after it are started by hand, standing for
the server's (whether its scheduler starts one then depends on how long its workflow task
runs on a loaded machine). Before the fix the settle recorded "nothing at or after the
delete" and ``verify`` was clean.

The race itself, a delete during the scheduler workflow's first, long workflow task (a gap
backfill of 1200 times), is run too. The server starts only part of the gap before the
delete cuts it (measured here: 10 of 1200; before the fix the settle started only the
boundary's 2 and ``verify --against-destination`` named the other 1188 as never started):
the settle now starts every owed time before the delete that has no run, and the verdict,
checked against a count made from the listing here, is exactly once."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

from schedfence.domain.source.action import make_action, make_policies, nominal_text, parse_nominal
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env, wait_for  # noqa: F401
from tests.e2e.test_temporal_handover_e2e import run_source
from tests.helpers import Crash

ROOT = Path(__file__).resolve().parents[2]
EVERY = 2


def crash_before_settle(point: str) -> None:
    if point == "settle.before_call":
        raise Crash(point)


def cli(env: TemporalEnv, store: str, *args: str) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                           "--destination", env.url, *args, "--json"], cwd=ROOT, timeout=120,
                          capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def between_ticks() -> None:
    """Sleep to the middle of a spec interval: a delete then races no tick of the server's."""
    now = time.time()
    time.sleep((EVERY / 2 - now % EVERY) % EVERY)


def test_starts_after_a_hand_delete_are_recorded_and_named(temporal_env: TemporalEnv,
                                                           tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    sid, wtype, prefix = f"after-{tag}", f"After{tag}", f"act-{tag}"
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    with open_service(store, temporal_env.destination, worker_id="e2e-1",
                      crash_hook=crash_before_settle) as svc:
        svc.create_schedule(NS, sid, spec=make_spec(intervals=[(EVERY, 0)]), action=make_action(
            workflow_type=wtype, task_queue=f"q-{tag}", workflow_id=prefix,
            execution_timeout=1), policies=make_policies(overlap="allow_all"))
        run_source(svc, 2.0)
        time.sleep(3.0)  # the source's scheduler is down: a gap the create backfills
        assert svc.rollback(NS, sid, f"R-{tag}").outcome == "accepted"
        try:
            svc.run_until_idle()
        except Crash:
            pass
        assert svc.migration(NS, sid).state == "receipted"
    time.sleep(3.0)  # the server runs its own times
    between_ticks()
    temporal_env.destination.delete_schedule(NS, sid)  # the user deletes it
    deleted_by = datetime.now(timezone.utc)
    # Standing for the server's starts after the delete: two later spec times, started at
    # their action workflow ids as its scheduler would.
    base = deleted_by.replace(microsecond=0) + timedelta(seconds=4)
    after = [base + timedelta(seconds=EVERY * i - base.second % EVERY) for i in (1, 2)]
    for t in after:
        temporal_env.ops.run(lambda t=t: temporal_env.ops.client.start_workflow(
            wtype, id=f"{prefix}-{nominal_text(t)}", task_queue=f"q-{tag}",
            execution_timeout=timedelta(seconds=1)))
    with open_service(store, temporal_env.destination, worker_id="e2e-2",
                      claim_grace=2.0) as svc:
        svc.run_until_idle(retry_for=90.0)  # the settle waits until the delete is quiet
        assert svc.migration(NS, sid).state == "completed"
        settled, = [e.data for e in svc.history(NS, sid) if e.type.endswith("BoundarySettled")]
    assert parse_nominal(settled["deleted_at"]) <= deleted_by
    assert settled["after_delete"] == [nominal_text(t) for t in after], settled
    rc, doc = cli(temporal_env, store, "verify")
    assert rc == 1, doc
    [v] = doc["violations"]
    assert v["invariant"] == "I21" and f"started 2 action(s) at or after its schedule was " \
        f"deleted at {settled['deleted_at']} (first {nominal_text(after[0])})" in v["message"]
    rc, doc = cli(temporal_env, store, "verify", "--against-destination", "--namespace", NS,
                  "--schedule", sid, "--lag", "0")
    assert rc == 1 and doc["schedules"] == 1, doc
    assert doc["first"] == {**doc["first"], "how": "unexpected", "schedule_id": sid,
                            "time": nominal_text(after[0])}, doc
    assert doc["violations"][0]["unexpected"] == [nominal_text(t) for t in after], doc
    assert doc["violations"][0]["missing"] == [] and doc["violations"][0]["twice"] == [], doc


def test_a_delete_during_the_gap_backfill_is_judged_as_the_server_shows_it(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    sid, wtype, prefix = f"cut-{tag}", f"Cut{tag}", f"act-{tag}"
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    with open_service(store, temporal_env.destination, worker_id="e2e-1",
                      crash_hook=crash_before_settle) as svc:
        svc.create_schedule(NS, sid, now=datetime.now(timezone.utc) - timedelta(minutes=20),
                            spec=make_spec(intervals=[(1, 0)]), action=make_action(
                                workflow_type=wtype, task_queue=f"q-{tag}",
                                workflow_id=prefix, execution_timeout=1),
                            policies=make_policies(overlap="allow_all"))
        assert svc.rollback(NS, sid, f"R-{tag}").outcome == "accepted"
        try:
            svc.run_until_idle()
        except Crash:
            pass
        assert svc.migration(NS, sid).state == "receipted"
    temporal_env.destination.delete_schedule(NS, sid)  # during the create's gap backfill
    with open_service(store, temporal_env.destination, worker_id="e2e-2",
                      claim_grace=2.0) as svc:
        svc.run_until_idle(retry_for=90.0)
        assert svc.migration(NS, sid).state == "completed"
        settled, = [e.data for e in svc.history(NS, sid) if e.type.endswith("BoundarySettled")]
        cursor = parse_nominal(svc.load.migration(svc.migration(NS, sid).migration_id)
                               .state.handover["cursor"])
    deleted = parse_nominal(settled["deleted_at"])
    owed = {cursor + timedelta(seconds=i) for i in range(1, int((deleted - cursor)
                                                                .total_seconds()) + 1)}
    owed = {t for t in owed if t < deleted}  # every second, up to the delete

    def times(ids: list[str]) -> set[datetime]:
        return {parse_nominal(w.removeprefix(prefix + "-")) for w in ids}
    ids = wait_for(lambda: temporal_env.destination.action_starts(NS, [prefix]),
                   lambda ids: owed <= times(ids), 60.0, "every owed time started")
    listed = Counter(parse_nominal(w.removeprefix(prefix + "-")) for w in ids)
    missing = sorted(owed - set(listed))
    expected = {"twice": sum(1 for n in listed.values() if n > 1), "missing": len(missing),
                "unexpected": sum(1 for t in listed if t not in owed)}
    print(f"the server and the settle started {len(listed)} of {len(owed)} owed times")
    rc, doc = cli(temporal_env, store, "verify", "--against-destination", "--namespace", NS,
                  "--schedule", sid, "--lag", "0")
    assert doc["listed"] == len(ids) and doc["schedules"] == 1, doc
    assert expected == {"twice": 0, "missing": 0, "unexpected": 0}, expected
    assert rc == 0 and doc["ok"] is True, doc
