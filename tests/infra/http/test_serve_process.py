"""``schedfence serve`` as a real process on a free loopback port: it starts, answers, refuses
what it must (writing nothing), and stops on SIGTERM; its output never shows a secret."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from schedfence.domain.errors import InvalidArgument
from schedfence.infra.cli.serve import is_loopback, parse_listen
from tests.helpers import NS
from tests.infra.cli.cli_runs import ROOT
from tests.infra.http.api import SECRETS, TOKEN_LINES, bearer
from tests.pgtools import free_port

KEY = {"namespace": NS, "schedule_id": "nightly"}


def _serve(*args: str, env: dict | None = None, out: Path) -> subprocess.Popen:
    with out.open("w") as log:
        return subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", *args],
                                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ, **(env or {})))


def _ready(url: str, process: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "serve exited before it was ready"
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    raise AssertionError("serve did not become ready")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN_LINES)
    port, out = free_port(), tmp_path / "serve.log"
    process = _serve("serve", "--store", f"sqlite:///{tmp_path / 'store.db'}", "--listen",
                     f"127.0.0.1:{port}", env={"SCHEDFENCE_TOKENS_FILE": str(tokens)}, out=out)
    try:
        _ready(f"http://127.0.0.1:{port}", process)
        yield f"http://127.0.0.1:{port}", out
    finally:
        process.terminate()
        # uvicorn shuts down gracefully, then re-raises the signal it caught
        assert process.wait(timeout=30) in (0, -15)
    log = out.read_text()
    assert "listening on http://127.0.0.1" in log and "Finished server process" in log
    assert not any(secret in log for secret in SECRETS.values()), log


def test_a_served_rollback_end_to_end(server: tuple[str, Path]) -> None:
    url, _ = server
    with httpx.Client(base_url=url, timeout=30) as http:
        def events() -> int:
            return http.get("/v1/verify", headers=bearer("reader")).json()["events"]

        assert http.post("/v1/schedule/create", json=KEY,
                         headers=bearer("admin")).status_code == 200
        first = http.post("/v1/rollback", json=KEY, headers={**bearer("admin"),
                                                              "Idempotency-Key": "R1"}).json()
        assert first["outcome"] == "accepted" and first["destination"].startswith("sim")
        before = events()
        again = http.post("/v1/rollback", json=dict(KEY, request_id="R1"),
                          headers=bearer("admin")).json()
        assert again["migration_id"] == first["migration_id"] and events() == before
        for headers, status in (({}, 401), (bearer("reader"), 403),
                                ({"Authorization": "Bearer wrong-wrong-wrong"}, 401)):
            refused = http.post("/v1/schedule/pause", json=KEY, headers=headers)
            assert refused.status_code == status and "error" in refused.json()
        big = http.post("/v1/schedule/notes", json=dict(KEY, notes="x" * 70_000),
                        headers=bearer("admin"))
        assert big.status_code == 413 and events() == before
        drained = http.post("/v1/worker/drain", json={}, headers=bearer("operator")).json()
        assert drained["drained"]
        status = http.get("/v1/schedule", params=KEY, headers=bearer("reader")).json()
        assert status["migration"]["state"] == "completed"
        assert http.get("/v1/nowhere").json()["error"]["code"] == "not_found"
        assert http.get("/openapi.json").json()["info"]["title"] == "schedfence admin API"


def _refused(tmp_path: Path, env: dict) -> str:
    done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store",
                           f"sqlite:///{tmp_path / 'store.db'}", "serve"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1 and not (tmp_path / "store.db").exists()
    assert len(done.stderr.splitlines()) == 1, done.stderr  # one line, no traceback
    return done.stderr


def test_serve_refuses_to_start_without_tokens_or_a_destination(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SCHEDFENCE_TOKENS_FILE"}
    assert _refused(tmp_path, env).startswith(
        "error: invalid_argument: serve needs a tokens file")
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN_LINES)
    env = dict(env, SCHEDFENCE_TOKENS_FILE=str(tokens))
    env.pop("SCHEDFENCE_DESTINATION", None)
    assert "destination" in _refused(tmp_path, env)


@pytest.mark.parametrize("text, parsed", [("127.0.0.1:8080", ("127.0.0.1", 8080)),
                                          ("[::1]:0", ("::1", 0)),
                                          ("localhost:9", ("localhost", 9))])
def test_listen_addresses(text: str, parsed: tuple[str, int]) -> None:
    assert parse_listen(text) == parsed and is_loopback(parsed[0])


@pytest.mark.parametrize("text", ["8080", "127.0.0.1", ":8080", "127.0.0.1:http",
                                  "127.0.0.1:70000"])
def test_a_bad_listen_address_is_refused(text: str) -> None:
    with pytest.raises(InvalidArgument, match="HOST:PORT"):
        parse_listen(text)


def test_only_loopback_counts_as_loopback() -> None:
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "::", "example.org"))
