"""Every route of the API through FastAPI's test client, on a SQLite file store: each answers
what the CLI's ``--json`` prints for the same command, and records the token's name as the
actor."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tests.helpers import NS, start_foreign
from tests.infra.cli.cli_runs import ok_json
from tests.infra.http.api import NAMES, Api

KEY = {"namespace": NS, "schedule_id": "nightly"}
PROGRAM = {"spec": {"intervals": [{"every": 3600, "offset": 0}]},
           "action": {"workflow_type": "Report", "task_queue": "reports",
                      "input": {"region": "eu"}},
           "policies": {"overlap": "skip", "catchup_window": 600, "pause_on_failure": False}}


def store_of(api: Api) -> str:
    return str(api.service.app.env.get("SQLITE_DBNAME") and
               f"sqlite:///{api.service.app.env.get('SQLITE_DBNAME')}")


def test_schedule_commands_answer_the_schedule_view(api: Api) -> None:
    created = api.ok("/v1/schedule/create", dict(KEY, notes="pre", **PROGRAM))
    assert created["action"]["workflow_type"] == "Report" and created["notes"] == "pre"
    assert created["policies"]["catchup_window"] == 600
    described = api.read("/v1/schedule/describe", next=3, **KEY)
    assert len(described["next_action_times"]) == 3
    assert described["spec"]["intervals"] == [{"every": 3600, "offset": 0}]
    assert api.ok("/v1/schedule/pause", KEY)["paused"] is True
    assert api.ok("/v1/schedule/unpause", KEY)["paused"] is False
    assert api.ok("/v1/schedule/notes", dict(KEY, notes="two\nlines"))["notes"] == "two\nlines"
    token = api.read("/v1/schedule", **KEY)["schedule"]["conflict_token"]
    updated = api.ok("/v1/schedule/update", dict(KEY, limit=5, conflict_token=token))
    assert updated["remaining_actions"] == 5 and updated["action"] == created["action"]
    assert api.ok("/v1/schedule/update", dict(KEY, limit=None))["remaining_actions"] is None
    assert api.ok("/v1/schedule/trigger", dict(KEY, overlap="allow_all"))["buffered"]
    now = datetime.now(timezone.utc).replace(microsecond=0)
    backfill = api.ok("/v1/schedule/backfill", dict(
        KEY, start=(now - timedelta(hours=3)).isoformat(), end=now.isoformat()))
    assert backfill["backfills"]
    passed = api.ok("/v1/scheduler/pass", role="operator")
    assert passed["destination"] == "sim" and passed["started"] >= 1
    assert api.ok("/v1/schedule/delete", KEY)["closed"] is True


def test_rollback_drain_and_the_views(api: Api) -> None:
    api.ok("/v1/schedule/create", dict(KEY, notes="pre"))
    rolled = api.ok("/v1/rollback", dict(KEY, request_id="R1"))
    assert rolled["outcome"] == "accepted" and rolled["destination"] == "sim"
    drained = api.ok("/v1/worker/drain", {}, role="operator")
    assert drained["drained"] and drained["events_written"] > 0
    assert drained["migrations"] == {"completed": 1} and "error" not in drained
    status = api.read("/v1/schedule", **KEY)
    assert status["migration"]["state"] == "completed" and status["schedule"]["closed"]
    listed = api.read("/v1/schedules")["schedules"]
    assert [(r["schedule_id"], r["migration_state"]) for r in listed] == [("nightly",
                                                                           "completed")]
    events = api.read("/v1/schedule/history", **KEY)["events"]
    assert events[0]["type"].endswith("Created") and any(e["summary"] for e in events)
    replay = api.read("/v1/schedule/replay", **KEY)
    assert replay["ok"] and replay["migration_id"] == rolled["migration_id"]
    assert api.read("/v1/schedule/replay", at=2, **KEY)["version"] == 2
    assert api.read("/v1/verify") == {"ok": True, "events": len(events),
                                      "migrations": 1, "violations": []}
    stats = api.read("/v1/stats")
    assert stats["by_state"]["completed"] == 1 and stats["open"] == 0
    assert api.read("/v1/migrations", state="completed")["migrations"][0]["request_id"] == "R1"
    assert api.read("/v1/oncall", stuck_after=0) == {"stuck_after_seconds": 0, "items": [],
                                                      "forward": [], "ownership": [],
                                                      "schedules": [], "jobs": []}
    projection = api.read("/v1/projection")
    assert projection["projected_through"] == projection["log_position"]
    assert api.ok("/v1/projection/catch-up", role="operator")["applied"] == 0
    assert api.ok("/v1/projection/rebuild")["applied"] == len(events)


def test_the_documents_are_the_clis(api: Api) -> None:
    api.ok("/v1/schedule/create", dict(KEY, **PROGRAM))
    api.ok("/v1/rollback", KEY)
    store = store_of(api)
    for path, args, cli in (
            ("/v1/schedule", KEY, ["status", NS, "nightly"]),
            ("/v1/schedules", {}, ["list"]),
            ("/v1/schedule/history", KEY, ["history", NS, "nightly"]),
            ("/v1/schedule/replay", KEY, ["replay", NS, "nightly"]),
            ("/v1/verify", {}, ["verify"]),
            ("/v1/stats", {}, ["stats"]),
            ("/v1/migrations", {}, ["migrations"])):
        theirs = ok_json(store, *cli)
        mine = api.read(path, **args)
        if path == "/v1/migrations":  # ages move between the two reads
            for doc in (theirs, mine):
                for row in doc["migrations"]:
                    row.pop("age_seconds"), row.pop("idle_seconds")
        assert mine == theirs, path


def test_audit_pages_through_every_event_with_the_token_names_as_actors(api: Api) -> None:
    api.ok("/v1/schedule/create", KEY)
    api.ok("/v1/rollback", dict(KEY, request_id="R1"))
    api.ok("/v1/abort", dict(KEY, reason="changed our minds"), role="operator")
    every = api.read("/v1/audit", schedule=f"{NS}/nightly", limit=1000)
    assert every["next_page_token"] is None and not every["truncated"]
    pages, token = [], None
    while True:
        params = {"schedule": f"{NS}/nightly", "limit": 2}
        page = api.read("/v1/audit", **(params | ({"page_token": token} if token else {})))
        pages += page["entries"]
        token = page["next_page_token"]
        if token is None:
            break
    assert pages == every["entries"] and len(pages) > 2
    actors = {e["actor"] for e in pages if e["aggregate"] == "migration"}
    assert actors == {NAMES["admin"], NAMES["operator"]}
    newest = api.read("/v1/audit", newest_first=True, limit=1, actor=NAMES["operator"])
    assert newest["entries"][0]["type"] == "MigrationAborted"


def test_recovery_of_a_parked_migration_and_promote(api: Api) -> None:
    api.ok("/v1/schedule/create", KEY)
    start_foreign(api.world.dest, "nightly")
    api.ok("/v1/rollback", dict(KEY, request_id="R1"))
    api.ok("/v1/worker/drain", {}, role="operator")
    items = api.read("/v1/oncall")["items"]
    assert [i["migration"]["park_reason"] for i in items] == ["foreign_destination"]
    view = api.ok("/v1/recover/abort", dict(KEY, reason="a foreign run holds the id"),
                  role="operator")
    assert view["state"] == "aborted"
    aborted = [e for e in api.read("/v1/audit", migration=view["migration_id"])["entries"]
               if e["type"] == "MigrationAborted"]
    assert [e["actor"] for e in aborted] == [NAMES["operator"]]
    promoted = api.ok("/v1/promote", {"reason": "drill"})
    assert promoted == {"epoch": 1, "actor": NAMES["admin"], "reason": "drill"}


def test_health_needs_no_token(api: Api) -> None:
    assert api.client.get("/healthz").json() == {"status": "ok"}


def test_every_schedule_change_records_the_token_name_as_its_actor(api: Api) -> None:
    """Each state-changing schedule call names its caller: the token's name, never the body."""
    api.ok("/v1/schedule/create", dict(KEY, notes="pre", **PROGRAM))
    api.ok("/v1/schedule/pause", KEY)
    api.ok("/v1/schedule/unpause", KEY)
    api.ok("/v1/schedule/notes", dict(KEY, notes="n"))
    api.ok("/v1/schedule/update", dict(KEY, limit=5))
    api.ok("/v1/schedule/trigger", KEY)
    now = datetime.now(timezone.utc).replace(microsecond=0)
    api.ok("/v1/schedule/backfill", dict(KEY, start=(now - timedelta(hours=2)).isoformat(),
                                         end=now.isoformat()))
    api.ok("/v1/schedule/delete", KEY)
    entries = api.read("/v1/audit", actor=NAMES["admin"], schedule=f"{NS}/nightly",
                       limit=1000)["entries"]
    assert [e["type"] for e in entries] == [
        "Created", "Paused", "Paused", "NotesUpdated", "ProgramUpdated", "Triggered",
        "BackfillRequested", "Deleted"]
    assert all(e["aggregate"] == "schedule" for e in entries)
    everyone = api.read("/v1/audit", schedule=f"{NS}/nightly", limit=1000)["entries"]
    assert {e["actor"] for e in everyone if e["type"] in ("Paused", "Deleted")} == \
        {NAMES["admin"]}
    bodied = api.post("/v1/schedule/pause", dict(KEY, actor="mallory"))
    assert bodied.status_code == 422  # a body cannot name another actor


def test_audit_filters_by_job_and_drops_excluded_types(api: Api) -> None:
    for sid in ("a1", "a2", "b1"):
        api.ok("/v1/schedule/create", dict(namespace=NS, schedule_id=sid))
    job = api.ok("/v1/migrate", {"job_id": "jobA", "namespace": NS, "to": "workflow",
                                 "match": "a*"})
    assert job["job_id"] == "jobA"
    entries = api.read("/v1/audit", job="jobA", limit=1000)["entries"]
    assert {e["schedule_id"] for e in entries} == {"a1", "a2"}
    assert {e["type"] for e in entries} == {"RequestIdAssigned", "FencedForMigration"}
    kept = api.read("/v1/audit", job="jobA", exclude_type=["FencedForMigration"])["entries"]
    assert [e["type"] for e in kept] == ["RequestIdAssigned", "RequestIdAssigned"]
    assert all(e["actor"] == NAMES["admin"] for e in kept)
