"""PostgreSQL stores: URLs, first use, errors that never show a password, isolation."""
from __future__ import annotations

import json

import psycopg
import pytest
from click.testing import CliRunner

from schedfence.domain.errors import InvalidArgument
from schedfence.infra.cli.commands import cli
from schedfence.infra.adapters.store.pg import StoreUnavailable, parse_pg_url
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.store.eventstore import parse_store_url
from tests import pgtools


def test_a_url_names_host_port_user_database_and_schema() -> None:
    t = parse_pg_url("postgresql://alice:s3cret@db.example:6543/fence?schema=blue")
    assert (t.host, t.port, t.user, t.password, t.dbname, t.schema) == \
        ("db.example", 6543, "alice", "s3cret", "fence", "blue")
    assert t.redacted == "postgresql://alice:***@db.example:6543/fence?schema=blue"
    assert "s3cret" not in parse_store_url("postgres://alice:s3cret@h/db").redacted
    d = parse_pg_url("postgresql+psycopg://h/db")
    assert (d.port, d.user, d.schema) == (5432, "postgres", "public")


@pytest.mark.parametrize("url, expect", [
    ("postgresql://h", "names no database"),
    ("postgresql://h/db?schema=x;drop", "plain identifier"),
    ("postgresql://h/db?sslmode=require", "not supported"),
])
def test_bad_urls_are_invalid_argument(url: str, expect: str) -> None:
    with pytest.raises(InvalidArgument, match=expect):
        parse_store_url(url)


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    port = pgtools.free_port()
    url = f"postgresql://bob:hunter2@127.0.0.1:{port}/fence"
    with pytest.raises(StoreUnavailable) as exc:
        open_service(url, "sim")
    assert "hunter2" not in exc.value.message and "bob:***@127.0.0.1" in exc.value.message
    result = CliRunner().invoke(cli, ["--store", url, "list", "--json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["error"]["code"] == "store_unavailable" and "hunter2" not in result.stdout
    text = CliRunner().invoke(cli, ["--store", url, "list"])
    assert text.stderr.count("\n") == 1 and text.stderr.startswith("error: store_unavailable:")
    assert "hunter2" not in text.stderr and "Traceback" not in text.stderr


def test_a_missing_database_is_named(pg_database: str) -> None:
    url = pgtools.database_url(f"{pg_database}_absent")
    with pytest.raises(StoreUnavailable, match="does not exist"):
        open_service(url, "sim")


def test_first_use_creates_the_schema_and_every_table_in_it(pg_database: str) -> None:
    url = pgtools.new_schema_url(pg_database)
    schema = parse_pg_url(url).schema
    with open_service(url, "sim") as svc:
        svc.create_schedule("ns", "a")
        svc.rollback("ns", "a")
        svc.run_until_idle()
        assert svc.stats()["by_state"]["completed"] == 1
    with psycopg.connect(host=pgtools.PG_HOST, port=pgtools.PG_PORT, user=pgtools.PG_USER,
                         dbname=pg_database) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,))}
    assert {"schedfence_events", "schedfence_sim_destination", "schedfence_proj_tracking",
            "schedfence_proj_migrations", "schedfence_proj_audit"} <= tables
    with open_service(url, "sim") as again:  # reopened: the same log, nothing recreated
        assert again.migration("ns", "a").state == "completed" and again.verify() == []


def test_two_schemas_of_one_database_are_separate_stores(pg_database: str) -> None:
    one, two = pgtools.new_schema_url(pg_database), pgtools.new_schema_url(pg_database)
    with open_service(one, "sim") as a, open_service(two, "sim") as b:
        a.create_schedule("ns", "only-in-one")
        assert [s.schedule_id for s in a.list_schedules()] == ["only-in-one"]
        assert b.list_schedules() == [] and b.event_count() == 0


def _open_and_write(url: str, n: int) -> None:
    with open_service(url, "sim", worker_id=f"p{n}") as svc:
        svc.create_schedule("ns", f"s{n}")


def test_many_processes_opening_a_new_store_at_once_all_succeed(pg_database: str) -> None:
    """eventsourcing runs its DDL on every open; concurrent first opens take turns."""
    import multiprocessing as mp
    url = pgtools.new_schema_url(pg_database)
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_open_and_write, args=(url, n)) for n in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * 6
    with open_service(url, "sim") as svc:
        assert sorted(s.schedule_id for s in svc.list_schedules()) == \
            [f"s{n}" for n in range(6)]


def test_every_append_takes_the_insert_lock_whatever_the_environment_says(
        pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """eventsourcing's insert function (``POSTGRES_ENABLE_DB_FUNCTIONS``, read from the process
    environment too) takes no table lock, so notification ids could commit out of order and a
    reader tailing the log by position (the open forward migrations, the due index) would
    pass over one; it also skips the failover fence. It is never used."""
    monkeypatch.setenv("POSTGRES_ENABLE_DB_FUNCTIONS", "y")
    with open_service(pgtools.new_schema_url(pg_database), "sim") as svc:
        recorder = svc.app.recorder
        locks: list[object] = []
        lock_table = recorder._lock_table
        monkeypatch.setattr(recorder, "_lock_table", lambda curs: (locks.append(curs),
                                                                   lock_table(curs)))
        svc.create_schedule("ns", "a")
        svc.rollback("ns", "a")
        assert len(locks) == 2, "one table lock per append"
        assert recorder.datastore.enable_db_functions is False
