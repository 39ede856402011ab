"""The API over a PostgreSQL store: one rollback end to end (the rest runs on SQLite)."""
from __future__ import annotations

from tests.helpers import NS
from tests.infra.http.api import api_on

KEY = {"namespace": NS, "schedule_id": "pg"}


def test_a_rollback_over_postgresql(pg_store: str) -> None:
    with api_on(pg_store) as api:
        api.ok("/v1/schedule/create", KEY)
        first = api.ok("/v1/rollback", KEY, headers={"Idempotency-Key": "R-pg"})
        before = api.service.event_count()
        assert api.ok("/v1/rollback", dict(KEY, request_id="R-pg"))["migration_id"] == \
            first["migration_id"]
        assert api.service.event_count() == before
        assert api.ok("/v1/worker/drain", {}, role="operator")["drained"]
        assert api.read("/v1/schedule", **KEY)["migration"]["state"] == "completed"
        assert api.read("/v1/verify")["ok"]
