"""``schedfence verify --against-destination`` and ``verify --also``, from a fresh process, on a
SQLite store whose simulator (``--destination sim``) is kept in it (issue 45, items 4 and 5).

A stale copy: the store is copied before the fence, the original hands the schedule over,
and the copy's source keeps running: its starts double the destination's. ``verify --also``
(before: exit 0) and ``verify --against-destination --also`` name the first doubled time.
The listing oracle alone, on the original: exactly once; a start at the action's id removed
from or added to the server's record is named (missing, twice) with its time."""
from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

from schedfence.domain.source.action import make_action, make_policies, nominal_text
from schedfence.domain.source.spec import make_spec
from schedfence.domain.ports import StartWorkflow
from schedfence.infra.application.service import open_service
from tests.infra.cli.cli_runs import subprocess_cli

NS, SID, PREFIX = "ns", "s", "act"
MINUTE = timedelta(minutes=1)


def cli(store: str, *args: str) -> tuple[int, dict]:
    proc = subprocess_cli(store, "--destination", "sim", "verify", *args, "--json")
    assert proc.returncode in (0, 1) and not proc.stderr.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def text(store: str, *args: str) -> tuple[int, str]:
    proc = subprocess_cli(store, "--destination", "sim", "verify", *args)
    return proc.returncode, proc.stdout + proc.stderr


def ran_then_copied(tmp_path: Path) -> tuple[str, str, datetime]:
    """A schedule every minute from ten minutes ago, three source starts, the store copied
    (the copy: stale, from before the fence), then handed over to the simulator."""
    main, copy = tmp_path / "main.db", tmp_path / "copy.db"
    t0 = datetime.now(timezone.utc).replace(second=0, microsecond=0) - 10 * MINUTE
    with open_service(f"sqlite:///{main}", "sim", worker_id="w", claim_grace=0,
                      retry_for=0) as svc:
        svc.create_schedule(NS, SID, now=t0, spec=make_spec(intervals=[(60, 0)]),
                            action=make_action(workflow_type="W", task_queue="q",
                                               workflow_id=PREFIX),
                            policies=make_policies(overlap="allow_all"))
        svc.run_scheduler(now=t0 + 3 * MINUTE)
    shutil.copyfile(main, copy)
    with open_service(f"sqlite:///{main}", "sim", worker_id="w", claim_grace=0,
                      retry_for=0) as svc:
        assert svc.rollback(NS, SID, request_id="r1", actor="admin").outcome == "accepted"
        svc.run_until_idle(retry_for=0)
        assert svc.migration(NS, SID).state == "completed"
    return f"sqlite:///{main}", f"sqlite:///{copy}", t0


def test_a_stale_copys_source_starts_are_named_by_verify_also(tmp_path: Path) -> None:
    main, copy, t0 = ran_then_copied(tmp_path)
    assert cli(main, "--also", copy)[0] == 0  # the copy has not run: nothing doubled
    assert cli(main, "--against-destination")[0] == 0
    with open_service(copy, "sim", worker_id="stale", retry_for=0) as svc:
        svc.run_scheduler(now=t0 + 6 * MINUTE)  # the stale copy's source keeps running
    assert cli(main)[0] == 0  # each store alone is clean
    assert cli(copy)[0] == 0
    rc, doc = cli(main, "--also", copy)
    assert rc == 1, doc
    [v] = [v for v in doc["violations"] if v["invariant"] == "I21"]
    first = (t0 + 4 * MINUTE).isoformat()
    assert f"{NS}/{SID} incarnation 1: nominal time {first} (auto) started by the other " \
           "store's source after this store handed the schedule to the destination" \
           in v["message"] and "3 such time(s)" in v["message"], v
    rc, doc = cli(main, "--against-destination", "--also", copy)
    assert rc == 1 and doc["violations"] == [] and len(doc["across"]) == 1, doc
    rc, out = text(main, "--against-destination", "--also", copy)
    assert rc == 1 and first in out.splitlines()[0] and "across the stores" in out, out


def test_the_listing_oracle_names_the_first_time_lost_or_doubled(tmp_path: Path) -> None:
    main, _, t0 = ran_then_copied(tmp_path)
    rc, doc = cli(main, "--against-destination", "--namespace", NS, "--schedule", SID)
    assert rc == 0 and doc["schedules"] == 1 and doc["listed"] >= 10, doc
    doubled = t0 + 2 * MINUTE  # a source start, started again at its id by someone else
    wid = f"{PREFIX}-{nominal_text(doubled)}"
    with open_service(main, "sim", worker_id="w") as svc:
        svc.destination.complete(NS, wid)
        svc.destination.start_workflow(StartWorkflow(
            namespace=NS, workflow_id=wid, request_id="x",
            workflow_type="W", task_queue="q", id_reuse_policy="allow_duplicate"))
    rc, doc = cli(main, "--against-destination", "--namespace", NS)
    assert rc == 1 and doc["first"]["how"] == "twice", doc
    assert doc["first"]["time"] == nominal_text(doubled) and doc["first"]["schedule_id"] == SID
    rc, out = text(main, "--against-destination")
    assert rc == 1 and out.splitlines()[0].endswith(
        f"first: {NS}/{SID}: nominal time {nominal_text(doubled)} started twice"), out
    # another namespace's or schedule's listing judges nothing of this one
    assert cli(main, "--against-destination", "--namespace", "other")[1]["schedules"] == 0


def test_refusals_are_one_line(tmp_path: Path) -> None:
    main, _, _ = ran_then_copied(tmp_path)
    for args, said in ((["--schedule", SID], "--namespace and --schedule go with"),
                       (["--against-destination", "--schedule", SID], "--schedule needs")):
        rc, out = text(main, *args)
        assert rc != 0 and said in out and "Traceback" not in out, out
