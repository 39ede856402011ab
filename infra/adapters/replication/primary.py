"""The primary side of replication (the active store, called the source in messages and
``--from``): reading its log in whole transactions.

One ``save()`` may append several events at once (a rollback appends the source's fence and the
new migration together). A standby that stopped copying in the middle of such a save would hold
half of it: a fenced source without its migration, a consumed claim without its start record.
So the follower only ever stops at a transaction boundary of the source:

- PostgreSQL: every row carries ``xmin``, the id of the transaction that inserted it (kept by
  VACUUM FREEZE since PostgreSQL 9.4). eventsourcing inserts one save in one transaction under
  a table lock, so its events have contiguous notification ids and one ``xmin``. A batch that
  would end inside a transaction is trimmed back to the previous boundary (or, if one
  transaction is larger than the batch, grown to hold all of it).
- SQLite records nothing of the kind, but the last event a reader sees always ends a committed
  transaction. So from a SQLite source, one copy is everything up to the last event seen,
  read in pages and written in one standby transaction.
"""
from __future__ import annotations

from typing import Any, Iterator, Sequence

from eventsourcing.persistence import Notification
from eventsourcing.postgres import PostgresFactory
from psycopg.sql import SQL, Identifier

from schedfence.domain.errors import InvalidArgument

from schedfence.infra.adapters.store.eventstore import FenceApplication

MAX_TRANSACTION = 50_000  # events; a larger "transaction" is a bulk load: it may be split
Page = Sequence[Notification]


class PostgresPrimary:
    def __init__(self, app: FenceApplication) -> None:
        self.datastore: Any = app.factory.datastore  # type: ignore[attr-defined]  # only SQL factories hold one
        table = app.recorder.events_table_name  # type: ignore[attr-defined]  # only SQL recorders name a table
        self._select = SQL(
            "SELECT notification_id, originator_id, originator_version, topic, state, "
            "xmin::text AS tx FROM {}.{} WHERE notification_id > %s "
            "ORDER BY notification_id LIMIT %s").format(Identifier(self.datastore.schema),
                                                        Identifier(table))

    def _rows(self, after: int, limit: int) -> list[Any]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(self._select, (after, limit), prepare=True)
            return curs.fetchall()

    def pages(self, after: int, limit: int, stop: int | None) -> Iterator[Page]:
        """At most one page: the notifications after ``after``, up to ``limit`` (and
        ``stop``), ending at a transaction boundary."""
        want = limit
        while True:
            rows = self._rows(after, want + 1)  # one more: does the last transaction go on?
            cut = [r for r in rows[:want] if stop is None or r["notification_id"] <= stop]
            following = rows[len(cut)] if len(rows) > len(cut) else None
            if not cut or following is None or following["tx"] != cut[-1]["tx"]:
                break  # ends at the head seen, or at a boundary
            whole = [r for r in cut if r["tx"] != cut[-1]["tx"]]
            if whole:
                cut = whole  # the last transaction goes on: leave it to the next batch
                break
            if len(cut) < want or want >= MAX_TRANSACTION:
                cut = [] if len(cut) < want else cut  # stop inside it, or a bulk load
                break
            want = min(want * 4, MAX_TRANSACTION)  # one transaction larger than the batch
        if cut:
            yield [Notification(id=r["notification_id"], originator_id=r["originator_id"],
                                originator_version=r["originator_version"], topic=r["topic"],
                                state=bytes(r["state"])) for r in cut]


class SQLitePrimary:
    def __init__(self, app: FenceApplication) -> None:
        self.recorder: Any = app.recorder

    def pages(self, after: int, limit: int, stop: int | None) -> Iterator[Page]:
        """Everything after ``after`` up to the last event seen now, in pages of ``limit``."""
        if stop is not None:
            raise InvalidArgument("copying up to a given position needs a PostgreSQL source "
                                  "(SQLite records no transaction boundaries)")
        head = self.recorder.max_notification_id() or 0
        while after < head:
            page = self.recorder.select_notifications(start=after, limit=limit, stop=head,
                                                      inclusive_of_start=False)
            if not page:
                return
            yield page
            after = page[-1].id


Primary = PostgresPrimary | SQLitePrimary


def primary_reader(app: FenceApplication) -> Primary:
    if isinstance(app.factory, PostgresFactory):
        return PostgresPrimary(app)
    return SQLitePrimary(app)
