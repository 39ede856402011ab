"""Cross-site request forgery in headless Chromium (issue 28, item 3): an operator signed in to
``schedfence serve`` opens a page served from *another port* of the same host (SameSite does
not look at ports, so the browser sends the ``schedfence_token`` cookie with its forms). That
page posts a form to every write route; each is answered ``cross_origin`` (403) and nothing
changes: neither the event log nor the projection. Bearer calls of the same routes afterwards
show that each probe would have seen the change."""
from __future__ import annotations

import functools
import json
import threading
import time
import urllib.request
from html import escape
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as arrived

from schedfence.infra.web.pages import COOKIE
from tests.browser.served import free_port, schedfence_serve
from tests.browser.steps import follow, sign_in

ADMIN = "admin-token-for-the-csrf-page-0123"
KEY = {"namespace": "ns", "schedule_id": "every-second"}
PROGRAM = {"spec": {"intervals": [{"every": 1, "offset": 0}]},
           "action": {"workflow_type": "Report", "task_queue": "reports"}}
# A text/plain form whose one field makes the body read as JSON: the best a form can send.
JSON_FIELD = '{"namespace": "ns", "schedule_id": "every-second", "reason": "r", "pad": "'


def _api(base: str, method: str, path: str, body: dict | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers={
        "Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def _state(base: str) -> tuple[int, int]:
    """(events in the log, the projection's position): what a forged write would move."""
    return (_api(base, "GET", "/v1/verify")[1]["events"],
            _api(base, "GET", "/v1/projection")[1]["projected_through"])


def _forms(base: str, folder: Path) -> list[str]:
    """One page per write route of the API (read from its OpenAPI document), and the sign-out
    form, each posting itself on load; returns the routes' paths."""
    paths = _api(base, "GET", "/openapi.json")[1]["paths"]
    routes = [p.replace("{kind}", "abort") for p, ops in paths.items() if "post" in ops]
    routes.append("/ui/logout")
    for n, path in enumerate(routes):
        (folder / f"{n}.html").write_text(
            f'<form method="post" enctype="text/plain" action="{escape(base + path)}">'
            f'<input type="hidden" name="{escape(JSON_FIELD)}" value="&quot;}}"></form>'
            "<script>document.forms[0].submit()</script>")
    return routes


@pytest.fixture
def elsewhere(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A plain static site on another port of 127.0.0.1: the attacker's pages."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", folder
    finally:
        server.shutdown()
        server.server_close()


def _answer(browser: Any) -> dict:
    """The JSON the browser shows after its form was posted (Chromium puts it in a <pre>)."""
    return json.loads(browser.find_element(By.TAG_NAME, "pre").text)


def test_forms_from_another_port_change_nothing(browser: Any, tmp_path: Path,
                                                elsewhere: tuple[str, Path]) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with schedfence_serve(store, [("ada", "admin", ADMIN)], tmp_path) as base:
        sign_in(browser, base, "/ui/", ADMIN)  # (a page brings the projection up to date)
        assert _api(base, "POST", "/v1/schedule/create", dict(KEY, **PROGRAM))[0] == 200
        time.sleep(2)  # the schedule is due: a scheduler pass would start its action
        before = _state(base)
        assert before[1] < before[0]  # the projection is behind: a catch-up would move it
        site, folder = elsewhere
        routes = _forms(base, folder)
        for n, path in enumerate(routes):
            browser.get(f"{site}/{n}.html")
            follow(browser, arrived.url_to_be(base + path))
            if path.startswith("/v1/"):
                assert _answer(browser)["error"]["code"] == "cross_origin", path
            else:  # the sign-out page refuses too, and the browser stays signed in
                assert "forbidden" in browser.find_element(By.TAG_NAME, "main").text
        assert _state(base) == before
        assert any(c["name"] == COOKIE for c in browser.get_cookies())
        # The same probes see a change when the writes are the operator's own (bearer).
        assert _api(base, "POST", "/v1/scheduler/pass")[1]["started"] >= 1
        assert _api(base, "POST", "/v1/projection/catch-up")[0] == 200
        after = _state(base)
        assert after[0] > before[0] and after[1] == after[0] > before[1]
    log = (tmp_path / "serve.log").read_text()
    for path in routes:
        assert f'"POST {path} HTTP/1.1" 403' in log, path
