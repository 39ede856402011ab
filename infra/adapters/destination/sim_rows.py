"""The simulated destination's rows (one per workflow id, one per logged start, one of
counters per state) and one call's view of them (``SimTx``).

Two ways to make calls serial where they must be:

- ``SqlSimTx`` (SQLite, and any database but PostgreSQL): the caller has locked the state's
  counters row (``schedfence_sim_meta``) or the whole database, so the calls run one at a
  time; the counters row hands out ids, log positions and workflow order.
- ``PgSimTx`` (PostgreSQL): a call takes a transaction-scoped advisory lock on each workflow
  id it reads, before reading it, and no other lock; ids, log positions and workflow order
  come from sequences. Calls about different workflows run side by side (two schedulers'
  batches, a job's handover beside a scheduler's watch); calls about one workflow still run
  one after the other, each reading what the one before committed.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import (BigInteger, Column, Index, MetaData, Sequence, String, Table, Text,
                        bindparam, select)
from sqlalchemy import text as sql_text
from sqlalchemy.engine import Connection

PRELOAD_CHUNK = 500  # workflow ids read in one query
TABLE_NAME = "schedfence_sim_destination"  # the one-row layout of older releases
META_TABLE = "schedfence_sim_meta"
WORKFLOWS_TABLE = "schedfence_sim_workflows"
LOG_TABLE = "schedfence_sim_start_log"
# What the old single row holds once migrated: an older release loads it as a JSON string and
# fails on it, instead of silently starting over from an empty destination.
TOMBSTONE = json.dumps(
    f"schedule-fence: this simulated destination moved to per-workflow rows ({META_TABLE}, "
    f"{WORKFLOWS_TABLE}, {LOG_TABLE}); a release that keeps it in this one row cannot read it")


# The numbers a call hands out, in the counters row's column order: ids (runs, request ids),
# start-log positions, workflow order. On PostgreSQL each is a sequence of that name.
NUMBERS = ("counter", "seq", "ord")
SEQUENCES = {kind: f"schedfence_sim_{kind}_seq" for kind in NUMBERS}

metadata = MetaData()
legacy_table = Table(
    TABLE_NAME, metadata,
    Column("name", String(200), primary_key=True),
    Column("state", Text, nullable=False),
)
meta_table = Table(
    META_TABLE, metadata,
    Column("name", String(200), primary_key=True),
    Column("counter", BigInteger, nullable=False),  # ids handed out (runs, request ids)
    Column("log_count", BigInteger, nullable=False),  # start-log entries, the last seq
    Column("workflow_count", BigInteger, nullable=False),  # workflow rows, the last ord
)
workflows_table = Table(
    WORKFLOWS_TABLE, metadata,
    Column("name", String(200), primary_key=True),
    Column("namespace", String, primary_key=True),
    Column("workflow_id", String, primary_key=True),
    Column("ord", BigInteger, nullable=False),  # order of the first run (workflow_ids)
    Column("runs", Text, nullable=False),
)
log_table = Table(
    LOG_TABLE, metadata,
    Column("name", String(200), primary_key=True),
    Column("seq", BigInteger, primary_key=True),
    Column("namespace", String, nullable=False),
    Column("workflow_id", String, nullable=False),
    Column("entry", Text, nullable=False),
    Index(f"{LOG_TABLE}_by_workflow", "name", "namespace", "workflow_id", "seq"),
)


# One primary-key lookup per id on PostgreSQL, whatever its statistics say: with an IN list
# the planner, on a table it had not analysed yet, scanned every row of the namespace and
# filtered the ids (40-150 ms for 80,000 workflows, inside the call that holds the counters
# row, so every other call queued behind it); the subquery's OFFSET 0 keeps it a nested loop.
_PG_PRELOAD = sql_text(
    f"SELECT w.workflow_id, x.runs FROM unnest(CAST(:ids AS varchar[])) AS w(workflow_id) "
    f"CROSS JOIN LATERAL (SELECT s.runs FROM {WORKFLOWS_TABLE} s WHERE s.name = :name "
    f"AND s.namespace = :ns AND s.workflow_id = w.workflow_id OFFSET 0) x")


def preload_select(dialect: str, name: str, namespace: str,
                   workflow_ids: list[str]) -> tuple[Any, dict[str, Any]]:
    """The select of these workflows' rows (workflow id, runs): a statement and its
    parameters, for ``Connection.execute``."""
    if dialect == "postgresql":
        return _PG_PRELOAD, {"ids": workflow_ids, "name": name, "ns": namespace}
    c = workflows_table.c
    return select(c.workflow_id, c.runs).where(
        c.name == name, c.namespace == namespace, c.workflow_id.in_(workflow_ids)), {}


def lock_key(scope: str, namespace: str, workflow_id: str) -> int:
    """The advisory lock of one workflow id (64 bits of a hash: a collision only makes two
    ids share a lock)."""
    digest = hashlib.blake2b("\0".join((scope, namespace, workflow_id)).encode(),
                             digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class SqlSimTx:
    """``SimTx`` over the SQL rows: loads the workflows it is asked about, writes back the ones
    that changed, appends log rows, and updates the counters row (locked by the caller)."""

    def __init__(self, conn: Connection, name: str, counters: tuple[int, int, int]) -> None:
        self._conn, self._name = conn, name
        self._counters = counters
        self._next = dict(zip(NUMBERS, counters))  # the last number handed out, per kind
        self._loaded: dict[tuple[str, str], tuple[str | None, list[dict]]] = {}
        self._ords: dict[tuple[str, str], int] = {}  # ids whose first run is in this call
        self._pending_log: list[dict] = []

    def runs(self, namespace: str, workflow_id: str) -> list[dict]:
        k = (namespace, workflow_id)
        if k not in self._loaded:
            self.preload([k])
        return self._loaded[k][1]

    def preload(self, keys: list[tuple[str, str]]) -> None:
        wanted = [k for k in dict.fromkeys(keys) if k not in self._loaded]
        self._lock(wanted)
        for start in range(0, len(wanted), PRELOAD_CHUNK):
            chunk = wanted[start:start + PRELOAD_CHUNK]
            found: dict[tuple[str, str], str] = {}
            for ns in {ns for ns, _ in chunk}:
                rows = self._conn.execute(*preload_select(
                    self._conn.dialect.name, self._name, ns, [w for n, w in chunk if n == ns]))
                found.update({(ns, wid): text for wid, text in rows})
            for k in chunk:
                text = found.get(k)
                self._loaded[k] = (text, json.loads(text) if text is not None else [])

    def add_run(self, namespace: str, workflow_id: str, run: dict) -> None:
        runs = self.runs(namespace, workflow_id)
        k = (namespace, workflow_id)
        if self._loaded[k][0] is None and k not in self._ords:
            self._ords[k] = self._take("ord")
        runs.append(run)

    def next_counter(self) -> int:
        return self._take("counter")

    def append_log(self, entry: dict) -> None:
        req = entry["request"]
        self._pending_log.append({"name": self._name, "seq": self._take("seq"),
                                  "namespace": req["namespace"],
                                  "workflow_id": req["workflow_id"],
                                  "entry": json.dumps(entry)})

    def log(self, namespace: str | None = None, workflow_id: str | None = None) -> list[dict]:
        self._flush()
        c = log_table.c
        q = select(c.entry).where(c.name == self._name).order_by(c.seq)
        if namespace is not None:
            q = q.where(c.namespace == namespace)
        if workflow_id is not None:
            q = q.where(c.workflow_id == workflow_id)
        return [json.loads(text) for text in self._conn.execute(q).scalars()]

    def workflow_ids(self) -> list[tuple[str, str]]:
        self._flush()
        c = workflows_table.c
        rows = self._conn.execute(select(c.namespace, c.workflow_id)
                                  .where(c.name == self._name).order_by(c.ord))
        return [(ns, wid) for ns, wid in rows]

    def _flush(self) -> None:
        """Write the changed workflow rows and the new log rows (still inside the transaction):
        each kind in one statement."""
        c = workflows_table.c
        inserts, updates = [], []
        for (ns, wid), (old, runs) in self._loaded.items():
            if old is None and not runs:
                continue  # asked about, never created
            text = json.dumps(runs)
            if old is None:
                inserts.append({"name": self._name, "namespace": ns, "workflow_id": wid,
                                "ord": self._ords[(ns, wid)], "runs": text})
            elif text != old:
                updates.append({"k_ns": ns, "k_wid": wid, "runs": text})
            else:
                continue
            self._loaded[(ns, wid)] = (text, runs)
        self._insert(inserts, self._pending_log)
        self._pending_log = []
        if updates:
            self._conn.execute(workflows_table.update().where(
                c.name == self._name, c.namespace == bindparam("k_ns"),
                c.workflow_id == bindparam("k_wid")), updates)

    def _insert(self, workflows: list[dict], log: list[dict]) -> None:
        """New workflow rows and log rows, each kind in one statement."""
        if workflows:
            self._conn.execute(workflows_table.insert(), workflows)
        if log:
            self._conn.execute(log_table.insert(), log)

    def _lock(self, keys: list[tuple[str, str]]) -> None:
        """Nothing to take: the caller holds the counters row (or the whole database)."""

    def _take(self, kind: str) -> int:
        """The next number of ``kind`` (one of ``NUMBERS``)."""
        self._next[kind] += 1
        return self._next[kind]

    def commit(self) -> None:
        self._flush()
        counters = (self._next["counter"], self._next["seq"], self._next["ord"])
        if counters != self._counters:  # reads need no write-back
            self._conn.execute(meta_table.update().where(meta_table.c.name == self._name).values(
                counter=counters[0], log_count=counters[1], workflow_count=counters[2]))
            self._counters = counters



for _kind in NUMBERS:  # created with the tables where the database has sequences
    Sequence(SEQUENCES[_kind], metadata=metadata, start=1)

_BLOCKED = ("counter", "ord")  # taken a block at a time; log positions at the flush
_NEXT_BLOCK = sql_text("SELECT " + ", ".join(f"nextval('{SEQUENCES[k]}')" for k in _BLOCKED)
                       + " FROM generate_series(1, :n)")
_NEXT_SEQS = sql_text(f"SELECT nextval('{SEQUENCES['seq']}') FROM generate_series(1, :n)")
# A call's new rows of each kind in one statement, its columns as arrays sent in binary. Per
# start of a batch of 200: a row at a time cost the server 45-47 us and the client 100-135;
# this, 36 and 86-96; text arrays, which escape each JSON document's quotes in Python, 265
# on the client (benchmarks/RESULTS.md). Driver SQL (psycopg's ``%(name)b``).
_PG_INSERT_WORKFLOWS = (
    f"INSERT INTO {WORKFLOWS_TABLE} (name, namespace, workflow_id, ord, runs) "
    "SELECT %(name)s, * FROM unnest(%(namespace)b::varchar[], %(workflow_id)b::varchar[], "
    "%(ord)b::bigint[], %(runs)b::text[])")
_PG_INSERT_LOG = (
    f"INSERT INTO {LOG_TABLE} (name, seq, namespace, workflow_id, entry) "
    "SELECT %(name)s, * FROM unnest(%(seq)b::bigint[], %(namespace)b::varchar[], "
    "%(workflow_id)b::varchar[], %(entry)b::text[])")
_TAKE_LOCKS = sql_text("SELECT pg_advisory_xact_lock(k) FROM unnest(CAST(:keys AS bigint[])) "
                       "AS t(k)")


class PgSimTx(SqlSimTx):
    """``SqlSimTx`` on PostgreSQL without the counters row (module docstring): before a
    workflow's row is read, the call takes that workflow's advisory lock, held until the
    call commits or rolls back. Ids and workflow order come from their sequences a block at
    a time; a call's log rows are numbered when they are written, every lock of the call
    held, so a workflow's log follows the order its calls committed in.

    A call's preload locks its ids in one order (by key), so two batches never wait on each
    other in a circle; a call that reads one more id later may, and PostgreSQL then fails
    one of the two before its COMMIT (``RolledBack``: it changed nothing)."""

    def __init__(self, conn: Connection, name: str, scope: str) -> None:
        super().__init__(conn, name, (0, 0, 0))
        self._scope = scope
        self._block = 1  # how many of each kind the next fetch takes
        self._free: dict[str, list[int]] = {kind: [] for kind in _BLOCKED}

    def _lock(self, keys: list[tuple[str, str]]) -> None:
        locks = sorted({lock_key(self._scope + "\0" + self._name, ns, wid) for ns, wid in keys})
        if locks:
            self._conn.execute(_TAKE_LOCKS, {"keys": locks})
        self._block = max(self._block, len(keys))  # a batch hands out about one of each per id

    def _take(self, kind: str) -> int:
        if kind == "seq":
            return 0  # a placeholder: numbered by the flush
        if not self._free[kind]:  # a block of each kind in one statement
            rows = self._conn.execute(_NEXT_BLOCK, {"n": self._block}).all()
            for i, free in enumerate(self._free.values()):
                free[:0] = sorted((row[i] for row in rows), reverse=True)  # unused: skipped
            self._block *= 2
        return self._free[kind].pop()

    def _flush(self) -> None:
        if self._pending_log:  # ascending in the order the call logged them
            seqs = sorted(self._conn.execute(_NEXT_SEQS, {"n": len(self._pending_log)})
                          .scalars())
            for row, seq in zip(self._pending_log, seqs):
                row["seq"] = seq
        super()._flush()

    def _insert(self, workflows: list[dict], log: list[dict]) -> None:
        for statement, rows in ((_PG_INSERT_WORKFLOWS, workflows), (_PG_INSERT_LOG, log)):
            if rows:
                self._conn.exec_driver_sql(statement, {"name": self._name, **{
                    column: [row[column] for row in rows]
                    for column in rows[0] if column != "name"}})

    def commit(self) -> None:
        self._flush()  # no counters row to write
