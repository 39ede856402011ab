"""``schedfence --log-format json serve`` as a real process (issue 28, item 5): uvicorn's
start-up, access and shut-down lines go through the project's formatter on stderr, one JSON
object per line; stdout stays empty; and no token, whether sent as ``?token=``, as a bearer
header or as the page's cookie, known to the server or not, appears on any line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from schedfence.infra.adapters.observability.logs import redact
from tests.infra.cli.cli_runs import ROOT
from tests.infra.http.api import SECRETS, TOKEN_LINES
from tests.infra.http.test_serve_process import _ready
from tests.pgtools import free_port

UNKNOWN = "not-a-token-of-this-server-4711"  # a guess, or a token with a typo


def _requests(url: str) -> None:
    admin, reader = SECRETS["admin"], SECRETS["reader"]
    with httpx.Client(base_url=url, timeout=30) as http:
        for secret in (admin, UNKNOWN):
            assert http.get(f"/v1/stats?token={secret}").status_code == 401
            assert http.get(f"/v1/nowhere?schedfence_token={secret}&x=1").status_code == 404
            assert http.get(f"/ui/?access_token={secret}").status_code == 303
        assert http.get("/v1/stats", headers={"Authorization": f"Bearer {reader}"}
                        ).status_code == 200
        assert http.get("/v1/stats", headers={"Authorization": f"Bearer {UNKNOWN}"}
                        ).status_code == 401
        http.cookies.set("schedfence_token", admin)
        assert http.get(f"/ui/{admin}").status_code == 404
        http.cookies.set("schedfence_token", reader)
        assert http.get("/v1/stats").status_code == 200


def test_every_line_is_json_and_no_token_reaches_a_log(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN_LINES)
    port = free_port()
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "schedfence.infra.cli", "--log-format", "json", "--store",
             f"sqlite:///{tmp_path / 'store.db'}", "serve", "--listen", f"127.0.0.1:{port}",
             "--tokens", str(tokens)], cwd=ROOT, stdout=stdout, stderr=stderr,
            env={k: v for k, v in os.environ.items() if not k.startswith("SCHEDFENCE_LOG")})
    try:
        _ready(f"http://127.0.0.1:{port}", process)
        _requests(f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        assert process.wait(timeout=30) in (0, -15)
    printed = out.read_text() + err.read_text()
    for secret in (*SECRETS.values(), UNKNOWN):
        assert secret not in printed, secret
    assert out.read_text() == ""
    records = [json.loads(line) for line in err.read_text().splitlines()]  # each line JSON
    messages = [r["message"] for r in records]
    assert any("listening on http://127.0.0.1" in m for m in messages)
    assert any(m.startswith("Started server process") for m in messages)
    assert any(m.startswith("Finished server process") for m in messages)
    access = [r for r in records if r["logger"] == "uvicorn.access" and r["path"] != "/healthz"]
    assert len(access) == 10 and all(r["client"].startswith("127.0.0.1:") for r in access)
    assert [r["status"] for r in access] == [401, 404, 303, 401, 404, 303, 200, 401, 404, 200]
    assert access[1]["path"] == "/v1/nowhere?schedfence_token=***&x=1"
    # An authorized request's line names its actor (the token's name); a refused one none.
    assert [r.get("actor") for r in access if r["path"] == "/v1/stats"] == \
        ["rita", None, "rita"]
    assert "color_message" not in json.dumps(records)


def test_a_token_in_a_query_header_or_cookie_is_scrubbed_by_name() -> None:
    for text in ("GET /v1/stats?token=abc123 HTTP/1.1", "/x?schedfence_token=abc123&y=2",
                 "Authorization: Bearer abc123", "Cookie: schedfence_token=abc123",
                 "cookie=abc123", "X-Api-Key: abc123"):
        assert "abc123" not in redact(text), text
    assert redact("tokens: entry 3 has no role") == "tokens: entry 3 has no role"
