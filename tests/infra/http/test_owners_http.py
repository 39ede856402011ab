"""``GET /v1/owners``: the last recorded ownership audit, paged, for a reader, read from the
log (no Temporal call, nothing written); ``not_found`` before the first audit."""
from __future__ import annotations

import json
from pathlib import Path

from tests.infra.cli.cli_runs import subprocess_cli
from tests.infra.cli.owners_world import KINDS, NS, make_world
from tests.infra.http.api import api_on, assert_error, nothing_written


def test_owners_pages_the_last_audit(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'api.db'}"
    with api_on(store) as api:
        assert_error(api.get("/v1/owners", namespace=NS), 404, "not_found")
        make_world(store)
        audited = subprocess_cli(store, "--destination", "sim", "owners", "--namespace", NS,
                                 "--json")
        assert audited.returncode == 1
        with nothing_written(api):
            seen, after, pages = [], None, 0
            while True:
                params = {"namespace": NS, "limit": 3, **({"after": after} if after else {})}
                page = api.read("/v1/owners", **params)
                seen += page["rows"]
                pages += 1
                after = page["next_cursor"]
                if after is None:
                    break
            drift = api.read("/v1/owners", namespace=NS, drift_only="true")
        assert pages == 3 and {r["schedule_id"]: r["kind"] for r in seen} == KINDS
        whole = json.loads(audited.stdout)
        assert page["counts"] == whole["counts"] and page["at"] == whole["at"]
        assert page["failing"] == 4
        assert {r["schedule_id"] for r in drift["rows"]} == {"gone", "both", "closed", "paused"}
        assert_error(api.get("/v1/owners", namespace=NS, after="nope"), 400,
                     "invalid_argument")
        assert api.client.get("/v1/owners", params={"namespace": NS}).status_code == 401
        oncall = api.read("/v1/oncall")
        assert {d["schedule_id"] for d in oncall["ownership"]} == {"gone", "both", "closed",
                                                                   "paused"}
