"""The operator pages through FastAPI's test client, in a minimal app with the HTTP API's
``authorize`` contract (tests/infra/web/fake_app.py): login and cookie, the on-call list, the
timeline with its filters, each id's own view, escaping, and that no page writes an event."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from schedfence.projections.narration import narrate
from schedfence.projections.narration import short_type
from schedfence.infra.web.pages import COOKIE, url
from tests.helpers import NS, World, new_world, nothing_written
from tests.replay import scenarios
from tests.infra.web.fake_app import (ADMIN_TOKEN, DONE, PARKED, READER_TOKEN, SCRAPER_TOKEN,
                                      make_app, parked_and_done)
from tests.infra.web.scrape import Page, read

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def shown(tmp_path: Path) -> Iterator[World]:
    w = parked_and_done(f"sqlite:///{tmp_path / 'store.db'}")
    yield w
    w.service.close()


@pytest.fixture
def anon(shown: World) -> TestClient:
    return TestClient(make_app(shown.service))


@pytest.fixture
def reader(shown: World) -> TestClient:
    return TestClient(make_app(shown.service), headers={"Authorization": f"Bearer {READER_TOKEN}"})


def page(client: TestClient, path: str, status: int = 200, **params: str) -> Page:
    response = client.get(path, params=params)
    assert response.status_code == status, response.text[:500]
    assert "<script" not in response.text.lower()
    return read(response.text)


def timeline_url(sid: str, **params: str) -> dict[str, str]:
    return dict(namespace=NS, schedule=sid, **params)


# -- authentication --------------------------------------------------------------------------
def test_a_page_without_a_token_sends_the_browser_to_the_login_form(shown: World,
                                                                     anon: TestClient) -> None:
    mid = shown.service.migration(NS, DONE).migration_id
    for path, params in (("/ui/", {}), ("/ui/schedule", timeline_url(DONE)),
                         ("/ui/migration", timeline_url(DONE, id=mid))):
        response = anon.get(path, params=params, follow_redirects=False)
        assert response.status_code == 303
        target = urlsplit(response.headers["location"])
        assert target.path == "/ui/login"
        back = urlsplit(parse_qs(target.query)["next"][0])
        assert back.path == path and parse_qs(back.query) == {k: [v] for k, v in params.items()}
    assert anon.get("/ui/login").status_code == 200


def test_the_login_sets_an_httponly_strict_cookie_and_never_echoes_the_token(
        shown: World, anon: TestClient) -> None:
    with nothing_written(shown.service):
        response = anon.post("/ui/login", data={"token": READER_TOKEN, "next": "/ui/schedule"},
                             follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/ui/schedule"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and "HttpOnly" in cookie
    assert "samesite=strict" in cookie.lower() and "Path=/" in cookie
    assert READER_TOKEN not in response.text
    assert "signed in as alice (reader)" in page(anon, "/ui/").text  # the cookie alone
    out = anon.post("/ui/logout", follow_redirects=False)
    assert out.status_code == 303 and f'{COOKIE}=""' in out.headers["set-cookie"]


@pytest.mark.parametrize("token, status", [("not-a-token", 401), (SCRAPER_TOKEN, 403),
                                           ("", 400)])
def test_a_refused_token_gets_the_form_again_without_a_cookie_or_the_token(
        shown: World, anon: TestClient, token: str, status: int) -> None:
    with nothing_written(shown.service):
        response = anon.post("/ui/login", data={"token": token}, follow_redirects=False)
    assert response.status_code == status
    assert "set-cookie" not in response.headers
    assert token == "" or token not in response.text
    assert 'name="token"' in response.text


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/ui/",
                                    "/ui\\..\\x", "/elsewhere"])
def test_the_login_only_returns_to_a_page_of_this_app(anon: TestClient, target: str) -> None:
    response = anon.post("/ui/login", data={"token": ADMIN_TOKEN, "next": target},
                         follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/ui/"


def test_pages_carry_a_strict_policy_and_the_stylesheet_needs_no_token(
        reader: TestClient, anon: TestClient) -> None:
    response = reader.get("/ui/")
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    css = anon.get("/ui/static/page.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "http" not in css.text  # nothing fetched from elsewhere: works offline


# -- the on-call list ------------------------------------------------------------------------
def test_the_oncall_list_shows_the_parked_migration_and_what_it_allows(
        shown: World, reader: TestClient) -> None:
    [item] = shown.service.oncall()
    mid = item.migration.migration_id
    shown_page = page(reader, "/ui/")
    assert item.category == "parked" and "foreign_destination" in shown_page.text
    assert (f"/ui/migration?namespace={NS}&schedule={PARKED}&id={mid}", mid) \
        in shown_page.links
    for action, verdict in item.verdicts.items():
        assert f"{action} {verdict}" in shown_page.text
    for line in item.actions:
        assert line in shown_page.text
    done = shown.service.migration(NS, DONE).migration_id
    assert (f"/ui/schedule?namespace={NS}&schedule={DONE}", f"{NS}/{DONE}") in shown_page.links
    assert f"{done} rollback completed" in shown_page.text  # in the schedules table, not on call


def test_a_bad_stuck_after_is_a_400_page_naming_the_error(reader: TestClient) -> None:
    for value in ("soon", "-1", "nan"):
        assert "invalid_argument" in page(reader, "/ui/", 400, stuck_after=value).text


# -- the timeline ----------------------------------------------------------------------------
def test_the_timeline_shows_every_step_of_a_completed_rollback_in_order_with_full_ids(
        shown: World, reader: TestClient) -> None:
    history = shown.service.history(NS, DONE)
    shown_page = page(reader, "/ui/schedule", **timeline_url(DONE))
    # the migration's steps (the source's fence and close among them) lead, then the
    # source's own events, each in log order
    mid = shown.service.migration(NS, DONE).migration_id
    step_at = {s["position"] for s in shown.service.replay(NS, DONE, migration_id=mid)["steps"]}
    lead = [e for e in history if e.position in step_at] + \
        [e for e in history if e.position not in step_at]
    assert lead[0].position > history[0].position  # the steps come before the creation
    assert [int(r["position"]) for r in shown_page.rows] == [e.position for e in lead]
    assert [r["type"] for r in shown_page.rows] == [short_type(e.type) for e in lead]
    steps = [r["type"] for r in shown_page.rows if r["lane"] == "migration"]
    assert steps == shown.migration_events(DONE)
    assert steps[0] == "RequestIdAssigned" and steps[-1] == "SourceClosed"
    for e in history:  # the replay's narration, ids whole
        line = narrate(e.type, e.data, full_ids=True)
        assert line is not None, e.type  # every type this release writes is narrated
        assert " ".join(line.text.split()) in shown_page.text
    view = shown.service.migration(NS, DONE)
    link_texts = {text for _, text in shown_page.links}
    assert {view.migration_id, view.destination_first_run_id} <= link_texts
    for uuid in set(UUID.findall(shown_page.text)):  # never an 8-digit prefix alone
        assert not re.search(rf"(?<![0-9a-f-]){uuid[:8]}(?![0-9a-f-])", shown_page.text)
    assert shown_page.text.count("checks: ok") >= len(steps)
    assert "next step: reconcile → close" in shown_page.text


def test_every_id_on_the_pages_links_to_its_own_view(shown: World,
                                                     reader: TestClient) -> None:
    seen: set[str] = set()
    queue = ["/ui/", f"/ui/schedule?namespace={NS}&schedule={DONE}",
             f"/ui/schedule?namespace={NS}&schedule={PARKED}"]
    with nothing_written(shown.service):
        while queue:
            href = queue.pop()
            if href in seen:
                continue
            seen.add(href)
            response = reader.get(href)
            assert response.status_code == 200, href
            queue += [h for h, _ in read(response.text).links
                      if h.startswith("/ui/") and h not in seen]
    views = {urlsplit(h).path for h in seen}
    assert {"/ui/migration", "/ui/run", "/ui/workflow", "/ui/schedule"} <= views
    receipt = shown.service.migration(NS, DONE).destination_first_run_id
    run_page = page(reader, "/ui/run", **timeline_url(DONE, id=receipt))
    assert [r["type"] for r in run_page.rows] == [
        "DestinationAnswered", "OwnershipAccepted", "ClosedByMigration", "SourceClosed"]


def test_the_migration_view_is_its_replay(shown: World, reader: TestClient) -> None:
    mid = shown.service.migration(NS, PARKED).migration_id
    doc = shown.service.replay(NS, PARKED, migration_id=mid)
    shown_page = page(reader, "/ui/migration", **timeline_url(PARKED, id=mid))
    assert [int(r["position"]) for r in shown_page.rows] == [s["position"] for s in doc["steps"]]
    assert "parked foreign_destination" in shown_page.text
    assert f"next step {doc['next_step']}" in shown_page.text
    assert doc["destination"] and f"destination {doc['destination']}" in shown_page.text


def test_the_timeline_filters_by_migration_and_time(shown: World, reader: TestClient) -> None:
    mid = shown.service.migration(NS, DONE).migration_id
    steps = shown.service.replay(NS, DONE, migration_id=mid)["steps"]
    only = page(reader, "/ui/schedule", **timeline_url(DONE, migration=mid))
    assert [int(r["position"]) for r in only.rows] == [s["position"] for s in steps]
    everything = len(shown.service.history(NS, DONE))
    assert len(page(reader, "/ui/schedule", **timeline_url(DONE, since="1h")).rows) == everything
    for window in ({"since": "2999-01-01T00:00:00Z"}, {"until": "2000-01-01T00:00:00Z"}):
        empty = page(reader, "/ui/schedule", **timeline_url(DONE, **window))
        assert not empty.rows and "No event matches" in empty.text
    middle = steps[3]["timestamp"]
    after = page(reader, "/ui/schedule", **timeline_url(DONE, since=middle))
    assert int(after.rows[0]["position"]) == steps[3]["position"]


@pytest.mark.parametrize("params, status, code", [
    ({"since": "yesterday"}, 400, "invalid_argument"),
    ({"since": "2h", "until": "3h"}, 400, "invalid_argument"),
    ({"migration": "not-a-uuid"}, 400, "invalid_argument"),
    ({"migration": "00000000-0000-0000-0000-000000000000"}, 404, "not_found"),
    ({"schedule": "no-such-schedule"}, 404, "not_found"),
    ({"namespace": ""}, 400, "invalid_argument"),
])
def test_bad_filters_and_unknown_ids_are_error_pages(shown: World, reader: TestClient,
                                                     params: dict, status: int,
                                                     code: str) -> None:
    with nothing_written(shown.service):
        shown_page = page(reader, "/ui/schedule", status, **{**timeline_url(DONE), **params})
    assert code in shown_page.text and not shown_page.rows


def test_everything_shown_is_escaped_and_odd_ids_still_link(shown: World,
                                                            reader: TestClient) -> None:
    sid = 'a/b?c=<b>x</b>&d="e"'
    shown.service.create_schedule(NS, sid, notes='<script>alert("x")</script>')
    response = reader.get("/ui/schedule", params=timeline_url(sid))
    assert response.status_code == 200
    assert "<script" not in response.text and "<b>x</b>" not in response.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in response.text
    shown_page = read(response.text)
    [(href, _)] = [(h, t) for h, t in shown_page.links if t == f"{NS}/{sid}"][:1]
    assert parse_qs(urlsplit(href).query)["schedule"] == [sid]
    assert reader.get(href).status_code == 200


def test_the_timeline_shows_the_schedules_action_starts(tmp_path: Path) -> None:
    w = new_world(f"sqlite:///{tmp_path / 'actions.db'}")
    try:
        scenarios.s1(w)  # actions taken (one answer lost, then deduplicated), then handed over
        client = TestClient(make_app(w.service),
                            headers={"Authorization": f"Bearer {READER_TOKEN}"})
        shown_page = page(client, "/ui/schedule", **timeline_url("s1"))
        actions = [e for e in w.service.history(NS, "s1")
                   if short_type(e.type).startswith("Action")]
        assert [(int(r["position"]), r["type"]) for r in shown_page.rows
                if r["lane"] == "action"] == [(e.position, short_type(e.type)) for e in actions]
        for done in w.service.schedule(NS, "s1").recent_actions:
            wid, run = done["workflow_id"], done["run_id"]
            assert (url("workflow", namespace=NS, schedule="s1", id=wid), wid) in shown_page.links
            assert (url("run", namespace=NS, schedule="s1", id=run), run) in shown_page.links
            own = page(client, "/ui/workflow", **timeline_url("s1", id=wid))
            assert [int(r["position"]) for r in own.rows if r["lane"] == "action"] == [
                e.position for e in actions if e.data["workflow_id"] == wid]
            # the rest: the handover's start, which carries the schedule's recent actions
            assert {r["type"] for r in own.rows if r["lane"] != "action"} <= {
                "RequestIdAssigned", "DestinationStartIssued"}
    finally:
        w.service.close()


def test_a_form_posted_from_another_site_signs_nobody_in_or_out(anon: TestClient) -> None:
    elsewhere = {"Origin": "https://evil.example"}
    response = anon.post("/ui/login", data={"token": READER_TOKEN}, headers=elsewhere,
                         follow_redirects=False)
    assert response.status_code == 403 and "set-cookie" not in response.headers
    assert anon.post("/ui/logout", headers=elsewhere).status_code == 403
    own = {"Origin": "http://testserver"}
    response = anon.post("/ui/login", data={"token": READER_TOKEN}, headers=own,
                         follow_redirects=False)
    assert response.status_code == 303 and COOKIE in response.headers["set-cookie"]


def test_a_token_below_the_reader_role_gets_a_403_page(shown: World) -> None:
    client = TestClient(make_app(shown.service),
                        headers={"Authorization": f"Bearer {SCRAPER_TOKEN}"})
    shown_page = page(client, "/ui/", 403)
    assert "permission_denied" in shown_page.text and "reader" in shown_page.text


def test_the_http_apps_own_authorize_guards_the_pages(shown: World) -> None:
    from schedfence.infra.http.app import create_app
    from schedfence.infra.http.auth import Tokens

    tokens = Tokens([("alice", "reader", READER_TOKEN), ("prometheus", "metrics",
                                                         SCRAPER_TOKEN)])
    client = TestClient(create_app(shown.service, tokens))
    with nothing_written(shown.service):
        assert client.get("/ui/", follow_redirects=False).status_code == 303
        low = client.get("/ui/", headers={"Authorization": f"Bearer {SCRAPER_TOKEN}"})
        assert low.status_code == 403 and "permission_denied" in low.text
        refused = client.post("/ui/login", data={"token": "x" * 20}, follow_redirects=False)
        assert refused.status_code == 401 and "set-cookie" not in refused.headers
        signed = client.post("/ui/login", data={"token": READER_TOKEN},
                             follow_redirects=False)
        assert signed.status_code == 303 and COOKIE in signed.headers["set-cookie"]
        assert "signed in as alice (reader)" in page(client, "/ui/").text
    assert "/ui/" not in json.dumps(client.get("/openapi.json").json()["paths"])
