"""The operator views' COPY writer on PostgreSQL: every value arrives as written (text that
COPY's own format would misread included), a replace swaps rows atomically, and errors read as
SQLAlchemy's, as the views' own statements raise them."""
from __future__ import annotations

import pytest
from sqlalchemy import BigInteger, Boolean, Column, MetaData, String, Table, Text, select
from sqlalchemy.exc import IntegrityError

from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.store.pg_copy import CopyRows
from schedfence.infra.adapters.store.sql import row_writer_for, writing
from schedfence.projections.batch import RowWriter

TRICKY = ["tab\there", "new\nline", "back\\slash", "\\N", "quote'\"", "ünïcödé ✓", "", " ",
          "a,b;c|d", "\r\n"]

meta = MetaData()
table = Table("schedfence_proj_copytest", meta,
              Column("k", String(36), primary_key=True), Column("text", Text),
              Column("n", BigInteger), Column("flag", Boolean))


@pytest.fixture
def engine(pg_store: str):
    with open_service(pg_store, "sim") as svc:
        engine = svc.views.engine
        meta.create_all(engine)
        yield engine


def _rows(engine) -> list[tuple]:
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(select(table).order_by(table.c.k))]


def test_the_store_writes_views_with_copy_on_postgresql_only(engine, tmp_path) -> None:
    assert isinstance(row_writer_for(engine), CopyRows)
    with open_service(f"sqlite:///{tmp_path / 's.db'}", "sim") as svc:
        assert row_writer_for(svc.views.engine) is None  # the views' executemany


def test_copy_keeps_every_value_as_written(engine) -> None:
    rows = [{"k": f"k{i:02d}", "text": text, "n": i * 10**12, "flag": i % 2 == 0}
            for i, text in enumerate(TRICKY)]
    rows.append({"k": "none", "text": None, "n": None, "flag": None})
    with writing(engine) as conn:
        CopyRows().insert(conn, table, rows)
    assert _rows(engine) == sorted(tuple(r.values()) for r in rows)


def test_replace_overwrites_the_keyed_rows_and_leaves_the_rest(engine) -> None:
    first = [{"k": k, "text": "old", "n": 1, "flag": False} for k in ("a", "b", "c")]
    with writing(engine) as conn:
        CopyRows().insert(conn, table, first)
    with writing(engine) as conn:
        CopyRows().replace(conn, table, "k", [{"k": "b", "text": "new\tb", "n": 2, "flag": True}])
    assert _rows(engine) == [("a", "old", 1, False), ("b", "new\tb", 2, True),
                             ("c", "old", 1, False)]


@pytest.mark.parametrize("writer", [CopyRows(), RowWriter()], ids=["copy", "executemany"])
def test_a_duplicate_key_is_sqlalchemys_integrity_error_and_nothing_stays(engine,
                                                                          writer) -> None:
    row = {"k": "dup", "text": "x", "n": 1, "flag": True}
    with writing(engine) as conn:
        writer.insert(conn, table, [row])
    with pytest.raises(IntegrityError, match="already exists"):
        with writing(engine) as conn:
            writer.insert(conn, table, [dict(row, k="other"), row])
    assert _rows(engine) == [("dup", "x", 1, True)]  # the failed batch left nothing
