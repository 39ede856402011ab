"""What the app serves beside the JSON API, under the same ``authorize``: the operator pages
(infra/web) and /metrics (infra/observability)."""
from __future__ import annotations

from tests.infra.http.api import SECRETS, Api, assert_error, bearer


def test_the_pages_take_the_apis_tokens(api: Api) -> None:
    away = api.client.get("/ui/", follow_redirects=False)
    assert away.status_code == 303 and away.headers["location"].startswith("/ui/login")
    page = api.client.get("/ui/", headers=bearer("reader"))
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert SECRETS["reader"] not in page.text
    api.client.cookies.set("schedfence_token", SECRETS["operator"])
    try:
        assert api.client.get("/ui/").status_code == 200
    finally:
        api.client.cookies.clear()
    assert api.client.get("/ui/", headers=bearer("metrics")).status_code == 403


def test_metrics_need_the_metrics_role(api: Api) -> None:
    assert_error(api.client.get("/metrics"), 401, "unauthenticated")
    for role in ("metrics", "reader"):
        scraped = api.client.get("/metrics", headers=bearer(role))
        assert scraped.status_code == 200 and scraped.headers["content-type"].startswith(
            "text/plain") and "schedfence_" in scraped.text
    with_metrics_token = api.client.get("/v1/stats", headers=bearer("metrics"))
    assert_error(with_metrics_token, 403, "permission_denied")
