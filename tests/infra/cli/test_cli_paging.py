"""``audit``, ``list`` and ``migrations`` answer a page at a time: ``--limit`` rows and, while more
match, an opaque ``next_cursor`` (JSON) or the command for the next page (text). Walking the
pages returns every row exactly once; filters leave the rest out; audit shows the reason."""
from __future__ import annotations

import json
import shlex

import pytest

from schedfence.infra.cli import reads
from schedfence.infra.cli.commands import cli
from schedfence.infra.application.service import open_service

from tests.infra.cli.cli_runs import ok, run, store  # noqa: F401 (store: a fixture)


@pytest.fixture(autouse=True)
def paged_commands():
    """``audit`` and ``migrations`` with paging live in infra/cli/reads.py; until the group
    registers them there instead of infra/cli/projections.py, these tests put them on it."""
    before = {name: cli.commands[name] for name in ("audit", "migrations")}
    cli.add_command(reads.audit)
    cli.add_command(reads.migrations)
    yield
    cli.commands.update(before)


def _fill(store: str) -> None:  # noqa: F811 (the fixture's value)
    """Five keys in two namespaces; four migrations: two aborted with a reason, two done."""
    with open_service(store, "sim", claim_grace=0, retry_for=0) as service:
        for ns, sid in (("ns", "a"), ("ns", "b"), ("other", "c"), ("ns", "d"), ("other", "e")):
            service.create_schedule(ns, sid)
        for ns, sid in (("ns", "a"), ("other", "c")):
            service.rollback(ns, sid, request_id=f"req-{sid}", actor="admin")
            service.abort(ns, sid, f"reason for {sid}: wrong window", "alice")
        for ns, sid in (("ns", "b"), ("other", "e")):
            service.rollback(ns, sid, request_id=f"req-{sid}", actor="admin")
        service.run_until_idle()


def _walk(store: str, *args: str, key: str) -> tuple[list[dict], int]:  # noqa: F811
    """Every row of every page (JSON), and how many pages it took."""
    rows, cursor, pages = [], None, 0
    while True:
        doc = json.loads(ok(store, *args, "--json", *(["--after", cursor] if cursor else [])))
        rows += doc[key]
        pages += 1
        cursor = doc["next_cursor"]
        if cursor is None:
            return rows, pages
        assert len(doc[key]) <= int(args[args.index("--limit") + 1])


def test_audit_pages_hold_every_event_once_in_both_orders(store: str) -> None:  # noqa: F811
    _fill(store)
    whole = json.loads(ok(store, "audit", "--limit", "1000", "--json"))
    assert whole["next_cursor"] is None and not whole["truncated"]
    assert len(whole["entries"]) > 20
    for order in ([], ["--newest-first"]):
        rows, pages = _walk(store, "audit", "--limit", "3", *order, key="entries")
        positions = [e["position"] for e in rows]
        assert len(positions) == len(set(positions)), "an event on two pages"
        expected = [e["position"] for e in whole["entries"]]
        assert positions == (expected[::-1] if order else expected)
        assert pages == -(-len(expected) // 3)


def test_audit_filters_by_namespace_and_type_and_shows_the_reason(store: str) -> None:  # noqa
    _fill(store)
    every = json.loads(ok(store, "audit", "--limit", "1000", "--json"))["entries"]
    mine = json.loads(ok(store, "audit", "--namespace", "other", "--limit", "1000",
                         "--json"))["entries"]
    assert mine == [e for e in every if e["namespace"] == "other"]
    assert {e["schedule_id"] for e in mine} == {"c", "e"}
    aborts = json.loads(ok(store, "audit", "--type", "MigrationAborted", "--json"))["entries"]
    assert [(e["schedule_id"], e["actor"], e["reason"]) for e in aborts] == [
        ("a", "alice", "reason for a: wrong window"), ("c", "alice", "reason for c: wrong window")]
    both = json.loads(ok(store, "audit", "--type", "MigrationAborted", "--type",
                         "schedfence.migration.SourceClosed", "--namespace", "other",
                         "--json"))["entries"]
    assert sorted(e["type"] for e in both) == ["MigrationAborted", "SourceClosed"]
    assert all(e["reason"] is None for e in every if e["type"] == "SourceClosed")
    text = ok(store, "audit", "--type", "MigrationAborted")
    assert "REASON" in text.splitlines()[0] and "reason for c: wrong window" in text


def test_audit_text_names_the_command_for_the_next_page(store: str) -> None:  # noqa: F811
    _fill(store)
    seen: list[str] = []
    args = ["audit", "--namespace", "ns", "--limit", "4"]
    while True:
        lines = ok(store, *args).splitlines()
        seen += [line.split()[0] for line in lines[2:] if line[:1].isdigit()]
        if not lines[-1].startswith("("):
            break
        assert "more match" in lines[-1]
        command = shlex.split(lines[-1].split("next page: ", 1)[1].rstrip(")"))
        assert command[:2] == ["schedfence", "audit"] and "--namespace" in command
        args = command[1:]
    every = json.loads(ok(store, "audit", "--namespace", "ns", "--limit", "1000", "--json"))
    assert seen == [str(e["position"]) for e in every["entries"]]


def test_a_cursor_of_another_query_is_refused_in_one_line(store: str) -> None:  # noqa: F811
    _fill(store)
    listed = json.loads(ok(store, "list", "--limit", "1", "--json"))["next_cursor"]
    audited = json.loads(ok(store, "audit", "--limit", "1", "--json"))["next_cursor"]
    for args in (["audit", "--after", listed], ["audit", "--after", "not-a-cursor"],
                 ["audit", "--after", audited, "--newest-first"],
                 ["migrations", "--after", audited], ["list", "--after", audited]):
        result = run(store, *args)
        assert result.exit_code == 1 and result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line.startswith("error: invalid_argument: "), line


def test_list_pages_and_filters_by_namespace(store: str) -> None:  # noqa: F811
    _fill(store)
    whole = json.loads(ok(store, "list", "--json"))
    assert whole["next_cursor"] is None
    keys = [(r["namespace"], r["schedule_id"]) for r in whole["schedules"]]
    assert keys == [("ns", "a"), ("ns", "b"), ("other", "c"), ("ns", "d"), ("other", "e")]
    states = {r["schedule_id"]: r["migration_state"] for r in whole["schedules"]}
    assert states == {"a": "aborted", "b": "completed", "c": "aborted", "d": None,
                      "e": "completed"}
    rows, pages = _walk(store, "list", "--limit", "2", key="schedules")
    assert rows == whole["schedules"] and pages == 3
    rows, _ = _walk(store, "list", "--namespace", "other", "--limit", "1", key="schedules")
    assert [r["schedule_id"] for r in rows] == ["c", "e"]
    text = ok(store, "list", "--namespace", "ns", "--limit", "2").splitlines()
    assert [line.split()[:2] for line in text[2:4]] == [["ns", "a"], ["ns", "b"]]
    assert "schedfence list --namespace ns --limit 2 --after " in text[-1]


def test_migrations_page_with_and_without_a_state(store: str) -> None:  # noqa: F811
    _fill(store)
    whole = json.loads(ok(store, "migrations", "--json"))
    assert whole["next_cursor"] is None and len(whole["migrations"]) == 4
    for extra, expected in (([], 4), (["--state", "aborted"], 2)):
        rows, _ = _walk(store, "migrations", "--limit", "1", *extra, key="migrations")
        ids = [r["migration_id"] for r in rows]
        assert len(ids) == len(set(ids)) == expected
        assert ids == [r["migration_id"] for r in json.loads(ok(
            store, "migrations", *extra, "--json"))["migrations"]]
    text = ok(store, "migrations", "--limit", "3")
    assert "(3 shown; more match: next page: schedfence migrations --limit 3 --after " in text
