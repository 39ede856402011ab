"""A read that a dropped PostgreSQL connection fails once is tried again (a worker starting
while its connections are being killed must not exit); other failures are raised at once."""
from __future__ import annotations

import psycopg
import pytest

from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.store.pg import StoreTimeout


def test_a_dropped_connection_is_read_again(pg_store: str) -> None:
    with open_service(pg_store, "sim") as svc:
        calls = []

        def flaky() -> int:
            calls.append(1)
            if len(calls) == 1:
                raise psycopg.OperationalError("terminating connection due to administrator "
                                               "command")
            return svc.app.event_count()

        assert svc.app.read_retrying(flaky) == svc.event_count() and len(calls) == 2


def test_a_bug_or_a_timeout_is_not_retried(pg_store: str) -> None:
    with open_service(pg_store, "sim") as svc:
        calls = []

        def broken() -> None:
            calls.append(1)
            raise KeyError("a bug")

        with pytest.raises(KeyError):
            svc.app.read_retrying(broken)

        def timed_out() -> None:
            calls.append(1)
            raise StoreTimeout("statement timeout")

        with pytest.raises(StoreTimeout):
            svc.app.read_retrying(timed_out)
        assert len(calls) == 2


def test_a_lasting_outage_is_raised_after_the_attempts(pg_store: str) -> None:
    with open_service(pg_store, "sim") as svc:
        calls = []

        def down() -> None:
            calls.append(1)
            raise psycopg.OperationalError("connection refused")

        with pytest.raises(psycopg.OperationalError):
            svc.app.read_retrying(down, attempts=2)
        assert len(calls) == 2
