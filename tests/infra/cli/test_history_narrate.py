"""``history --narrate``: each event as the one narration reads it; JSON entries carry it."""
from __future__ import annotations

from tests.infra.cli.cli_runs import ok, ok_json, store  # noqa: F401 (fixture)


def test_history_narrates_each_event_and_json_carries_the_summary(store: str) -> None:
    ok(store, "schedule", "create", "ns", "a")
    ok(store, "rollback", "ns", "a", "--request-id", "r-1", "--actor", "alice")
    ok(store, "worker", "--until-idle")
    lines = ok(store, "history", "ns", "a", "--narrate").splitlines()
    assert lines[0].split() == ["POS", "TIME", "AGGREGATE", "TYPE", "WHAT"]
    text = "\n".join(lines)
    assert "rollback accepted by alice, request id r-1 (caller)" in text
    assert "destination answered created" in text and "source closed" in text
    events = ok_json(store, "history", "ns", "a")["events"]
    by_type = {e["short_type"]: e for e in events}
    assert by_type["FencedForMigration"]["summary"].startswith("source paused and fenced")
    assert by_type["IncarnationStarted"]["summary"] == "key moved to incarnation 1"
    assert all(e["summary"] for e in events)  # every type this release writes is narrated
    plain = ok(store, "history", "ns", "a").splitlines()
    assert plain[0].split()[-1] == "FIELDS" and "request_id=r-1" in "\n".join(plain)
