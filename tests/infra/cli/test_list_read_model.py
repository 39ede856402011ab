"""``list`` answers from the operator projection's rows when every row it reads is at its
aggregate's latest version (infra/application/list_read.py), and from the log otherwise: the
same page (rows, order, cursor) either way, text and --json byte-identical from a fresh
process, and the same errors. The read-model page loads no event class, pydantic,
eventsourcing or SQLAlchemy."""
from __future__ import annotations

import json

import pytest

from schedfence.domain.source.key import ScheduleKey
from schedfence.projections.status_rows import KEY_CREATED
from schedfence.infra.application.list_read import read_model_list
from schedfence.infra.application.offline import open_offline
from schedfence.infra.application.views import schedule_list

from tests.infra.cli.cli_runs import modules_of_command, ok, subprocess_cli
from tests.infra.cli.test_status_read_model import CREATE, KEYS, _populate

# (namespace, limit) pages walked to the end through their cursors.
PAGES = ((None, 1000), (None, 3), (None, 1), ("ns", 2), ("other", 5), ("none", 4))


def _walk(read, namespace: str | None, limit: int) -> list[dict]:
    pages, after = [], None
    while True:
        page = read(namespace, limit, after)
        pages.append(page)
        if page is None or page["next_cursor"] is None:
            return pages
        after = page["next_cursor"]


def _lists(store: str) -> dict[str, tuple[int, str, str]]:
    found = {}
    for args in ((), ("--json",), ("--limit", "2"), ("--namespace", "ns", "--limit", "3",
                                                     "--json"), ("--after", "bogus")):
        done = subprocess_cli(store, "list", *args)
        found[" ".join(args)] = (done.returncode, done.stdout, done.stderr)
    return found


def test_list_reads_the_projection_alike_and_only_when_current(file_store_url: str) -> None:
    store = file_store_url
    _populate(store)  # every shape status shows: open, completed, aborted, incarnation 2, ...
    ok(store, "--destination", "sim", "schedule", "create", "other", "x", *CREATE)
    assert read_model_list(store, None, 1000, None) is None  # the rows lag: the log's page
    from_log = _lists(store)
    assert from_log["--after bogus"][0] == 1 and from_log["--after bogus"][2].startswith(
        "error: invalid_argument: cursor")
    ok(store, "projection", "catch-up")
    with open_offline(store) as service:
        for namespace, limit in PAGES:
            quick = _walk(lambda n, lim, a: read_model_list(store, n, lim, a), namespace, limit)
            slow = _walk(lambda n, lim, a: schedule_list(service, n, lim, a), namespace, limit)
            assert None not in quick and quick == slow, (namespace, limit)
        rows = quick_all = read_model_list(store, None, 1000, None)
        assert quick_all is not None
        states = {r["schedule_id"]: r["migration_state"] for r in rows["schedules"]}
        assert states["done"] == "completed" and states["pending"] == "pending"
        assert states["again"] == "aborted" and states["plain"] is None  # a predecessor's
        assert len(rows["schedules"]) == len(KEYS) + 1
    assert _lists(store) == from_log  # byte-identical, fresh processes


def test_a_change_the_projection_has_not_applied_leaves_the_page_to_the_log(
        file_store_url: str) -> None:
    store = file_store_url
    for key in ("a", "b"):
        ok(store, "--destination", "sim", "schedule", "create", "ns", key, *CREATE)
    ok(store, "projection", "catch-up")
    assert [r["paused"] for r in read_model_list(store, None, 10, None)["schedules"]] == \
        [False, False]
    ok(store, "--destination", "sim", "schedule", "pause", "ns", "b")
    assert read_model_list(store, None, 10, None) is None  # b's row behind its aggregate
    assert read_model_list(store, None, 1, None) is not None  # a page of a alone: current
    shown = json.loads(subprocess_cli(store, "list", "--json").stdout)
    assert [r["paused"] for r in shown["schedules"]] == [False, True]
    ok(store, "--destination", "sim", "schedule", "create", "ns", "c", *CREATE)
    assert read_model_list(store, None, 10, None) is None  # a key the rows do not hold yet
    ok(store, "projection", "catch-up")
    assert len(read_model_list(store, None, 10, None)["schedules"]) == 3


@pytest.mark.parametrize("args", [("", 5, None), ("ns", 5, "bogus"), (None, 5, "bogus")])
def test_what_it_cannot_read_is_left_to_the_log(file_store_url: str, args: tuple) -> None:
    """An invalid namespace or cursor: the log's read names the problem in its words."""
    store = file_store_url
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s", *CREATE)
    ok(store, "projection", "catch-up")
    assert read_model_list(store, *args) is None


def test_the_topic_it_reads_keys_by_is_the_key_events() -> None:
    assert KEY_CREATED == ScheduleKey.Created.TOPIC


def test_list_from_the_projection_loads_no_event_class_or_sqlalchemy(
        file_store_url: str) -> None:
    store = file_store_url
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s", *CREATE)
    ok(store, "--destination", "sim", "rollback", "ns", "s")
    ok(store, "projection", "catch-up")
    stdout, loaded = modules_of_command(store, "list")
    assert "pending" in stdout.splitlines()[-1]
    assert {m.split(".")[0] for m in loaded} & {"pydantic", "eventsourcing", "sqlalchemy",
                                                 "rich"} == set()
    assert "schedfence.infra.cli.output" not in loaded
