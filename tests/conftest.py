"""Fixtures shared by the whole suite: PostgreSQL databases made and dropped by the tests."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests import pgtools


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """One database for the session (dropped at the end); tests take schemas in it."""
    pgtools.require_postgres()
    name = pgtools.create_database()
    yield name
    pgtools.drop_database(name)


@pytest.fixture
def pg_store(pg_database: str) -> str:
    """A store URL on a fresh schema of the session database."""
    return pgtools.new_schema_url(pg_database)
