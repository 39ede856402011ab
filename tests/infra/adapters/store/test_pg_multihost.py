"""Multi-host store URLs: reading them, and running processes following a promotion.

The failover tests run on a private primary and hot standby (tests/pg_standby.py): a service
opened on ``postgresql://...@primary,standby/fence``, or a ``schedfence worker`` process started
on it, writes on the primary; the primary is stopped and the standby promoted (``pg_ctl
promote``); the same open service or running worker then writes on the new primary (synchronous
standby), or writes nothing until ``schedfence promote`` has raised the epoch there
(asynchronous standby). What was written is read back from a fresh process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import psycopg
import pytest

from schedfence.domain.errors import InvalidArgument, StandbyNotPromoted
from schedfence.infra.adapters.store.eventstore import event_table, parse_store_url
from schedfence.infra.adapters.store.pg import parse_pg_url
from schedfence.infra.application.service import MigrationService, open_service
from tests.pg_standby import StandbyPair, standby_pair
from tests.pgtools import free_port

ROOT = Path(__file__).resolve().parents[4]
SCHEMA = "fence"


# -- reading the URL ---------------------------------------------------------------------------
def test_several_hosts_are_read_with_their_ports_and_default_to_read_write() -> None:
    t = parse_pg_url("postgresql://ann:pw@db1:5433,db2,[::1]:6000/fence?schema=blue")
    assert t.hosts == (("db1", 5433), ("db2", 5432), ("::1", 6000))
    assert (t.user, t.password, t.dbname, t.schema) == ("ann", "pw", "fence", "blue")
    assert t.target_session_attrs == "read-write"
    assert t.servers() == {"host": "db1,db2,::1", "port": "5433,5432,6000",
                           "target_session_attrs": "read-write"}
    assert t.connect_args()["host"] == "db1,db2,::1"
    assert t.env()["POSTGRES_HOST"] == "db1,db2,::1" and t.env()["POSTGRES_PORT"] == \
        "5433,5432,6000"


def test_the_redacted_url_names_every_host_and_no_password() -> None:
    shown = parse_store_url("postgres://ann:s3cret@db1:5433,db2/fence?"
                            "target_session_attrs=primary").redacted
    assert shown == "postgresql://ann:***@db1:5433,db2:5432/fence?target_session_attrs=primary"


@pytest.mark.parametrize("attrs", ["any", "read-write", "read-only", "primary", "standby",
                                   "prefer-standby"])
def test_every_libpq_session_attr_is_taken(attrs: str) -> None:
    t = parse_pg_url(f"postgresql://h1,h2/db?target_session_attrs={attrs}")
    assert t.target_session_attrs == attrs


def test_one_host_keeps_libpq_s_default_unless_told() -> None:
    assert parse_pg_url("postgresql://h/db").target_session_attrs is None
    assert parse_pg_url("postgresql://h/db?target_session_attrs=read-write"
                        ).servers()["target_session_attrs"] == "read-write"


@pytest.mark.parametrize("url, message", [
    ("postgresql://h1,h2/db?target_session_attrs=master", "is not one of libpq's"),
    ("postgresql://u:hunter2@h1,,h2/db", "are not HOST[:PORT] entries"),
    ("postgresql://u:hunter2@h1:5432,h2:99999/db", "port 99999 is not between"),
    ("postgresql://u:hunter2@h1:5432,h2:x/db", "the port must be a number"),
])
def test_a_bad_host_list_or_session_attr_is_one_line(url: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("[", r"\[")) as exc:
        parse_store_url(url)
    assert "\n" not in exc.value.message and "hunter2" not in exc.value.message


# -- following a promotion ---------------------------------------------------------------------
def multi_host_url(pair: StandbyPair) -> str:
    return (f"postgresql://postgres@127.0.0.1:{pair.primary.port},127.0.0.1:{pair.standby.port}"
            f"/fence?schema={SCHEMA}&target_session_attrs=read-write")


def events_on(url: str) -> int:
    with psycopg.connect(url, connect_timeout=5) as conn:
        return conn.execute(f'SELECT count(*) FROM "{SCHEMA}"."{event_table()}"').fetchone()[0]


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``schedfence`` in a fresh process on ``url`` (the store's own simulator as destination)."""
    env = {**os.environ, "SCHEDFENCE_STORE": url, "SCHEDFENCE_DESTINATION": "sim"}
    return subprocess.run([sys.executable, "-m", "schedfence.infra.cli", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def listed(url: str) -> set[str]:
    done = cli(url, "list", "--json")
    assert done.returncode == 0, done.stderr
    return {row["schedule_id"] for row in json.loads(done.stdout)["schedules"]}


def fail_over(pair: StandbyPair, svc: MigrationService) -> None:
    """Write on the primary through ``svc``, stop the primary, promote the standby."""
    svc.create_schedule("ns", "before")
    pair.wait_replayed()
    pair.primary.stop("fast")
    pair.promote()


def test_after_a_synchronous_standby_is_promoted_the_open_service_writes_there() -> None:
    with standby_pair(synchronous=True) as pair:
        pair.primary.create_database("fence")
        url = multi_host_url(pair)
        with open_service(url, "sim") as svc:
            fail_over(pair, svc)
            svc.create_schedule("ns", "after")  # no restart, no promote
            assert {v.schedule_id for v in svc.list_schedules()} == {"before", "after"}
        standby = pair.standby.url("fence")
        assert listed(f"{standby}?schema={SCHEMA}") == {"before", "after"}
        assert listed(url) == {"before", "after"}


def test_after_an_asynchronous_standby_is_promoted_nothing_is_written_until_promote() -> None:
    with standby_pair(synchronous=False) as pair:
        pair.primary.create_database("fence")
        url = multi_host_url(pair)
        standby = pair.standby.url("fence")
        with open_service(url, "sim") as svc:
            fail_over(pair, svc)
            count = events_on(standby)
            for _ in range(2):  # refused each time, not only on the first connection
                with pytest.raises(StandbyNotPromoted, match="schedfence promote"):
                    svc.create_schedule("ns", "refused")
            assert events_on(standby) == count  # nothing written
            # In this process (as `serve`'s POST /promote): its own append is let through.
            assert svc.promote("ann", "INC-1: async failover") == 1
            svc.create_schedule("ns", "after")  # the same open service, the epoch raised
        assert listed(f"{standby}?schema={SCHEMA}") == {"before", "after"}


# -- a running worker process ------------------------------------------------------------------
def state_of(url: str, schedule_id: str) -> str | None:
    done = cli(url, "status", "ns", schedule_id, "--json")
    assert done.returncode == 0, done.stderr
    migration = json.loads(done.stdout)["migration"]
    return migration["state"] if migration else None


def wait_for(what: Callable[[], bool], timeout: float = 60) -> float:
    """Seconds until ``what()`` holds (polled); fails after ``timeout``."""
    started = time.monotonic()
    while not what():
        assert time.monotonic() - started < timeout, "timed out"
        time.sleep(0.2)
    return time.monotonic() - started


@contextmanager
def worker(url: str) -> Iterator[subprocess.Popen[str]]:
    """``schedfence worker --json`` on ``url`` for the block; stopped (SIGTERM) at its end."""
    env = {**os.environ, "SCHEDFENCE_STORE": url, "SCHEDFENCE_DESTINATION": "sim"}
    proc = subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", "worker", "--json",
                             "--poll-interval", "0.2", "--claim-grace", "0"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.returncode is None:  # not stopped and read by the test
            proc.terminate()
            proc.communicate(timeout=60)


def request_rollback(url: str, schedule_id: str) -> None:
    for args in (("schedule", "create", "ns", schedule_id), ("rollback", "ns", schedule_id)):
        done = cli(url, *args)
        assert done.returncode == 0, done.stderr


def test_a_running_worker_follows_a_synchronous_standby_s_promotion() -> None:
    with standby_pair(synchronous=True) as pair:
        pair.primary.create_database("fence")
        url = multi_host_url(pair)
        with worker(url) as proc:
            request_rollback(url, "before")
            wait_for(lambda: state_of(url, "before") == "completed")
            pair.primary.stop("fast")
            pair.promote()
            request_rollback(url, "after")  # fresh processes: on the new primary
            wait_for(lambda: state_of(url, "after") == "completed")
            assert proc.poll() is None  # the same process, never restarted
        standby = f"{pair.standby.url('fence')}?schema={SCHEMA}"
        assert (state_of(standby, "before"), state_of(standby, "after")) == \
            ("completed", "completed")


def test_a_running_worker_writes_nothing_after_an_asynchronous_promotion_until_promote(
        ) -> None:
    with standby_pair(synchronous=False) as pair:
        pair.primary.create_database("fence")
        url = multi_host_url(pair)
        standby = pair.standby.url("fence")
        with worker(url) as proc:
            request_rollback(url, "before")
            wait_for(lambda: state_of(url, "before") == "completed")
            pair.wait_replayed()
            pair.primary.stop("fast")
            pair.promote()
            # A process started after the failover never saw the old primary: it writes (the
            # operator's rule: promote first). The running worker must not act on it.
            request_rollback(url, "after")
            count = events_on(standby)
            time.sleep(3)  # ~15 polls of the worker
            assert events_on(standby) == count and state_of(url, "after") == "pending"
            done = cli(url, "promote", "--actor", "ann", "--reason", "INC-2: async failover")
            assert done.returncode == 0, done.stderr
            wait_for(lambda: state_of(url, "after") != "pending")  # the same worker acts
            assert proc.poll() is None
            proc.terminate()
            out, err = proc.communicate(timeout=60)
        assert "failed_precondition" in err and "schedfence promote" in err, err


def test_no_reachable_host_is_one_line_naming_every_host_without_the_password() -> None:
    ports = [free_port(), free_port()]
    url = f"postgresql://bob:hunter2@127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}/fence"
    done = cli(url, "list")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: store_unavailable: ") and "hunter2" not in done.stderr
    assert f"bob:***@127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}/fence" in done.stderr


@contextmanager
def hung_host() -> Iterator[int]:
    """A port that takes connections and never answers (a host that hangs): the kernel
    completes the handshake into the backlog, nobody ever reads or writes."""
    import socket
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]
    finally:
        sock.close()


def test_a_hung_first_host_is_passed_over_for_the_next(pg_database: str) -> None:
    """Issue 45, item 8: each host gets libpq's connect_timeout, and the pool waits for them
    all (before, the pool gave up after one host's timeout: every command failed
    ``store_unavailable: couldn't get a connection after 5.00 sec``)."""
    with hung_host() as hung:
        url = (f"postgresql://postgres@127.0.0.1:{hung},127.0.0.1:5432/{pg_database}"
               f"?schema=hung_first&target_session_attrs=read-write")
        for args in (("schedule", "create", "ns", "s1"), ("rollback", "ns", "s1"),
                     ("worker", "--until-idle")):
            done = cli(url, *args)
            assert done.returncode == 0, (args, done.stderr[-600:])
        assert listed(url) == {"s1"}
        status = cli(url, "status", "ns", "s1", "--json")  # the libpq client's read
        assert status.returncode == 0, status.stderr[-600:]
        assert json.loads(status.stdout)["migration"]["state"] == "completed"
