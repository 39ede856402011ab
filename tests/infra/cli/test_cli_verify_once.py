"""``schedfence verify --json``, in a fresh process, runs the exactly-once oracle over the log
(I21, domain/invariants/exactly_once_log.py): a store whose handover settled a time the source had
started already reports it; the same store before the edit is clean."""
from __future__ import annotations

import json

from schedfence.domain.rollback.aggregate import Migration

from tests.domain.invariants.once_histories import handed_over
from tests.infra.cli.cli_runs import store, subprocess_cli  # noqa: F401

STARTED = "2026-03-02T12:02:00Z"  # a spec time the source started before the handover


class CrashAtSettle(Exception):
    pass


def crash_at_settle(point: str) -> None:
    if point == "settle.before_append":
        raise CrashAtSettle(point)


def verify(store: str) -> dict:
    proc = subprocess_cli(store, "verify", "--json")
    assert proc.returncode in (0, 1) and not proc.stderr.strip(), proc.stderr
    return json.loads(proc.stdout)


def test_verify_reports_a_settled_time_the_source_had_started(store: str) -> None:
    # The worker dies just before it records the boundary's settle; a buggy settle then
    # records a time the source had started, through the store's own API.
    svc, _, _ = handed_over(store, crash_hook=crash_at_settle)
    [mid] = svc.open_migration_ids()
    assert verify(store)["ok"] is True
    migration = svc.app.repository.get(mid)
    migration.trigger_event(Migration.BoundarySettled, request_id=migration.state.request_id,
                            started=[STARTED])
    svc.app.save(migration)
    svc.close()
    doc = verify(store)
    assert doc["ok"] is False
    [violation] = doc["violations"]
    assert violation["invariant"] == "I21" and violation["migration_id"] == str(mid)
    assert "2026-03-02T12:02:00+00:00 (auto) started twice" in violation["message"]
