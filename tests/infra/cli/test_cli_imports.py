"""The CLI imports what a command needs when that command runs: importing the package, or running
``status`` on SQLite, never loads Temporal's SDK, the HTTP stack, SQLAlchemy, psycopg or another
command's module. Checked on ``sys.modules`` of a fresh interpreter (what a ``schedfence`` process
loads), not by timing. The service builds its operator views, due index, leases and batch worker
on first use (what keeps SQLAlchemy out), and PostgreSQL URLs are read as SQLAlchemy's
``make_url`` reads them, without importing it (the two readings held equal here)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from schedfence.domain.errors import InvalidArgument
from schedfence.infra.cli.commands import COMMANDS, cli
from schedfence.infra.application.offline import open_offline
from schedfence.infra.adapters.store.pg import parse_pg_url, url_parts

from tests.infra.cli.cli_runs import ROOT, ok

HEAVY = ("temporalio", "fastapi", "starlette", "uvicorn", "rich", "jinja2", "sqlalchemy",
         "psycopg", "asyncio")
OTHER_COMMANDS = ("admin", "jobs", "forward", "projections", "recovery", "replay", "replicate",
                  "scheduler", "serve", "metrics", "reads")
REPORT = ("import json, sys\n"
          "print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] in {heavy} or "
          "n.startswith('schedfence.infra.'))))\n")


def _loaded(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code + REPORT.format(heavy=repr(set(HEAVY)))],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_cli_loads_no_temporal_http_or_rich() -> None:
    loaded = _loaded("import schedfence.infra.cli\n")
    assert "schedfence.infra.cli.commands" in loaded  # the import really ran
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []


def test_status_loads_its_own_command_module_only(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'status.db'}"
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s1")
    code = ("from click.testing import CliRunner\n"
            "from schedfence.infra.cli.commands import cli\n"
            f"done = CliRunner().invoke(cli, ['--store', {store!r}, 'status', 'ns', 's1'])\n"
            "assert done.exit_code == 0 and 'schedule ns/s1' in done.output, done.output\n")
    loaded = _loaded(code)
    assert "schedfence.infra.cli.status" in loaded  # the projection is not built: the log's read
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []
    assert [m for m in loaded
            if m.removeprefix("schedfence.infra.cli.") in OTHER_COMMANDS] == []
    assert [m for m in loaded if m.startswith(("schedfence.infra.http",
                                               "schedfence.infra.web"))] == []
    # The operator views, due index, leases and the worker pool are built or imported on use.
    assert [m for m in loaded if m.startswith((
        "schedfence.projections.service_views", "schedfence.projections.queries",
        "schedfence.projections.audit_query",
        "schedfence.infra.adapters.store.sql", "schedfence.infra.engines.due",
        "schedfence.infra.engines.lease", "schedfence.infra.engines.pool",
        "schedfence.infra.engines.batch"))] == []


def test_a_service_builds_its_views_due_index_and_leases_on_first_use(tmp_path: Path) -> None:
    """In a fresh interpreter: reading a schedule and its migration loads no SQLAlchemy;
    the first read of the operator views does, and answers from the same store."""
    store = f"sqlite:///{tmp_path / 'lazy.db'}"
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s1")
    ok(store, "--destination", "sim", "rollback", "ns", "s1")
    code = ("import json, sys\n"
            "from schedfence.infra.application.offline import open_offline\n"
            f"svc = open_offline({store!r})\n"
            "state = svc.migration('ns', 's1').state\n"
            "before = 'sqlalchemy' in sys.modules\n"
            "stats = svc.stats()\n"
            "svc.close()\n"
            "print(json.dumps([state, before, 'sqlalchemy' in sys.modules, "
            "stats['migrations'], stats['by_state']['pending']]))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    state, before, after, migrations, pending = json.loads(done.stdout.splitlines()[-1])
    assert (state, before, after) == ("pending", False, True)
    assert (migrations, pending) == (1, 1)


def test_concurrent_first_uses_build_one_due_index_on_one_views(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'once.db'}"
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s1")
    svc = open_offline(store)
    try:
        start, seen = threading.Barrier(8), []

        def first_use() -> None:
            start.wait()
            seen.append((svc.due, svc.leases, svc.views, svc.worker))

        threads = [threading.Thread(target=first_use) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(map(lambda four: tuple(map(id, four)), seen))) == 1
        due, leases, views, _ = seen[0]
        assert due.views is views and leases.engine is views.engine
        assert due.open_ids() == []  # and it answers from the store
    finally:
        svc.close()


def test_closing_a_service_that_never_built_its_views_builds_none(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'closed.db'}"
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s1")
    svc = open_offline(store)
    assert svc.schedule("ns", "s1").schedule_id == "s1"
    svc.close()
    assert svc._parts == {}


# -- PostgreSQL URLs, read as make_url ----------------------------------------------------------
_URL_TEXT = st.lists(st.sampled_from(list("ab1_-.:/@?&=#%[] +é") + [
    "%40", "%2F", "%3A", "::1", "5432", "schema=s", "lock_timeout=1s"]), max_size=14).map("".join)


@settings(max_examples=400, deadline=None)
@given(scheme=st.sampled_from(["postgresql", "postgres", "postgresql+psycopg"]), rest=_URL_TEXT)
def test_a_url_splits_into_the_parts_make_url_reads(scheme: str, rest: str) -> None:
    """Same user, password, host, port, database and options as SQLAlchemy's ``make_url`` (a
    port that is not a number: ValueError in both), except that a URL with a bracketed host
    followed by text that ``make_url`` ignores is refused."""
    url = f"{scheme}://{rest}"
    try:
        theirs = make_url(url)
    except ValueError:
        with pytest.raises(ValueError):
            url_parts(url)
        return
    try:
        ours = url_parts(url)
    except InvalidArgument:
        assert re.search(r"\][^:/?]", url.split("?", 1)[0]), url
        return
    assert (ours.username, ours.password, ours.host, ours.port, ours.database) == \
        (theirs.username, theirs.password, theirs.host, theirs.port, theirs.database), url
    assert ours.query == theirs.query, url


@pytest.mark.parametrize("url, expected", [
    ("postgresql://alice:p%40ss/w@db.example:6543/fence?schema=blue&lock_timeout=2s",
     ("db.example", 6543, "alice", "p@ss/w", "fence", "blue", 2000)),
    ("postgres://[::1]:5433/db", ("::1", 5433, "postgres", "", "db", "public", 10_000)),
    ("postgresql+psycopg:///db", ("localhost", 5432, "postgres", "", "db", "public", 10_000)),
])
def test_a_store_url_reads_as_before(url: str, expected: tuple) -> None:
    t = parse_pg_url(url)
    assert (t.host, t.port, t.user, t.password, t.dbname, t.schema, t.lock_timeout_ms) == \
        expected


@pytest.mark.parametrize("url, message", [
    ("postgresql://h/db?schema=a&schema=b", "repeats option(s) schema"),
    ("postgresql://h/db?sslmode=require", "option(s) sslmode are not supported"),
    ("postgresql://h:5432", "names no database"),
    ("postgresql://[::1]x/db", "not a valid postgresql:// URL"),
    ("postgresql://h/db?schema=x\nlock_timeout=1s", "is not a plain identifier"),
])
def test_a_store_url_it_cannot_read_is_refused(url: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        parse_pg_url(url)


@pytest.mark.parametrize("url, ignored", [
    ("postgresql://[::1]x/db?schema=s", True),  # make_url: host ::1, no database, no schema
    ("postgresql://[::1]/db", False),
    ("postgresql://u:p]x@[::1]:5433/db", False),  # a ']' in the password is no host's end
    ("postgresql://h/db?schema=s", False),
])
def test_a_url_whose_end_make_url_ignores_is_refused(url: str, ignored: bool) -> None:
    if ignored:
        with pytest.raises(InvalidArgument, match="not a valid postgresql:// URL"):
            url_parts(url)
    else:
        ours, theirs = url_parts(url), make_url(url)
        assert (ours.username, ours.password, ours.host, ours.port, ours.database,
                ours.query) == (theirs.username, theirs.password, theirs.host, theirs.port,
                                theirs.database, theirs.query)


def test_a_line_break_is_read_percent_encoded_not_as_the_end() -> None:
    """``make_url`` alone would stop at the line break and read ``schema=s``."""
    assert dict(url_parts("postgresql://h/db?schema=s\nlock_timeout=1s").query) == \
        {"schema": "s\nlock_timeout=1s"}
    assert url_parts("postgresql://u:p\nw@h/db").password == "p\nw"


def test_every_registered_name_loads_the_command_of_that_name() -> None:
    assert set(cli.commands) == {*COMMANDS, "demo"}
    for name in cli.commands:
        command = cli.commands[name]
        assert isinstance(command, click.Command) and command.name == name
    assert cli.list_commands(click.Context(cli)) == sorted(cli.commands)
