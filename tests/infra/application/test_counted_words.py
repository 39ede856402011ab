"""Counts read as English: "1 migration", "2 migrations", "1 key" (verify's line, the owners
audit's summary), never "1 migrations"."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from schedfence.domain.text import counted
from schedfence.infra.application.display import verdict_lines
from schedfence.infra.application.owners_doc import summary_line


def test_a_count_agrees_with_its_noun() -> None:
    assert [counted(n, "key") for n in (0, 1, 2)] == ["0 keys", "1 key", "2 keys"]
    assert counted(1, "entry", "entries") == "1 entry" and counted(3, "entry", "entries") == \
        "3 entries"


def test_verify_says_one_migration_and_one_violation() -> None:
    ok = {"ok": True, "events": 1, "migrations": 1, "violations": []}
    assert verdict_lines(ok) == ["invariants: OK (1 event, 1 migration checked)"]
    bad: dict[str, Any] = {"ok": False, "events": 9, "migrations": 2, "violations": [
        {"invariant": "I1", "migration_id": "m", "positions": [3], "message": "m"}]}
    assert verdict_lines(bad)[0] == "invariants: 1 violation (9 events, 2 migrations checked)"


def test_the_owners_summary_says_one_key() -> None:
    state: Any = SimpleNamespace(namespace="ns", at="2026-12-07T00:00:00Z", rows=[object()],
                                 counts={"owner": {"source": 1}, "kind": {"native": 1}})
    assert summary_line(state).startswith("ns audited 2026-12-07T00:00:00Z: 1 key; owner ")
