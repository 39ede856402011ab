"""A small read-only PostgreSQL client over the system's libpq through ctypes, for the one read
``status`` makes from the projection's rows (infra/application/status_read.py).

psycopg's import alone costs about three times ``python -c "import pydantic, eventsourcing"``
(benchmarks/cli_startup.py); loading libpq itself costs a few milliseconds. This client does
what that read needs and no more: connect with libpq's own keywords (every host, the session
options, ``target_session_attrs``), run a statement with text parameters (``%s`` markers, as
psycopg's; a list is sent as an array literal), and read rows back as text, turned into ``int``,
``bool`` or ``UUID`` by their column type. ``load()`` answers None where no libpq can be
loaded: the caller then connects with psycopg, as before.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, Sequence
from uuid import UUID

from schedfence.infra.adapters.store.pg import StoreUnavailable

NAMES = ("libpq.so.5", "libpq.5.dylib", "libpq.so")
CONNECTION_OK, COMMAND_OK, TUPLES_OK = 0, 1, 2
# Column types read as something other than text (pg_type oids): bool, int8, int2, int4, uuid.
_FROM_TEXT: dict[int, Callable[[str], Any]] = {16: lambda v: v == "t", 20: int, 21: int,
                                               23: int, 2950: UUID}
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "PQconnectdbParams": (ctypes.c_void_p, [ctypes.POINTER(ctypes.c_char_p),
                                            ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]),
    "PQstatus": (ctypes.c_int, [ctypes.c_void_p]),
    "PQerrorMessage": (ctypes.c_char_p, [ctypes.c_void_p]),
    "PQfinish": (None, [ctypes.c_void_p]),
    "PQexecParams": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                       ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p),
                                       ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]),
    "PQresultStatus": (ctypes.c_int, [ctypes.c_void_p]),
    "PQresultErrorMessage": (ctypes.c_char_p, [ctypes.c_void_p]),
    "PQntuples": (ctypes.c_int, [ctypes.c_void_p]),
    "PQnfields": (ctypes.c_int, [ctypes.c_void_p]),
    "PQftype": (ctypes.c_uint, [ctypes.c_void_p, ctypes.c_int]),
    "PQgetisnull": (ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]),
    "PQgetvalue": (ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]),
    "PQclear": (None, [ctypes.c_void_p]),
}


class QueryFailed(Exception):
    """The server refused a statement (its message, first line)."""


def load() -> Any | None:
    """The system's libpq with the signatures this client calls, or None."""
    for name in NAMES:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        for function, (restype, argtypes) in _SIGNATURES.items():
            getattr(lib, function).restype = restype
            getattr(lib, function).argtypes = argtypes
        return lib
    return None


def _strings(values: Sequence[str | None]) -> Any:
    return (ctypes.c_char_p * len(values))(*[None if v is None else v.encode() for v in values])


def _param(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):  # an array literal: uuids, ints or plain words
        return "{" + ",".join(str(v) for v in value) + "}"
    return str(value)


class Connection:
    """One libpq connection (``keywords``: libpq's connection keywords, e.g. host, port,
    user, password, dbname, options, connect_timeout, target_session_attrs)."""

    def __init__(self, lib: Any, keywords: dict[str, str], redacted: str) -> None:
        self.lib = lib
        keywords = dict(keywords, client_encoding="UTF8")  # the text it decodes
        pairs = [(k, v) for k, v in keywords.items() if v is not None]
        self.conn = lib.PQconnectdbParams(_strings([k for k, _ in pairs] + [None]),
                                          _strings([v for _, v in pairs] + [None]), 0)
        if lib.PQstatus(self.conn) != CONNECTION_OK:
            message = _first_line(lib.PQerrorMessage(self.conn))
            self.close()
            raise StoreUnavailable(f"cannot connect to {redacted}: {message}")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Rows:
        parts = sql.split("%s")
        text = "".join(p + (f"${i + 1}" if i < len(parts) - 1 else "")
                       for i, p in enumerate(parts))
        values = [_param(v) for v in params]
        result = self.lib.PQexecParams(self.conn, text.encode(), len(values), None,
                                       _strings(values) if values else None, None, None, 0)
        try:
            status = self.lib.PQresultStatus(result)
            if status not in (COMMAND_OK, TUPLES_OK):
                raise QueryFailed(_first_line(self.lib.PQresultErrorMessage(result) or
                                              self.lib.PQerrorMessage(self.conn)))
            return _Rows(self._rows(result) if status == TUPLES_OK else [])
        finally:
            self.lib.PQclear(result)

    def _rows(self, result: Any) -> list[tuple[Any, ...]]:
        lib = self.lib
        convert = [_FROM_TEXT.get(lib.PQftype(result, c), str)
                   for c in range(lib.PQnfields(result))]
        return [tuple(None if lib.PQgetisnull(result, r, c) else
                      f(lib.PQgetvalue(result, r, c).decode()) for c, f in enumerate(convert))
                for r in range(lib.PQntuples(result))]

    def cursor(self) -> _Cursor:
        return _Cursor(self)

    def close(self) -> None:
        if self.conn:
            self.lib.PQfinish(self.conn)
            self.conn = None

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class _Rows:
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class _Cursor:
    """What projections/status_rows.py calls of a DB-API cursor."""

    def __init__(self, conn: Connection) -> None:
        self.conn, self.rows = conn, _Rows([])

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self.rows = self.conn.execute(sql, params)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows.fetchall()

    def close(self) -> None:
        self.rows = _Rows([])


def _first_line(message: bytes | None) -> str:
    lines = (message or b"").decode(errors="replace").strip().splitlines()
    return lines[0] if lines else "no message"
