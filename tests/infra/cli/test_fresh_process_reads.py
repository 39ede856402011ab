"""Every read, from a process that imported nothing but its own command (issue 28, item 1).

A stored record names its class by topic, and a process finds the class only once it has
imported the module defining it; the CLI imports per command. So reads are checked here as
operators run them: records of every kind are written by the normal commands, each a process
of its own (schedule lifecycle and runs, rollback, forward, batch jobs, recovery of a legacy
and of a parked migration, a promotion after failover; snapshots on), then every read command
runs as its own process with ``--json`` and must exit 0 with real content, and one ``serve``
process started after the writes must answer every GET route of the app with 200.
"""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

import httpx
import pytest

from schedfence.domain.destination_id import describe_binding
from schedfence.domain.ids import destination_workflow_id, schedule_aggregate_id
from schedfence.domain.topics import STORED_TOPICS
from schedfence.infra.http.app import create_app
from schedfence.infra.http.auth import Tokens
from schedfence.infra.application.service import open_service
from tests.browser.served import schedfence_serve
from tests.infra.cli.cli_runs import ROOT, subprocess_cli

NS = "default"
WHO = ("--actor", "ann", "--reason", "INC-1")
KEYS = ("runs", "back", "job1", "legacy", "foreign")
MIGRATED = ("back", "job1", "legacy", "foreign")  # keys with a rollback (replayable)
PARALLEL = 4  # processes at a time (each is mostly interpreter start-up)
TOKEN = ("rita", "reader", "reader-secret-0123456789")
PLANT = """
import sys
from schedfence.infra.demo.legacy import plant_legacy_v1
from schedfence.infra.application.service import open_service
from tests.helpers import start_foreign
with open_service(sys.argv[1], "sim") as service:
    plant_legacy_v1(service, "default", "legacy")  # the v1 record an older release wrote
    start_foreign(service.destination, "foreign")  # somebody else's run at its workflow id
"""


@pytest.fixture(autouse=True)
def snapshots_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process writes and reads snapshots too (every third version)."""
    monkeypatch.setenv("SCHEDFENCE_SNAPSHOT_INTERVAL", "3")


def cli(store: str, *args: str) -> Any:
    """One command in a process of its own; its JSON answer."""
    done = subprocess_cli(store, *args, "--json")
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr, (args, done.stderr)
    return json.loads(done.stdout)


def _chains(now: datetime) -> list[list[tuple[Any, ...]]]:
    """Two independent histories, each in order: a schedule's lifecycle and runs (no
    migration), and the migrations (each ``migrate`` that waits drives every open migration,
    so they go one after the other). A step is a command line, or ``(PLANT,)``."""
    def at(minutes: int) -> str:
        return (now - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    runs = ("schedule", "create", NS, "runs", "--interval", "10m", "--workflow-type", "W",
            "--task-queue", "q", "--input", '{"n": 1}', "--start", at(60), "--notes", "first")
    return [
        [runs, ("schedule", "pause", NS, "runs"), ("schedule", "unpause", NS, "runs"),
         ("schedule", "notes", NS, "runs", "second"), ("schedule", "trigger", NS, "runs"),
         ("schedule", "backfill", NS, "runs", "--start", at(50), "--end", at(40)),
         ("schedule", "update", NS, "runs", "--interval", "15m", "--workflow-type", "W",
          "--task-queue", "q", "--limit", "50"),
         ("scheduler", "--once"), ("schedule", "delete", NS, "runs"),
         ("schedule", "create", NS, "runs")],
        [("schedule", "create", NS, "back"), ("rollback", NS, "back", "--request-id", "R1"),
         ("migrate", "--namespace", NS, "--schedule-id", "back", "--to", "workflow",
          "--job-id", "JB"),  # drives the rollback to completed
         ("forward", NS, "back", "--request-id", "F1"),
         ("schedule", "create", NS, "legacy"), ("schedule", "create", NS, "foreign"), (PLANT,),
         ("recover", "adopt", NS, "legacy", "--request-id", "NEW-1", *WHO),
         ("migrate", "--namespace", NS, "--schedule-id", "foreign", "--to", "workflow",
          "--job-id", "JF"),  # its migration parks on the foreign run
         ("recover", "abort", NS, "foreign", *WHO),
         ("schedule", "create", NS, "job1"),
         ("migrate", "--namespace", NS, "--match", "job*", "--to", "workflow", "--job-id", "J",
          "--no-wait")],  # left pending: issue 28's case, for the readers
    ]


def _run_chain(store: str, chain: list[tuple[Any, ...]]) -> None:
    for step in chain:
        if step[0] == PLANT:
            done = subprocess.run([sys.executable, "-c", PLANT, store], cwd=ROOT,
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
        else:
            cli(store, *step)


def write_every_kind(store: str) -> None:
    chains = _chains(datetime.now(timezone.utc))
    with ThreadPoolExecutor(PARALLEL) as pool:
        for done in [pool.submit(_run_chain, store, chain) for chain in chains]:
            done.result()
    assert cli(store, "promote", *WHO)["epoch"] == 1
    audited = subprocess_cli(store, "owners", "--namespace", NS, "--json")  # records one
    assert audited.returncode in (0, 1) and json.loads(audited.stdout)["rows"], audited.stderr
    with open_service(store, "sim") as service:
        topics = {note.topic for note in service.app.notifications()}
        snapshots = list(service.app.snapshots.get(schedule_aggregate_id(NS, "runs", 1)))
    assert snapshots and {s.originator_version % 3 for s in snapshots} == {0}  # and read
    # Every family of the registry was written (schedule, key, runs, migration, forward,
    # job, store epoch, ownership audit), including the v1 legacy record and the job's
    # definition.
    families = {t.rsplit(".", 1)[0] for t in STORED_TOPICS if t.count(".") > 1}
    assert families == {t.rsplit(".", 1)[0] for t in topics}
    assert {"schedfence.job.Defined", "schedfence.schedule.Triggered",
            "schedfence.schedule.BackfillRequested", "schedfence.schedule.ProgramUpdated",
            "schedfence.schedule.ActionStarted", "schedfence.migration.LegacyMigrationAdopted",
            "schedfence.migration.MigrationAborted", "schedfence.forward.ForwardCompleted",
            "schedfence.store_epoch.FailoverRecorded"} <= topics


SIM = {"kind": "sim", "address": "store", "namespace": NS, "cluster_id": ""}  # a binding
READS: dict[str, Callable[[Any], bool]] = {
    "verify": lambda doc: doc["ok"] is True and doc["migrations"] == 4 and doc["events"] > 50,
    "list": lambda doc: {r["schedule_id"] for r in doc["schedules"]} == set(KEYS),
    f"status {NS} legacy": lambda doc: doc["migration"]["park_reason"] == "adopted_unverified"
    and doc["migration"]["destination_binding"] == SIM,  # bound by the adoption
    f"status {NS} foreign": lambda doc: doc["migration"]["destination_binding"] == SIM
    and doc["migration"]["destination"] == "sim",
    f"history {NS} runs": lambda doc: {"Triggered", "ProgramUpdated", "IncarnationStarted"}
    <= {e["short_type"] for e in doc["events"]},
    f"history {NS} legacy": lambda doc: [e["data"]["destination"] for e in doc["events"]
                                         if e["short_type"] in ("RequestIdAssigned",
                                                                "LegacyMigrationAdopted")]
    == [None, SIM],  # the v1 record: unknown; the adoption bound it
    "audit --type schedfence.job.Defined": lambda doc: len(doc["entries"]) == 3
    and {e["destination"] for e in doc["entries"]} == {"sim"},
    "audit --type RequestIdAssigned --type ForwardRequested": lambda doc: {
        e["destination"] for e in doc["entries"]} == {"sim", describe_binding(None)},
    "oncall": lambda doc: "legacy" in json.dumps(doc["items"]),
    "stats": lambda doc: doc["migrations"] == 4 and doc["by_state"]["completed"] == 1,
    "migrations": lambda doc: len(doc["migrations"]) == 4,
    f"replay {NS} back": lambda doc: doc["request_id"] == "F1" and len(doc["steps"]) >= 3
    and doc["state"]["destination"] == SIM,
    f"replay {NS} foreign": lambda doc: doc["state"]["destination"] == SIM,
}


def read_everything(store: str) -> dict[str, Any]:
    """Each read command in its own process, a few at a time; then the two that write (the
    projection's tables, the worker's steps), one after the other."""
    with ThreadPoolExecutor(PARALLEL) as pool:
        docs = dict(zip(READS, pool.map(lambda line: cli(store, *line.split()), READS)))
    for line, holds in READS.items():
        assert holds(docs[line]), (line, json.dumps(docs[line])[:3000])
    rebuilt = cli(store, "projection", "rebuild")
    assert rebuilt["applied"] == rebuilt["log_position"] > 50
    worked = cli(store, "worker", "--until-idle", "--retry-for", "0", "--claim-grace", "0")
    assert worked["drained"] is True and sum(worked["migrations"].values()) == 4
    assert worked["events_written"] > 0  # it reconciled the pending job's migration
    return docs


def _get_paths(routes: list[Any], prefix: str = "") -> list[str]:
    """The GET paths of an app's routes, through the routers it includes."""
    paths = []
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            paths += _get_paths(included.routes, prefix + route.include_context.prefix)
        elif "GET" in (getattr(route, "methods", None) or ()):
            paths.append(prefix + route.path)
    return paths


def app_get_paths() -> set[str]:
    with open_service("sqlite:///:memory:", "sim") as service:
        return set(_get_paths(create_app(service, Tokens([TOKEN])).routes))


def calls(docs: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    """Each GET route with the queries it is called with: real ids of the store."""
    keys = [{"namespace": NS, "schedule_id": k} for k in KEYS]
    pages = [{"namespace": NS, "schedule": k} for k in KEYS]
    mids = {m["schedule_id"]: m["migration_id"] for m in docs["migrations"]["migrations"]}
    back = {"namespace": NS, "schedule": "back"}
    run_id = next(m["destination_first_run_id"] for m in docs["migrations"]["migrations"]
                  if m["schedule_id"] == "back")
    return {
        "/openapi.json": [{}], "/healthz": [{}], "/metrics": [{}],
        "/v1/schedules": [{}, {"namespace": NS, "limit": "2"}],
        "/v1/schedule": keys, "/v1/schedule/describe": keys, "/v1/schedule/history": keys,
        "/v1/schedule/replay": [{"namespace": NS, "schedule_id": k} for k in MIGRATED],
        "/v1/verify": [{}], "/v1/stats": [{}], "/v1/oncall": [{}], "/v1/projection": [{}],
        "/v1/audit": [{}, {"type": "schedfence.job.Defined"}, {"schedule": f"{NS}/back"}],
        "/v1/migrations": [{}, {"state": "parked"}],
        "/v1/forward": [{"namespace": NS, "schedule_id": "back", "request_id": "F1"}],
        "/v1/jobs": [{}], "/v1/job": [{"job_id": j} for j in ("J", "JB", "JF")],
        "/v1/owners": [{"namespace": NS}, {"namespace": NS, "limit": "2", "drift_only": "1"}],
        "/ui": [{}], "/ui/": [{}, {"owner": "temporal"}, {"direction": "forward"},
                              {"state": "parked", "key": "for", "page": "1"}],
        "/ui/schedule": pages, "/ui/login": [{}],
        "/ui/jobs": [{}], "/ui/job": [{"id": j} for j in ("J", "JB", "JF")],
        "/ui/migration": [{"namespace": NS, "schedule": k, "id": mids[k]} for k in MIGRATED],
        "/ui/run": [dict(back, id=run_id)],
        "/ui/workflow": [dict(back, id=destination_workflow_id("back"))],
        "/ui/static/page.css": [{}],
    }


def get_every_route(store: str, docs: dict[str, Any], workdir: Path) -> int:
    table = calls(docs)
    assert set(table) == app_get_paths()  # a new GET route must be added to the table
    answered = 0
    with schedfence_serve(store, [TOKEN], workdir, "--rate-limit", "0") as base, \
            httpx.Client(base_url=base, timeout=30, follow_redirects=True,
                         headers={"Authorization": f"Bearer {TOKEN[2]}"}) as http:
        for path, queries in table.items():
            for query in queries:
                answer = http.get(path, params=query)
                assert answer.status_code == 200, (path, query, answer.text[:2000])
                if answer.headers["content-type"].startswith("application/json"):
                    assert answer.json()  # real content, not an empty document
                answered += 1
        assert http.get("/v1/verify").json()["ok"] is True
    return answered


def test_every_read_in_a_fresh_process_and_every_get_route(pg_store: str,
                                                            tmp_path: Path) -> None:
    write_every_kind(pg_store)
    docs = read_everything(pg_store)
    assert get_every_route(pg_store, docs, tmp_path) > 40


ITEM_1_READS = ("verify", "list", "oncall", "stats", "migrations", "audit")


def test_a_job_requested_without_waiting_stops_no_other_process(tmp_path: Path) -> None:
    """Issue 28, item 1, as reported: after ``migrate --no-wait`` every other command, each
    in a process that never imported the jobs module, reads the job's records."""
    store = f"sqlite:///{tmp_path / 'item1.db'}"
    cli(store, "schedule", "create", "ns", "a")
    job = cli(store, "migrate", "--namespace", "ns", "--to", "workflow", "--job-id", "J",
              "--no-wait")
    assert job["requested"] == 1
    with ThreadPoolExecutor(PARALLEL) as pool:
        docs = dict(zip(ITEM_1_READS, pool.map(lambda c: cli(store, c), ITEM_1_READS)))
    assert docs["verify"]["ok"] is True and docs["stats"]["by_state"]["pending"] == 1
    assert [r["schedule_id"] for r in docs["list"]["schedules"]] == ["a"]
    assert cli(store, "projection", "rebuild")["applied"] == docs["verify"]["events"]
    assert cli(store, "worker", "--until-idle")["migrations"] == {"completed": 1}
