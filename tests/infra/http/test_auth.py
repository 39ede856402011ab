"""Who may call what: the tokens file, 401 and 403 writing nothing on every route, the
cookie, the rate limit and the body size limit; no answer ever echoes a secret."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from schedfence.domain.errors import InvalidArgument
from schedfence.infra.http.auth import load_tokens, parse_tokens, Tokens
from tests.helpers import NS
from tests.infra.http.api import (SECRETS, TOKEN_LINES, Api, api_on, assert_error, bearer,
                                  nothing_written)

KEY = {"namespace": NS, "schedule_id": "s1"}
# Every route, the role it needs, and a body it accepts.
ROUTES: dict[tuple[str, str], tuple[str, dict | None]] = {
    ("POST", "/v1/schedule/create"): ("admin", KEY),
    ("POST", "/v1/schedule/update"): ("admin", dict(KEY, limit=3)),
    ("POST", "/v1/schedule/pause"): ("admin", KEY),
    ("POST", "/v1/schedule/unpause"): ("admin", KEY),
    ("POST", "/v1/schedule/notes"): ("admin", dict(KEY, notes="x")),
    ("POST", "/v1/schedule/delete"): ("admin", KEY),
    ("POST", "/v1/schedule/trigger"): ("admin", KEY),
    ("POST", "/v1/schedule/backfill"): ("admin", dict(KEY, start="2026-01-01T00:00:00Z",
                                                      end="2026-01-02T00:00:00Z")),
    ("POST", "/v1/rollback"): ("admin", KEY),
    ("POST", "/v1/promote"): ("admin", {"reason": "drill"}),
    ("POST", "/v1/projection/rebuild"): ("admin", None),
    ("POST", "/v1/forward"): ("admin", KEY),
    ("POST", "/v1/migrate"): ("admin", {"namespace": NS, "to": "workflow", "job_id": "j1"}),
    ("POST", "/v1/forward/abort"): ("operator", dict(KEY, request_id="F1", reason="r")),
    ("POST", "/v1/forward/take-over"): ("operator", dict(KEY, request_id="F1")),
    ("POST", "/v1/job/cancel"): ("operator", {"job_id": "j1"}),
    ("POST", "/v1/abort"): ("operator", dict(KEY, reason="r")),
    ("POST", "/v1/recover/{kind}"): ("operator", dict(KEY, reason="r")),
    ("POST", "/v1/worker/drain"): ("operator", {}),
    ("POST", "/v1/scheduler/pass"): ("operator", None),
    ("POST", "/v1/projection/catch-up"): ("operator", None),
    **{("GET", path): ("reader", None) for path in (
        "/v1/schedules", "/v1/schedule", "/v1/schedule/describe", "/v1/schedule/history",
        "/v1/schedule/replay", "/v1/verify", "/v1/audit", "/v1/stats", "/v1/oncall",
        "/v1/migrations", "/v1/projection", "/v1/forward", "/v1/jobs", "/v1/job",
        "/v1/owners")},
}
BELOW = {"admin": "operator", "operator": "reader", "reader": "metrics"}


def _call(api: Api, method: str, path: str, body: dict | None, headers: dict) -> object:
    url = path.replace("{kind}", "abort")
    if method == "GET":
        return api.client.get(url, params=KEY, headers=headers)
    return api.client.post(url, json=body or {}, headers=headers)


def test_the_table_names_every_route_of_the_api(api: Api) -> None:
    paths = api.client.get("/openapi.json").json()["paths"]
    served = {(m.upper(), p) for p, ops in paths.items() if p.startswith("/v1/") for m in ops}
    assert served == set(ROUTES)


@pytest.mark.parametrize("route", sorted(ROUTES), ids=lambda r: f"{r[0]} {r[1]}")
def test_no_token_is_401_and_a_lower_role_403_and_neither_writes(api: Api, route) -> None:
    api.ok("/v1/schedule/create", KEY)
    role, body = ROUTES[route]
    with nothing_written(api):
        for headers in ({}, {"Authorization": "Bearer not-a-token-at-all"},
                        {"Authorization": f"Basic {SECRETS['admin']}"}):
            answer = _call(api, *route, body, headers)
            error = assert_error(answer, 401, "unauthenticated")
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert "not-a-token" not in error["message"]
            assert SECRETS["admin"] not in answer.text
        if route[0] == "POST":  # a body that does not parse: still 401 first
            answer = api.client.post(route[1].replace("{kind}", "abort"), content=b"{oops",
                                     headers={"Content-Type": "application/json"})
            assert_error(answer, 401, "unauthenticated")
        answer = _call(api, *route, body, bearer(BELOW[role]))
        assert role in assert_error(answer, 403, "permission_denied")["message"]


def test_roles_are_hierarchical_and_the_cookie_carries_a_token(api: Api) -> None:
    for role in ("reader", "operator", "admin"):
        assert api.get("/v1/stats", role).status_code == 200
    api.client.cookies.set("schedfence_token", SECRETS["reader"])
    try:
        assert api.client.get("/v1/stats").status_code == 200
        own = {"Origin": "http://testserver"}  # a write by cookie: from this server's pages
        assert_error(api.client.post("/v1/schedule/create", json=KEY, headers=own), 403,
                     "permission_denied")
    finally:
        api.client.cookies.clear()


def test_a_client_supplied_actor_is_refused_and_writes_nothing(api: Api) -> None:
    api.ok("/v1/schedule/create", KEY)
    with nothing_written(api):
        assert_error(api.post("/v1/rollback", dict(KEY, actor="mallory")), 422,
                     "invalid_argument")
        assert_error(api.post("/v1/abort", dict(KEY, reason="r", actor="mallory"), "operator"),
                     422, "invalid_argument")


def test_over_the_rate_limit_is_429_per_token(tmp_path: Path) -> None:
    with api_on(f"sqlite:///{tmp_path / 'rate.db'}", rate=0.01, burst=2) as api:
        assert [api.get("/v1/stats").status_code for _ in range(2)] == [200, 200]
        answer = api.get("/v1/stats")
        assert_error(answer, 429, "resource_exhausted")
        assert int(answer.headers["retry-after"]) >= 1
        assert api.get("/v1/stats", "admin").status_code == 200  # a bucket per token
        for _ in range(2):
            assert_error(api.client.get("/v1/stats"), 401, "unauthenticated")
        assert_error(api.client.get("/v1/stats"), 429, "resource_exhausted")


def test_a_body_over_the_limit_is_413_declared_or_streamed(tmp_path: Path) -> None:
    with api_on(f"sqlite:///{tmp_path / 'big.db'}", max_body=1024) as api:
        big = dict(KEY, notes="x" * 2000)
        with nothing_written(api):
            assert_error(api.post("/v1/schedule/create", big), 413, "request_too_large")
            chunks = (json.dumps(big).encode()[i:i + 100] for i in range(0, 2100, 100))
            answer = api.client.post("/v1/schedule/create", content=chunks,
                                     headers={**bearer("admin"),
                                              "Content-Type": "application/json"})
            assert_error(answer, 413, "request_too_large")
        assert api.ok("/v1/schedule/create", dict(KEY, notes="x" * 500))["notes"]


# -- the tokens file ---------------------------------------------------------------------------
def test_the_tokens_file_reads_lines_or_json(tmp_path: Path) -> None:
    lines = tmp_path / "tokens"
    lines.write_text("# name role secret\n\n" + TOKEN_LINES)
    assert load_tokens(str(lines)).find(SECRETS["operator"]).name == "otto"
    entries = [{"name": "a", "role": "admin", "secret": "s" * 16}]
    for doc in (entries, {"tokens": entries}):
        found = Tokens(parse_tokens(json.dumps(doc))).find("s" * 16)
        assert (found.name, found.role) == ("a", "admin")
    assert load_tokens(str(lines)).find("s" * 16) is None


@pytest.mark.parametrize("text, says", [
    ("alice admin short-secret\n", "secret must be"),
    ("alice root secret-secret-secret\n", "role must be"),
    ("alice admin secret-one-secret-one\nalice reader secret-two-secret-two\n", "already"),
    ("a admin same-secret-same-secret\nb reader same-secret-same-secret\n", "already"),
    ("alice admin\n", "line 1: expected NAME ROLE SECRET"),
    ('[{"name": "a", "role": "admin", "secret": "unclosed-secret-value"', "not JSON"),
    ('{"alice": "admin"}', "JSON must be a list"),
    ("# nothing but a comment\n", "holds no token"),
])
def test_a_bad_tokens_file_is_refused_without_its_secrets(tmp_path: Path, text: str,
                                                          says: str) -> None:
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(InvalidArgument) as refused:
        load_tokens(str(path))
    assert says in refused.value.message
    for word in text.replace('"', " ").split():
        if "secret" in word and len(word) >= 12:
            assert word not in refused.value.message


def test_no_tokens_file_is_a_clear_refusal(tmp_path: Path) -> None:
    for path in (None, str(tmp_path / "missing")):
        with pytest.raises(InvalidArgument, match="tokens"):
            load_tokens(path)


def test_the_rate_limiter_forgets_full_buckets_only(monkeypatch) -> None:
    from schedfence.infra.http import auth
    monkeypatch.setattr(auth, "MAX_BUCKETS", 3)
    limiter = auth.RateLimiter(rate=0.001, burst=1)
    assert limiter.take("busy") == 0 and limiter.take("busy") > 0
    for n in range(5):
        limiter.take(f"client-{n}")
    assert limiter.take("busy") > 0  # still empty: never forgotten while it refills
