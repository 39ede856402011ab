"""Request ids as idempotency keys: a rollback retried with the same id, in the body or the
``Idempotency-Key`` header, answers for the same migration and writes nothing new."""
from __future__ import annotations

from tests.helpers import NS
from tests.infra.http.api import Api, assert_error, nothing_written

KEY = {"namespace": NS, "schedule_id": "s1"}


def _same(first: dict, again: dict) -> None:
    assert {k: again[k] for k in ("request_id", "migration_id", "request_id_origin")} == \
        {k: first[k] for k in ("request_id", "migration_id", "request_id_origin")}


def test_a_retry_in_the_header_or_the_body_is_the_same_migration(api: Api) -> None:
    api.ok("/v1/schedule/create", KEY)
    first = api.ok("/v1/rollback", KEY, headers={"Idempotency-Key": "deploy-42"})
    assert (first["outcome"], first["request_id"], first["request_id_origin"]) == \
        ("accepted", "deploy-42", "caller")
    with nothing_written(api):
        for body, headers in ((KEY, {"Idempotency-Key": "deploy-42"}),
                              (dict(KEY, request_id="deploy-42"), {}),
                              (dict(KEY, request_id="deploy-42"),
                               {"Idempotency-Key": "deploy-42"})):
            again = api.ok("/v1/rollback", body, headers=headers)
            assert again["outcome"] == "already_pending"
            _same(first, again)
    api.ok("/v1/worker/drain", {}, role="operator")
    with nothing_written(api):
        done = api.ok("/v1/rollback", KEY, headers={"Idempotency-Key": "deploy-42"})
        assert done["outcome"] == "already_completed"
        _same(first, done)


def test_without_a_key_the_derived_id_is_stable(api: Api) -> None:
    api.ok("/v1/schedule/create", KEY)
    first = api.ok("/v1/rollback", KEY)
    assert first["request_id_origin"] == "derived"
    with nothing_written(api):
        _same(first, api.ok("/v1/rollback", KEY))


def test_two_different_keys_are_refused(api: Api) -> None:
    api.ok("/v1/schedule/create", KEY)
    with nothing_written(api):
        assert_error(api.post("/v1/rollback", dict(KEY, request_id="a"),
                              headers={"Idempotency-Key": "b"}), 400, "invalid_argument")
        assert_error(api.post("/v1/rollback", KEY, headers={"Idempotency-Key": "k" * 1001}),
                     422, "invalid_argument")  # the schema states the length
