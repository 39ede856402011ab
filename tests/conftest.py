"""Fixtures shared by the whole suite: the two stores every store test runs on, and the
PostgreSQL databases made and dropped by the tests.

A test that takes ``store_url``, ``file_store_url``, ``new_store_url`` or ``store_kind`` (or the
``world`` fixture of ``tests.helpers``, which takes ``store_url``) runs twice, with ids
``[sqlite]`` and ``[postgres]``:

- ``store_url``: a private store for this test: SQLite in memory, or a fresh PostgreSQL schema;
- ``file_store_url``: a store that outlives its services (reopen after close, several services
  or processes): a SQLite file in ``tmp_path``, or a fresh PostgreSQL schema (a schema URL
  persists across opens just as a file does);
- ``new_store_url(name)``: more such persistent stores, one per name;
- ``stores`` (session scope, for module-scoped fixtures and hypothesis tests, which must not
  use function-scoped fixtures): ``stores.kind`` and ``stores.new()``, a fresh persistent store
  on every call.

Every PostgreSQL schema lives in the session's own database, which is dropped at the end of
the run. Outside CI an unreachable server skips the ``[postgres]`` half; in CI (``CI=true``)
it fails it (``tests.pgtools.require_postgres``).

There is no default destination, so every test chooses one: ``SCHEDFENCE_DESTINATION=sim``
(the simulator kept in the store) for the CLI, in-process and in subprocesses, unless a test
passes its own (``--destination``) or removes it to test the refusal.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import pytest
from hypothesis import settings

from tests import pgtools
from tests.helpers import MEMORY, world  # noqa: F401  (world: the fixture, for every module)

STORES = ("sqlite", "postgres")
# No per-example deadline: ``make test`` runs two test processes on two cores beside the
# servers and workers they start, where an example's wall time measures the machine's load.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


@pytest.fixture(autouse=True)
def destination_is_the_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDFENCE_DESTINATION", "sim")


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


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgres``: every test that depends on it runs on both stores."""
    return request.param


@pytest.fixture
def new_store_url(store_kind: str, tmp_path: Path,
                  request: pytest.FixtureRequest) -> Callable[..., str]:
    """``new_store_url(name="store")``: a persistent store per name (the same name gives the
    same URL): ``tmp_path/NAME.db`` on SQLite, a fresh schema on PostgreSQL."""
    made: dict[str, str] = {}

    def make(name: str = "store") -> str:
        if name not in made:
            if store_kind == "postgres":
                made[name] = pgtools.new_schema_url(request.getfixturevalue("pg_database"))
            else:
                made[name] = f"sqlite:///{tmp_path / name}.db"
        return made[name]

    return make


@pytest.fixture
def file_store_url(new_store_url: Callable[..., str]) -> str:
    """A store that survives closing its services: a SQLite file or a PostgreSQL schema."""
    return new_store_url()


@pytest.fixture
def store_url(store_kind: str, request: pytest.FixtureRequest) -> str:
    """The test's own store: SQLite in memory, or a fresh PostgreSQL schema."""
    if store_kind == "postgres":
        return request.getfixturevalue("pg_store")
    return MEMORY


@dataclass
class Stores:
    """Fresh stores of one kind, made on demand (see ``stores``)."""

    kind: str
    _new: Callable[[], str]

    def new(self) -> str:
        """A store nobody has used that outlives its services: a SQLite file or a schema."""
        return self._new()


@pytest.fixture(scope="session", params=STORES)
def stores(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Stores:
    kind: str = request.param
    if kind == "postgres":
        dbname = request.getfixturevalue("pg_database")
        return Stores(kind, lambda: pgtools.new_schema_url(dbname))
    numbers = itertools.count(1)
    return Stores(kind, lambda: f"sqlite:///{tmp_path_factory.mktemp('store')}/"
                                f"s{next(numbers)}.db")
