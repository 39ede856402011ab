"""The ``curl`` examples of the README and docs/ work as written: each ``curl`` line of their
``sh`` blocks (continuation lines joined) runs, through a shell, against ``schedfence serve``
in a process of its own, with ``$TOKEN`` an admin token and the documented address replaced by
the server's. Each answers a JSON document that is not an error."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra.cli.cli_runs import ROOT
from tests.infra.http.api import SECRETS, TOKEN_LINES
from tests.infra.http.test_serve_process import _ready
from tests.pgtools import free_port

DOCUMENTED = "http://127.0.0.1:8080"
BLOCK = re.compile(r"```sh\n(.*?)```", re.S)


def curl_lines() -> list[str]:
    """Every ``curl`` command of the README's and docs' shell blocks, one string each."""
    found = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in BLOCK.findall(doc.read_text()):
            for command in re.sub(r"\\\n\s*", " ", block).splitlines():
                if command.lstrip().startswith("curl "):
                    found.append(command.strip())
    return found


def _require_curl() -> str:
    path = shutil.which("curl")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("curl is required in CI (apt-get install curl)")
        pytest.skip("curl not found (apt-get install curl)")
    return path


def test_every_documented_curl_line_works_as_written(tmp_path: Path) -> None:
    _require_curl()
    commands = curl_lines()
    assert len(commands) >= 3 and any(" -d " in c for c in commands)  # a read and a write
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    env = dict(os.environ, SCHEDFENCE_DESTINATION="sim")
    made = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                           "schedule", "create", "payments", "nightly"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN_LINES)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                               "serve", "--listen", f"127.0.0.1:{port}", "--tokens",
                               str(tokens)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        _ready(url, server)
        for command in commands:
            assert DOCUMENTED in command, command  # the address the docs' server listens on
            done = subprocess.run(["bash", "-c", command.replace(DOCUMENTED, url)],
                                  env=dict(env, TOKEN=SECRETS["admin"]), capture_output=True,
                                  text=True, timeout=60)
            assert done.returncode == 0, (command, done.stderr)
            answer = json.loads(done.stdout)
            assert "error" not in answer, (command, answer)
            if "/v1/rollback" in command:
                assert answer["outcome"] == "accepted" and answer["request_id"] == "deploy-42"
    finally:
        server.terminate()
        server.wait(timeout=30)
