"""Cross-site request forgery: a write authenticated by the ``schedfence_token`` cookie is
refused ``cross_origin`` (403, writing nothing) unless ``Origin`` / ``Sec-Fetch-Site`` say it
comes from this server's own pages; a bearer token and a read are not affected."""
from __future__ import annotations

from typing import Any

import pytest

from schedfence.infra.web.origin import foreign_origin
from tests.infra.http.api import SECRETS, Api, assert_error, bearer
from tests.infra.http.test_auth import KEY, ROUTES

OWN = "http://testserver"
WRITES = [(path, body) for (method, path), (_, body) in ROUTES.items() if method == "POST"]
FOREIGN = [{"Origin": "http://testserver:9999", "Sec-Fetch-Site": "same-site"},  # another port
           {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
           {"Origin": "null"},  # a sandboxed frame, a no-referrer page
           {"Sec-Fetch-Site": "same-site"},  # no Origin
           {"Origin": OWN, "Sec-Fetch-Site": "cross-site"},  # the two disagree
           {}]  # nothing vouches for it


def _post(api: Api, path: str, body: Any, headers: dict[str, str]) -> Any:
    return api.client.post(path.replace("{kind}", "abort"), json=body or {}, headers=headers)


def _state(api: Api) -> tuple[int, dict]:
    return api.service.event_count(), api.service.views.status()


def _with_cookie(api: Api) -> None:
    api.client.cookies.set("schedfence_token", SECRETS["admin"])


@pytest.mark.parametrize("headers", FOREIGN, ids=lambda h: "+".join(h.values()) or "none")
def test_a_cookie_write_from_another_origin_is_refused_on_every_route(
        api: Api, headers: dict[str, str]) -> None:
    api.ok("/v1/schedule/create", KEY)  # something for every route to act on
    _with_cookie(api)
    before = _state(api)
    for path, body in WRITES:
        error = assert_error(_post(api, path, body, headers), 403, "cross_origin")
        assert "schedfence_token" in error["message"] and "Bearer" in error["message"]
    assert _state(api) == before


def test_a_cookie_write_from_this_servers_own_pages_is_served(api: Api) -> None:
    _with_cookie(api)
    for headers in ({"Origin": OWN}, {"Origin": OWN, "Sec-Fetch-Site": "same-origin"},
                    {"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}):
        answer = _post(api, "/v1/projection/catch-up", None, headers)
        assert answer.status_code == 200, (headers, answer.text)
    created = _post(api, "/v1/schedule/create", KEY, {"Origin": OWN})
    assert created.status_code == 200 and api.service.event_count() > 0


def test_a_bearer_token_and_a_read_are_not_checked(api: Api) -> None:
    elsewhere = {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
    assert api.post("/v1/schedule/create", KEY, headers=elsewhere).status_code == 200
    _with_cookie(api)
    assert api.client.get("/v1/stats", headers=elsewhere).status_code == 200
    # the Authorization header wins over the cookie: a bearer write is a bearer write
    answer = api.client.post("/v1/projection/catch-up", headers={**bearer("operator"),
                                                                 **elsewhere})
    assert answer.status_code == 200


def test_without_a_known_token_the_answer_stays_401(api: Api) -> None:
    api.client.cookies.set("schedfence_token", "not-a-known-token-at-all")
    assert_error(api.client.post("/v1/projection/rebuild",
                                 headers={"Origin": "https://evil.example"}), 401,
                 "unauthenticated")


def test_the_login_form_still_takes_a_client_without_origin_headers(api: Api) -> None:
    from starlette.requests import Request

    def request(*headers: tuple[str, str]) -> Request:
        return Request({"type": "http", "method": "POST", "scheme": "http", "path": "/",
                        "server": ("testserver", 80), "query_string": b"",
                        "headers": [(k.encode(), v.encode()) for k, v in headers]})
    assert foreign_origin(request(), required=False) is None
    assert foreign_origin(request(), required=True) == \
        "it carries neither Origin nor Sec-Fetch-Site"
    assert foreign_origin(request(("origin", OWN)), required=True) is None
    assert "Sec-Fetch-Site" in foreign_origin(request(("sec-fetch-site", "same-site")),
                                              required=False)
