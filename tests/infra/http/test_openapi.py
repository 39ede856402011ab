"""The OpenAPI document: served at /openapi.json, committed at schemas/openapi.json, and the
two never drift apart."""
from __future__ import annotations

import json
from pathlib import Path

from schedfence.infra.http.app import openapi_text
from tests.infra.cli.cli_runs import ROOT
from tests.infra.http.api import Api

COMMITTED = ROOT / "schemas" / "openapi.json"
REGENERATE = ".venv/bin/schedfence serve --print-openapi > schemas/openapi.json"


def test_the_committed_document_is_the_apps() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == openapi_text(), \
        f"schemas/openapi.json drifted from the app; regenerate it: {REGENERATE}"


def test_the_served_document_is_the_committed_one(api: Api) -> None:
    served = api.client.get("/openapi.json")
    assert served.status_code == 200
    assert served.json() == json.loads(COMMITTED.read_text(encoding="utf-8"))


def test_every_operation_needs_a_bearer_and_documents_the_error_shape() -> None:
    doc = json.loads(openapi_text())
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            if path == "/healthz":
                continue
            assert op["security"] == [{"HTTPBearer": []}], (method, path)
            for status in ("401", "403", "422", "429"):
                ref = op["responses"][status]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorResponse"), (method, path, status)


def test_print_openapi_opens_nothing(tmp_path: Path) -> None:
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store",
                           f"sqlite:///{tmp_path / 'never.db'}", "serve", "--print-openapi"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == openapi_text() and not (tmp_path / "never.db").exists()
