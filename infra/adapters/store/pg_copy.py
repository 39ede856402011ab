"""Writing the operator views' rows on PostgreSQL with COPY (projections/batch.py ``RowWriter``).

A batch's rows go in with one COPY per table on the batch's own psycopg connection, inside
its open transaction: one round trip and no statement per row. Replacing rows is a DELETE of
their keys and a COPY of the new rows in that same transaction, so a reader sees the old rows
or the new ones, never neither.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import psycopg
from sqlalchemy.exc import DBAPIError


class CopyRows:
    """The views' ``RowWriter`` interface (insert, replace), by COPY."""

    def insert(self, conn: Any, table: Any, rows: list[dict[str, Any]]) -> None:
        quote = conn.dialect.identifier_preparer
        columns = list(rows[0])
        statement = (f"COPY {quote.format_table(table)} "
                     f"({', '.join(quote.quote(c) for c in columns)}) FROM STDIN")
        with _translated(statement), _cursor(conn) as cur, cur.copy(statement) as copy:
            for row in rows:
                copy.write_row([row[c] for c in columns])

    def replace(self, conn: Any, table: Any, key: str, rows: list[dict[str, Any]]) -> None:
        quote = conn.dialect.identifier_preparer
        statement = f"DELETE FROM {quote.format_table(table)} WHERE {quote.quote(key)} = ANY(%s)"
        with _translated(statement), _cursor(conn) as cur:
            cur.execute(statement, [[r[key] for r in rows]])
        self.insert(conn, table, rows)


def _cursor(conn: Any) -> Any:
    """A cursor on the SQLAlchemy connection's psycopg connection (its transaction)."""
    return conn.connection.driver_connection.cursor()


@contextmanager
def _translated(statement: str) -> Iterator[None]:
    """psycopg's errors as SQLAlchemy's (``IntegrityError``, ``OperationalError``...), as the
    views' own statements raise them: a racing projector's duplicate row reads as the race it
    is, a timeout as a timeout."""
    try:
        yield
    except psycopg.Error as exc:
        raise DBAPIError.instance(statement, None, exc, psycopg.Error) from exc
