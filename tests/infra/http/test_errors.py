"""Every error code the API can answer, at its status, in the one shape; each refusal writes
nothing. The domain's own refusals are provoked for real; the codes only a broken store can
produce are raised from the service where the route calls it."""
from __future__ import annotations

import importlib
import pkgutil

import pytest

import schedfence
from schedfence.domain.errors import DomainError, PhaseBlocked, UndecodableEvent
from schedfence.domain.ids import DUMMY_WORKFLOW_TYPE
from schedfence.infra.http.errors import STATUS
from schedfence.infra.adapters.store.pg import StoreTimeout, StoreUnavailable
from tests.helpers import NS, start_foreign
from tests.infra.http.api import Api, assert_error, nothing_written

KEY = {"namespace": NS, "schedule_id": "s1"}


def _all_domain_errors() -> set[type[DomainError]]:
    for module in pkgutil.walk_packages(schedfence.__path__, "schedfence."):
        if ".cli" not in module.name and ".demo" not in module.name:
            importlib.import_module(module.name)
    found, todo = set(), [DomainError]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.add(sub)
            todo.append(sub)
    return found


def test_every_domain_error_code_has_a_status() -> None:
    codes = {cls.code for cls in _all_domain_errors()}
    assert codes - set(STATUS) == set(), "give each new code its status in infra/http/errors.py"
    assert {"invalid_argument", "not_found", "already_exists", "migration_pending",
            "failed_precondition", "unavailable", "store_unavailable"} <= codes


def test_the_domains_refusals_answer_their_status_and_write_nothing(api: Api) -> None:
    api.ok("/v1/schedule/create", KEY)
    with nothing_written(api):
        # a field's own rule is the schema's (422); a byte limit it cannot state, the domain's
        assert_error(api.post("/v1/schedule/create", dict(KEY, schedule_id=" s2")), 422,
                     "invalid_argument")
        assert_error(api.post("/v1/schedule/create", dict(KEY, schedule_id="é" * 600)), 400,
                     "invalid_argument")
        assert_error(api.post("/v1/schedule/create", {"namespace": NS}), 422,
                     "invalid_argument")
        assert_error(api.post("/v1/schedule/create", dict(KEY, paused="maybe")), 422,
                     "invalid_argument")
        assert_error(api.get("/v1/schedule", namespace=NS, schedule_id="nope"), 404,
                     "not_found")
        assert_error(api.post("/v1/schedule/create", KEY), 409, "already_exists")
        assert_error(api.post("/v1/schedule/update", dict(KEY, limit=1, conflict_token=99)),
                     409, "failed_precondition")
        assert_error(api.get("/v1/audit", since="yesterday-ish"), 400, "invalid_argument")
        assert_error(api.get("/v1/audit", page_token="abc"), 400, "invalid_argument")
        assert_error(api.get("/v1/migrations", state="lost"), 422, "invalid_argument")
        assert_error(api.client.get("/v1/nothing-here"), 404, "not_found")
        assert_error(api.client.get("/v1/rollback"), 405, "method_not_allowed")
        assert_error(api.post("/v1/recover/explode", dict(KEY, reason="r"), "operator"), 422,
                     "invalid_argument")


def test_fenced_closed_sentinel_and_unavailable(api: Api) -> None:
    for sid in ("s1", "s2", "s3", "s4"):
        api.ok("/v1/schedule/create", dict(KEY, schedule_id=sid))
    api.ok("/v1/rollback", KEY)
    api.ok("/v1/schedule/delete", dict(KEY, schedule_id="s2"))
    start_foreign(api.world.dest, "s3", workflow_type=DUMMY_WORKFLOW_TYPE)
    api.world.dest.inject("describe", "unavailable")
    with nothing_written(api):
        assert_error(api.post("/v1/rollback", dict(KEY, schedule_id="s4")), 503,
                     "unavailable")
        assert_error(api.post("/v1/schedule/pause", KEY), 409, "migration_pending")
        assert_error(api.post("/v1/rollback", dict(KEY, request_id="another")), 409,
                     "already_exists")
        assert_error(api.post("/v1/rollback", dict(KEY, schedule_id="s2")), 409, "closed")
        assert_error(api.post("/v1/rollback", dict(KEY, schedule_id="s3")), 409,
                     "sentinel_blocked")
        assert_error(api.post("/v1/recover/rearm", dict(KEY, reason="r"), "operator"), 409,
                     "failed_precondition")


def test_a_drain_that_cannot_finish_says_not_drained(api: Api) -> None:
    api.ok("/v1/schedule/create", KEY)
    api.ok("/v1/rollback", KEY)
    api.world.dest.inject("start", "unavailable", times=50)
    doc = api.ok("/v1/worker/drain", {"retry_for": 0}, role="operator")
    assert doc["drained"] is False and doc["error"]["code"] == "not_drained"
    assert doc["blocked"]


@pytest.mark.parametrize("error, status", [
    (StoreUnavailable("cannot connect to the store"), 503),
    (StoreTimeout("the statement timed out"), 503),
    (PhaseBlocked("a phase blocks it"), 409),
    (UndecodableEvent("position 7 cannot be decoded"), 500),
])
def test_errors_from_the_store_keep_their_code(api: Api, monkeypatch, error, status) -> None:
    def fail(*_a, **_k):
        raise error
    monkeypatch.setattr(api.service, "stats", fail)
    assert_error(api.get("/v1/stats"), status, error.code)


def test_an_unexpected_error_is_internal_and_shows_no_detail(api: Api, monkeypatch) -> None:
    def fail(*_a, **_k):
        raise RuntimeError("password=hunter2 in some driver text")
    monkeypatch.setattr(api.service, "stats", fail)
    answer = api.get("/v1/stats")
    assert "hunter2" not in assert_error(answer, 500, "internal")["message"]
