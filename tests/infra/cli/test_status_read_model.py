"""``status`` answers from the operator projection's rows when every row it reads is at its
aggregate's latest version (infra/application/status_read.py), and from the log otherwise:
byte-identical output either way (text and --json, from a fresh process), as fresh as the log,
and the same one-line errors. The read-model answer loads no event class, pydantic,
eventsourcing or SQLAlchemy, and on PostgreSQL reads through the system's libpq (psycopg
where none loads: both answer alike)."""
from __future__ import annotations

import json
import uuid

import pytest

from schedfence.domain.ids import schedule_aggregate_id, schedule_key_id
from schedfence.infra.application.status_read import PG_EVENTS, _rows, read_model_status
from schedfence.infra.application.views import status_doc
from schedfence.infra.application.offline import open_offline
from schedfence.infra.adapters.store import libpq
from schedfence.infra.adapters.store.eventstore import event_table

from tests.infra.cli.cli_runs import modules_of_command, ok, subprocess_cli

CREATE = ("--interval", "1h", "--workflow-type", "W", "--task-queue", "q")
# Keys in every shape status shows: no migration, an open one, a completed one, paused
# with notes, closed, a second incarnation whose migration (aborted) is its predecessor's, and
# one the scheduler ran an action of (its run events, folded too).
KEYS = ("plain", "pending", "done", "noted", "closed", "again", "ran")


def _populate(store: str) -> None:
    sim = ("--destination", "sim")
    for key in KEYS:
        ok(store, *sim, "schedule", "create", "ns", key, *CREATE)
    ok(store, *sim, "rollback", "ns", "done")
    ok(store, *sim, "worker", "--until-idle")  # completes
    ok(store, *sim, "rollback", "ns", "again")
    ok(store, *sim, "abort", "ns", "again", "--reason", "changed my mind", "--actor", "ops")
    ok(store, *sim, "schedule", "notes", "ns", "noted", "a note, with ünïcode")
    ok(store, *sim, "schedule", "pause", "ns", "noted")
    ok(store, *sim, "schedule", "delete", "ns", "closed")
    ok(store, *sim, "schedule", "delete", "ns", "again")
    ok(store, *sim, "schedule", "create", "ns", "again", *CREATE)  # incarnation 2
    ok(store, *sim, "rollback", "ns", "pending")  # stays open: no worker runs after it
    ok(store, *sim, "schedule", "trigger", "ns", "ran")
    ok(store, *sim, "scheduler", "--once")


def _statuses(store: str, keys: tuple[str, ...]) -> dict[str, tuple[int, str, str]]:
    """Exit code, stdout and stderr of text and --json status per key, each a fresh process."""
    found = {}
    for key in keys:
        for extra in ((), ("--json",)):
            done = subprocess_cli(store, "status", "ns", key, *extra)
            found[f"{key} {' '.join(extra)}"] = (done.returncode, done.stdout, done.stderr)
    return found


def test_status_reads_the_projection_alike_and_only_when_current(file_store_url: str) -> None:
    store = file_store_url
    _populate(store)
    keys = (*KEYS, "missing")
    with open_offline(store) as service:  # the worker caught the projection up on its way
        early = {key: read_model_status(store, "ns", key) for key in KEYS}
        assert early["pending"] is None and early["noted"] is None  # changed since: the log
        assert early["done"] is not None  # untouched since
        assert all(doc is None or doc == status_doc(service, "ns", key)
                   for key, doc in early.items())
        service.views.projector.view.drop_tables()  # no rows: every answer is the log's
    assert [key for key in KEYS if read_model_status(store, "ns", key) is not None] == []
    from_log = _statuses(store, keys)
    assert from_log["missing "][0] == 1 and from_log["missing "][2].count("\n") == 1
    assert json.loads(from_log["again --json"][1])["schedule"]["incarnation"] == 2
    assert json.loads(from_log["again --json"][1])["migration"]["incarnation"] == 1
    assert json.loads(from_log["ran --json"][1])["schedule"]["action_count"] == 1
    ok(store, "projection", "catch-up")
    with open_offline(store) as service:
        for key in KEYS:  # the rows answer, with the log's very document
            assert read_model_status(store, "ns", key) == status_doc(service, "ns", key), key
        assert read_model_status(store, "ns", "missing") is None
        assert read_model_status(store, "ns", "") is None  # invalid: the log's read says why
    assert _statuses(store, keys) == from_log


def test_status_after_a_change_the_projection_has_not_applied_is_the_logs(
        file_store_url: str) -> None:
    store = file_store_url
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s", *CREATE)
    ok(store, "projection", "catch-up")
    assert read_model_status(store, "ns", "s")["migration"] is None
    ok(store, "--destination", "sim", "rollback", "ns", "s")
    assert read_model_status(store, "ns", "s") is None  # its rows behind: not answered
    shown = json.loads(subprocess_cli(store, "status", "ns", "s", "--json").stdout)
    assert shown["migration"]["state"] == "pending" and shown["schedule"]["paused"] is True
    ok(store, "projection", "catch-up")
    assert read_model_status(store, "ns", "s") == shown


def test_status_from_the_projection_loads_no_event_class(file_store_url: str,
                                                         store_kind: str) -> None:
    """Nor SQLAlchemy on PostgreSQL (its URL is read without ``make_url``), nor psycopg
    where the system's libpq loads (infra/adapters/store/libpq.py)."""
    store = file_store_url
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s", *CREATE)
    ok(store, "--destination", "sim", "rollback", "ns", "s")
    ok(store, "projection", "catch-up")
    stdout, loaded = modules_of_command(store, "status", "ns", "s")
    assert "migration pending  yes" in stdout
    heavy = {m.split(".")[0] for m in loaded} & {"pydantic", "pydantic_core", "eventsourcing",
                                                 "sqlalchemy", "psycopg"}
    assert heavy == ({"psycopg"} if store_kind == "postgres" and libpq.load() is None
                     else set())
    assert not any(m.startswith(("schedfence.infra.application.service",
                                 "schedfence.domain.source.schedule",
                                 "schedfence.domain.rollback.aggregate")) for m in loaded)


def test_the_versions_it_compares_are_the_logs(file_store_url: str) -> None:
    """The aggregates' latest versions as the status read finds them in eventsourcing's table
    of stored events (its id encoding, on both backends) are the repository's."""
    store = file_store_url
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s", *CREATE)
    ok(store, "--destination", "sim", "rollback", "ns", "s")
    ok(store, "--destination", "sim", "schedule", "create", "ns", "t", *CREATE)
    with open_offline(store) as service:
        ids = [schedule_key_id("ns", "s"), schedule_aggregate_id("ns", "s", 1),
               schedule_aggregate_id("ns", "t", 1)]
        ids.append(uuid.UUID(service.migration("ns", "s").migration_id))
        expected = {i: service.app.repository.get(i).version for i in ids}
    with _rows(store) as found:
        assert found is not None
        _, latest, _ = found
        assert latest(ids) == expected and set(expected.values()) != {1}
    assert event_table() == PG_EVENTS


def test_a_change_to_another_key_leaves_the_answer_to_the_rows(file_store_url: str) -> None:
    store = file_store_url
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s", *CREATE)
    ok(store, "projection", "catch-up")
    ok(store, "--destination", "sim", "schedule", "create", "ns", "other", *CREATE)
    ok(store, "--destination", "sim", "rollback", "ns", "other")
    quick = read_model_status(store, "ns", "s")
    assert quick is not None  # the projection lags, but not on this key's aggregates
    with open_offline(store) as service:
        assert quick == status_doc(service, "ns", "s")
    assert read_model_status(store, "ns", "other") is None


@pytest.mark.parametrize("store_text", ["sqlite:///:memory:", "sqlite:///nowhere/x.db",
                                        "sqlite:///x.db?mode=ro", "mysql://h/db",
                                        "postgresql://u:p@ss@127.0.0.1/db"])
def test_a_store_it_does_not_read_is_left_to_the_log(store_text: str) -> None:
    """Left to the log's read, which names the problem (two '@': refused, never connected)."""
    assert read_model_status(store_text, "ns", "s") is None


def test_a_url_the_store_refuses_is_refused_alike(pg_store: str) -> None:
    """A caught-up store reached through a URL the store refuses: the log's one-line error."""
    ok(pg_store, "--destination", "sim", "schedule", "create", "ns", "s", *CREATE)
    ok(pg_store, "projection", "catch-up")
    scheme, _, rest = pg_store.partition("://")
    user, _, tail = rest.partition("@")
    twice = f"{scheme}://{user}:x@y@{tail}"  # a password with an unencoded '@'
    done = subprocess_cli(twice, "status", "ns", "s")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("error: invalid_argument: store URL has more than one '@'")


def test_psycopg_answers_alike_where_no_libpq_loads(pg_store: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    assert libpq.load() is not None  # this machine has one: the quick path above used it
    ok(pg_store, "--destination", "sim", "schedule", "create", "ns", "s", *CREATE)
    ok(pg_store, "--destination", "sim", "rollback", "ns", "s")
    ok(pg_store, "projection", "catch-up")
    through_libpq = read_model_status(pg_store, "ns", "s")
    monkeypatch.setattr(libpq, "load", lambda: None)
    assert through_libpq is not None and read_model_status(pg_store, "ns", "s") == through_libpq


def test_the_libpq_client_reads_types_and_refuses_alike(pg_store: str) -> None:
    from schedfence.infra.adapters.store.pg import StoreUnavailable, parse_pg_url
    target, lib = parse_pg_url(pg_store), libpq.load()
    with libpq.Connection(lib, target.keywords(), target.redacted) as conn:
        ids = [uuid.uuid4(), uuid.uuid4()]
        row = conn.execute("SELECT %s::int, %s::bigint, true, %s::uuid, NULL, 'x''y', "
                           "%s::uuid[] @> ARRAY[%s::uuid]", [7, 2**40, ids[0], ids, ids[1]])
        assert row.fetchall() == [(7, 2**40, True, ids[0], None, "x'y", True)]
        assert conn.execute("SHOW statement_timeout").fetchall() == [("1min",)]
        with pytest.raises(libpq.QueryFailed, match="no_such_table"):
            conn.execute("SELECT * FROM no_such_table")
    bad = dict(target.keywords(), port="1")
    with pytest.raises(StoreUnavailable, match="cannot connect to"):
        libpq.Connection(lib, bad, target.redacted)
