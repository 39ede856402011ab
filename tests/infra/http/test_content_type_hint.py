"""A body in another content type than JSON (a form's, plain text) is refused as before (422,
``invalid_argument``, nothing written) with a one-line hint first: send application/json."""
from __future__ import annotations

from tests.infra.http.api import Api, assert_error, bearer, nothing_written

KEY = {"namespace": "ns", "schedule_id": "nightly"}


def test_a_form_encoded_post_is_told_to_send_json(api: Api) -> None:
    with nothing_written(api):
        answer = api.client.post("/v1/schedule/create", data=KEY, headers=bearer("admin"))
    error = assert_error(answer, 422, "invalid_argument")
    assert error["message"].startswith(
        "send application/json (this body is application/x-www-form-urlencoded); ")
    assert "\n" not in error["message"]


def test_a_json_body_that_misses_a_field_gets_no_content_type_hint(api: Api) -> None:
    with nothing_written(api):
        answer = api.post("/v1/schedule/create", {"namespace": "ns"})
    error = assert_error(answer, 422, "invalid_argument")
    assert "application/json" not in error["message"]
    assert "schedule_id" in error["message"]
