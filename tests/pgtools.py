"""PostgreSQL for tests: a fresh database per test session, a fresh schema per store.

Every database and schema made here is dropped again. Outside CI a server that cannot be
reached skips the PostgreSQL tests; in CI (``CI=true``) it fails them.
"""
from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from typing import Iterator

import psycopg
import pytest

PG_HOST = os.environ.get("SCHEDFENCE_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("SCHEDFENCE_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("SCHEDFENCE_TEST_PG_USER", "postgres")


def admin() -> psycopg.Connection:
    return psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres",
                           autocommit=True, connect_timeout=5)


def require_postgres() -> None:
    try:
        admin().close()
    except psycopg.Error as exc:
        message = f"PostgreSQL at {PG_HOST}:{PG_PORT} is not reachable: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def database_url(dbname: str, schema: str | None = None) -> str:
    url = f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{dbname}"
    return f"{url}?schema={schema}" if schema else url


def create_database(prefix: str = "schedfence_test") -> str:
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    with admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def fresh_database(prefix: str = "schedfence_test") -> Iterator[str]:
    """A new, empty database for the block; its URL (public schema) is yielded."""
    require_postgres()
    name = create_database(prefix)
    try:
        yield database_url(name)
    finally:
        drop_database(name)


def new_schema_url(dbname: str) -> str:
    """A URL on a schema nobody has used; the store creates it on first use."""
    return database_url(dbname, f"t_{uuid.uuid4().hex[:12]}")


def schema_of(url: str) -> tuple[str, str]:
    """(database, schema) of a store URL made by ``new_schema_url``/``database_url``."""
    from schedfence.infra.adapters.store.pg import parse_pg_url
    target = parse_pg_url(url)
    return target.dbname, target.schema


def schema_exists(url: str) -> bool:
    dbname, schema = schema_of(url)
    with connect(url) as conn:
        return conn.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                            (schema,)).fetchone() is not None


def connect(url: str) -> psycopg.Connection:
    """An autocommit connection to the store's database with its schema on the search path."""
    dbname, schema = schema_of(url)
    return psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=dbname,
                           autocommit=True, connect_timeout=5,
                           options=f"-csearch_path={schema}")


def table_names(url: str) -> set[str]:
    dbname, schema = schema_of(url)
    with connect(url) as conn:
        rows = conn.execute("SELECT table_name FROM information_schema.tables "
                            "WHERE table_schema = %s", (schema,)).fetchall()
    return {r[0] for r in rows}


def free_port() -> int:
    """A local TCP port nothing listens on (for unreachable-server tests)."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drop_schema(url: str) -> None:
    """Drop a store's schema and everything in it (its database stays)."""
    from psycopg import sql
    _, schema = schema_of(url)
    with connect(url) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
