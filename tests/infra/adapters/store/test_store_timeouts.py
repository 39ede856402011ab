"""A read never blocks forever behind someone else's lock: every store connection has a lock and
a statement timeout (``?lock_timeout=``/``?statement_timeout=`` in a PostgreSQL URL), and a
timeout is one ``store_unavailable`` line naming it. SQLite names its own lock timeout."""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from sqlalchemy import text

import schedfence.infra.adapters.store.eventstore as fence_store
from schedfence.infra.cli.commands import cli
import schedfence.infra.adapters.store.pg as pg
from schedfence.infra.adapters.store.pg import StoreUnavailable, parse_pg_url
from schedfence.infra.application.service import open_service

from tests import pgtools

ROOT = Path(__file__).resolve().parents[4]


def _run(url: str, *args: str) -> tuple[int, float, str]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", url, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    return done.returncode, time.monotonic() - start, done.stderr.strip()


def _holding(url: str, mode: str) -> psycopg.Connection:
    """A second session holding ``mode`` on the event table in an open transaction."""
    _, schema = pgtools.schema_of(url)
    conn = pgtools.connect(url)
    conn.autocommit = False
    conn.execute(f'LOCK TABLE "{schema}".schedfence_events IN {mode} MODE')
    return conn


@pytest.mark.parametrize("option,message", [
    ("lock_timeout=abc", "lock_timeout='abc' is not a duration"),
    ("lock_timeout=10", "is not a duration such as 10s"),
    ("statement_timeout=0s", "must be more than 0"),
    ("statement_timeout=25h", "is not a duration"),
    ("lock_timeout=2000min", "at most 24 hours"),
    ("lock_timeout=1s&lock_timeout=2s", "repeats option(s) lock_timeout"),
    ("deadline=1s", "not supported (only schema, lock_timeout, statement_timeout and "
                    "target_session_attrs)"),
])
def test_bad_timeouts_are_invalid_arguments(option: str, message: str) -> None:
    url = f"postgresql://u:secret@127.0.0.1:1/db?schema=s&{option}"
    result = CliRunner().invoke(cli, ["--store", url, "status", "ns", "a"])
    assert result.exit_code == 1 and "secret" not in result.stderr
    assert result.stderr.startswith("error: invalid_argument: ") and message in result.stderr


def test_timeouts_parse_with_units_and_have_defaults() -> None:
    default = parse_pg_url("postgresql://u@h/db")
    assert (default.lock_timeout_ms, default.statement_timeout_ms) == (10_000, 60_000)
    target = parse_pg_url("postgresql://u@h/db?statement_timeout=2min&lock_timeout=500ms")
    assert (target.lock_timeout_ms, target.statement_timeout_ms) == (500, 120_000)
    assert target.redacted.endswith("?lock_timeout=500ms&statement_timeout=120s")
    assert target.env()["POSTGRES_LOCK_TIMEOUT"] == "1"  # the insert lock: whole seconds


def _show(conn_execute) -> tuple[str, str]:
    return (conn_execute("SHOW lock_timeout"), conn_execute("SHOW statement_timeout"))


def test_every_store_connection_has_the_timeouts(pg_store: str) -> None:
    url = pg_store + "&lock_timeout=1500ms&statement_timeout=7s"
    with open_service(url, "sim") as service:
        service.create_schedule("ns", "a")
        with service.app.recorder.datastore.get_connection() as conn:
            assert _show(lambda q: conn.execute(q).fetchone()["lock_timeout" if "lock" in q
                                                              else "statement_timeout"]) == \
                ("1500ms", "7s")
        service.oncall()  # opens the projection engine
        from schedfence.infra.adapters.store.sql import engine_for_application
        with engine_for_application(service.app).connect() as conn:
            assert _show(lambda q: conn.execute(text(q)).scalar()) == ("1500ms", "7s")
        with parse_pg_url(url).connect() as conn:
            assert _show(lambda q: conn.execute(q).fetchone()[0]) == ("1500ms", "7s")
    with open_service(pg_store, "sim") as service:  # the defaults
        with service.app.recorder.datastore.get_connection() as conn:
            assert conn.execute("SHOW lock_timeout").fetchone()["lock_timeout"] == "10s"
            assert conn.execute("SHOW statement_timeout").fetchone()["statement_timeout"] \
                == "1min"


def test_status_behind_an_access_exclusive_lock_fails_fast_naming_the_timeout(
        pg_store: str) -> None:
    assert _run(pg_store, "schedule", "create", "ns", "a")[0] == 0
    url = pg_store + "&lock_timeout=1s"
    holder = _holding(pg_store, "ACCESS EXCLUSIVE")
    try:
        code, took, err = _run(url, "status", "ns", "a")
    finally:
        holder.rollback()
        holder.close()
    # The 1 s timeout fired (the message names it; the default is 10 s): no wall-clock bound,
    # which a loaded machine's interpreter start-up alone can break.
    assert code == 1, (took, err)
    assert err.startswith("error: store_unavailable: ") and err.count("\n") == 0, err
    assert "lock timeout 1s" in err
    assert _run(url, "status", "ns", "a")[0] == 0  # released: it works again


@pytest.mark.parametrize("table,command", [
    ("schedfence_proj_migrations", ("oncall",)),
    ("schedfence_proj_counts", ("projection", "status")),
    ("schedfence_proj_tracking", ("audit", "--since", "1h")),
    ("schedfence_proj_migrations", ("worker", "--until-idle")),
    ("schedfence_sim_meta", ("worker", "--until-idle")),
])
def test_the_projections_and_the_simulator_name_their_timeouts_too(
        pg_store: str, table: str, command: tuple[str, ...]) -> None:
    for args in (("schedule", "create", "ns", "a"), ("rollback", "ns", "a"), ("oncall",)):
        assert _run(pg_store, *args)[0] == 0
    _, schema = pgtools.schema_of(pg_store)
    holder = pgtools.connect(pg_store)
    holder.autocommit = False
    holder.execute(f'LOCK TABLE "{schema}".{table} IN ACCESS EXCLUSIVE MODE')
    try:
        code, took, err = _run(pg_store + "&lock_timeout=1s", *command)
    finally:
        holder.rollback()
        holder.close()
    assert code == 1, (took, err)  # the 1 s timeout, named below (no wall-clock bound)
    assert err.startswith("error: store_unavailable: the store on postgresql://") and \
        "lock timeout 1s" in err and err.count("\n") == 0, err


def test_an_open_service_read_gives_up_at_once_and_a_write_still_waits_its_turn(
        pg_store: str) -> None:
    with open_service(pg_store + "&lock_timeout=300ms", "sim") as service:
        service.create_schedule("ns", "a")
        holder = _holding(pg_store, "ACCESS EXCLUSIVE")
        start = time.monotonic()
        try:
            with pytest.raises(StoreUnavailable, match="lock timeout 300ms") as err:
                service.schedule("ns", "a")
        finally:
            holder.rollback()
        assert time.monotonic() - start < 3 and err.value.code == "store_unavailable"
        # A writer queues on the insert lock and retries its wait, as eventsourcing does:
        # a lock released within those retries costs the write nothing.
        holder = _holding(pg_store, "EXCLUSIVE")  # reads still pass, inserts wait
        threading.Timer(1.5, holder.rollback).start()
        service.update_schedule("ns", "a", paused=True)
        assert service.schedule("ns", "a").paused
        holder.close()


def test_a_statement_timeout_is_named(pg_store: str) -> None:
    target = parse_pg_url(pg_store + "&statement_timeout=100ms")
    with target.connect() as conn, pytest.raises(psycopg.errors.QueryCanceled) as err:
        conn.execute("SELECT pg_sleep(2)")
    named = target.timeout_of(err.value, "reading")
    assert named is not None and "statement timeout 100ms" in named.message
    assert named.code == "store_unavailable"
    assert pg.timeout_of(ValueError("x"), 1, 1, "here") is None


def test_sqlite_names_its_lock_timeout(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(fence_store, "SQLITE_LOCK_TIMEOUT", 1, raising=False)
    path = tmp_path / "store.db"
    url = f"sqlite:///{path}"
    runner = CliRunner()
    assert runner.invoke(cli, ["--store", url, "schedule", "create", "ns", "a"]).exit_code == 0
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        start = time.monotonic()
        result = runner.invoke(cli, ["--store", url, "schedule", "pause", "ns", "a"])
        assert time.monotonic() - start < 10
        assert result.exit_code == 1 and result.stderr.startswith("error: store_unavailable: ")
        assert "lock timeout 1s, SQLITE_LOCK_TIMEOUT" in result.stderr, result.stderr
        # reads are not blocked by a writer (WAL)
        assert runner.invoke(cli, ["--store", url, "status", "ns", "a"]).exit_code == 0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert runner.invoke(cli, ["--store", url, "schedule", "pause", "ns", "a"]).exit_code == 0
