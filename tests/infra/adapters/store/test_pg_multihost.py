"""Multi-host store URLs: reading them, and a running service following a promotion.

The failover tests run on a private primary and hot standby (tests/pg_standby.py): a service
opened on ``postgresql://...@primary,standby/fence`` writes on the primary; the primary is
stopped and the standby promoted (``pg_ctl promote``); the same open service then writes on the
new primary (synchronous standby), or writes nothing until ``schedfence promote`` has raised the
epoch there (asynchronous standby). What was written is read back from a fresh process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from schedfence.domain.errors import InvalidArgument, StandbyNotPromoted
from schedfence.infra.adapters.store.eventstore import event_table, parse_store_url
from schedfence.infra.adapters.store.pg import parse_pg_url
from schedfence.infra.application.service import MigrationService, open_service
from tests.pg_standby import StandbyPair, standby_pair

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
            done = cli(url, "promote", "--actor", "ann", "--reason", "INC-1: async failover")
            assert done.returncode == 0, done.stderr
            svc.create_schedule("ns", "after")  # the same open service, the epoch raised
            assert svc.epoch() == 1
        assert listed(f"{standby}?schema={SCHEMA}") == {"before", "after"}
