"""Forward migration and batch jobs through the API: recorded with the token's name as the
actor, idempotent per request id, driven by a worker drain."""
from __future__ import annotations

from tests.helpers import NS
from tests.infra.cli.cli_runs import ok_json
from tests.infra.http.api import NAMES, Api, assert_error, nothing_written
from tests.infra.http.test_routes import PROGRAM, store_of

KEY = {"namespace": NS, "schedule_id": "nightly"}


def _on_temporal(api: Api, sid: str = "nightly") -> None:
    api.ok("/v1/schedule/create", dict(KEY, schedule_id=sid, notes="pre", **PROGRAM))
    api.ok("/v1/rollback", dict(KEY, schedule_id=sid))
    assert api.ok("/v1/worker/drain", {}, role="operator")["drained"]


def test_a_forward_migration_round_trip(api: Api) -> None:
    _on_temporal(api)
    first = api.ok("/v1/forward", KEY, headers={"Idempotency-Key": "F1"})
    assert (first["outcome"], first["request_id"]) == ("accepted", "F1")
    with nothing_written(api):
        again = api.ok("/v1/forward", dict(KEY, request_id="F1"))
        assert (again["outcome"], again["migration_id"]) == ("already_pending",
                                                             first["migration_id"])
        assert_error(api.post("/v1/forward", dict(KEY, request_id="F1"),
                              headers={"Idempotency-Key": "F2"}), 400, "invalid_argument")
    api.ok("/v1/worker/drain", {}, role="operator")
    status = api.read("/v1/forward", request_id="F1", **KEY)
    assert status["phase"] == "completed" and "handover" in status
    assert status == ok_json(store_of(api), "forward-status", NS, "nightly", "F1")
    assert api.read("/v1/schedule", **KEY)["schedule"]["notes"] == "pre"
    with nothing_written(api):
        assert_error(api.post("/v1/forward/abort", dict(KEY, request_id="F1", reason="r"),
                              "operator"), 409, "failed_precondition")
        assert_error(api.get("/v1/forward", request_id="nope", **KEY), 404, "not_found")


def test_a_forward_abort_is_the_operators(api: Api) -> None:
    _on_temporal(api)
    api.ok("/v1/forward", dict(KEY, request_id="F1"))
    aborted = api.ok("/v1/forward/abort", dict(KEY, request_id="F1", reason="not now"),
                     role="operator")
    assert aborted["phase"] == "aborted" and "handover" not in aborted
    mine = api.read("/v1/audit", actor=NAMES["operator"])["entries"]
    assert aborted["migration_id"] in {e["aggregate_id"] for e in mine}


def test_a_batch_job_requests_then_a_drain_drives(api: Api) -> None:
    for sid in ("a", "b", "c"):
        api.ok("/v1/schedule/create", dict(KEY, schedule_id=sid))
    body = {"namespace": NS, "to": "workflow", "job_id": "j1"}
    with nothing_written(api):
        dry = api.ok("/v1/migrate", dict(body, dry_run=True))
        assert dry["dry_run"] is True
    report = api.ok("/v1/migrate", body)
    assert report["requested"] == 3 and report["destination"].startswith("sim")
    assert api.read("/v1/jobs")[0]["job_id"] == "j1"
    api.ok("/v1/worker/drain", {}, role="operator")
    assert api.read("/v1/job", job_id="j1")["counts"]["completed"] == 3
    with nothing_written(api):
        assert_error(api.post("/v1/job/cancel", {"job_id": "j1"}, "operator"), 409,
                     "failed_precondition")  # every schedule of it is decided already
        assert_error(api.get("/v1/job", job_id="never"), 404, "not_found")
        assert_error(api.post("/v1/migrate", dict(body, to="sideways")), 422,
                     "invalid_argument")
        for bad in ({"blocked_rounds": 21}, {"blocked_rounds": -1}, {"blocked_wait": 300.5},
                    {"blocked_wait": True}):
            assert_error(api.post("/v1/migrate", dict(body, job_id="j2", **bad)), 422,
                         "invalid_argument")


def test_a_batch_job_asks_its_blocked_schedules_again_over_the_api(api: Api) -> None:
    """``blocked_rounds``/``blocked_wait``, as ``migrate --blocked-rounds --blocked-wait``:
    the job's request for a schedule another migration holds is blocked, and the same job
    asks it again in rounds (here, still held: nothing drives over HTTP)."""
    for sid in ("a", "b"):
        api.ok("/v1/schedule/create", dict(KEY, schedule_id=sid))
    api.ok("/v1/rollback", dict(KEY, schedule_id="b", request_id="R-other"))
    body = {"namespace": NS, "to": "workflow", "job_id": "j1", "blocked_wait": 0}
    report = api.ok("/v1/migrate", dict(body, blocked_rounds=2))
    assert (report["blocked_rounds"], report["this_run"]["blocked_rounds"]) == (2, 2)
    assert report["reasons"]["blocked"] == {"migration_pending": 1}
    api.ok("/v1/worker/drain", {}, role="operator")  # R-other ends: b is closed
    again = api.ok("/v1/migrate", dict(body, blocked_rounds=3))  # one more round in all
    assert (again["blocked_rounds"], again["counts"]["blocked"]) == (3, 0)
    assert again["reasons"]["skipped"] == {"closed": 1}
    assert api.read("/v1/job", job_id="j1")["blocked_rounds"] == 3
