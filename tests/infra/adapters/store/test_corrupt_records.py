"""Corrupt stored records: every read path names the record (log position, aggregate, version,
topic) and what is wrong with it, with a stable code; never ``internal``.

The stores are damaged with raw SQL, as a bad restore or a hand edit would damage them.
"""
from __future__ import annotations

import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from eventsourcing.persistence import Notification, StoredEvent

from schedfence.domain.rollback.aggregate import Migration
from schedfence.infra.cli.commands import cli
from schedfence.infra.adapters.store.codec import JSONBytes, PydanticMapper, UndecodableEvent
from schedfence.infra.application.service import open_service
import schedfence.infra.adapters.store.codec as fence_store
from schedfence.infra.adapters.store.codec import fold_events

from tests import pgtools

ROOT = Path(__file__).resolve().parents[4]
NS = "ns"


# -- the raw store ------------------------------------------------------------------------------
def _sql(url: str, statement: str, *params: Any) -> list[tuple]:
    """Run ``statement`` on the store's event table ``{events}`` (``?`` placeholders) and
    ``{pos}`` (its log position column), on either store."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return db.execute(statement.format(events="stored_events", pos="rowid"),
                              [p.hex if isinstance(p, uuid.UUID) else p for p in params]
                              ).fetchall()
    with pgtools.connect(url) as conn:
        cur = conn.execute(statement.format(events="schedfence_events", pos="notification_id")
                           .replace("?", "%s"), params)
        return cur.fetchall() if cur.description else []


def _drop_projection(url: str) -> None:
    """Start the views afresh, so the projector must read the damaged log (workers keep them
    current, so they already hold every record)."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                       "AND name LIKE 'schedfence_proj_%'").fetchall():
                db.execute(f"DROP TABLE {table}")
        return
    _, schema = pgtools.schema_of(url)
    with pgtools.connect(url) as conn:
        for (table,) in conn.execute("SELECT table_name FROM information_schema.tables WHERE "
                                     "table_schema = %s AND table_name LIKE "
                                     "'schedfence_proj_%%'", (schema,)).fetchall():
            conn.execute(f'DROP TABLE "{schema}"."{table}" CASCADE')


@pytest.fixture
def store(file_store_url: str) -> dict[str, Any]:
    """A store with a completed migration of ns/a and a plain schedule ns/b; returns the URL
    and the migration's records (position, version, topic) in log order."""
    with open_service(file_store_url, "sim") as service:
        service.create_schedule(NS, "a")
        mid = uuid.UUID(service.rollback(NS, "a").migration_id)
        service.run_until_idle()
        service.create_schedule(NS, "b")
    rows = _sql(file_store_url, "SELECT {pos}, originator_version, topic FROM {events} "
                "WHERE originator_id = ? ORDER BY originator_version", mid)
    assert [r[1] for r in rows] == list(range(1, len(rows) + 1)) and len(rows) >= 4
    return {"url": file_store_url, "mid": mid, "rows": rows}


def _cli_error(url: str, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--store", url, *args])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, (result.stdout, result.stderr)
    assert not lines[0].startswith("error: internal"), lines[0]
    return lines[0]


def _corrupt_first(store: dict[str, Any], state: bytes) -> tuple[int, str]:
    """Replace the state of the migration's first record (RequestIdAssigned, a v2 event)."""
    position, version, topic = store["rows"][0]
    assert (version, topic) == (1, Migration.RequestIdAssigned.TOPIC)
    _sql(store["url"], "UPDATE {events} SET state = ? WHERE {pos} = ?", state, position)
    return position, topic


# -- decoding a record --------------------------------------------------------------------------
@pytest.mark.parametrize("state,what", [
    (b'{"class_version":2,', "not valid JSON"),
    (b'["class_version", 2]', "JSON list, not an object"),
    (b'{"class_version":"2"}', "class_version '2' is not a positive whole number"),
])
def test_a_record_that_is_not_a_json_object_is_named_on_every_read(store, state, what) -> None:
    position, topic = _corrupt_first(store, state)
    url, mid = store["url"], store["mid"]
    where = f"{topic} at log position {position} (aggregate {mid} version 1)"
    # (``list`` reads migration states from the projection, built before the damage; it
    # loads only each key's current source from the log, which is intact here. ``status``
    # answers from the projection's rows while each is at its aggregate's latest version,
    # which a damaged record does not change: without the rows it reads the log.)
    _drop_projection(url)
    for args in (("status", NS, "a"),):
        line = _cli_error(url, *args)
        assert line.startswith("error: undecodable_event: ") and what in line, line
        assert f"{topic} (aggregate {mid} version 1)" in line, line
    line = _cli_error(url, "verify")
    assert line.startswith("error: undecodable_event: ") and where in line and what in line
    _drop_projection(url)
    line = _cli_error(url, "oncall")
    assert line.startswith("error: undecodable_event: ") and where in line, line
    assert f"the projection stopped after position {position - 1}" in line


def test_a_garbage_originator_id_in_the_record_is_named(store, store_kind: str) -> None:
    url, mid = store["url"], store["mid"]
    position, _, topic = store["rows"][0]
    if store_kind == "sqlite":  # a TEXT column: the row's own id can be anything
        _sql(url, "UPDATE {events} SET originator_id = 'garbage' WHERE {pos} = ?", position)
        what = "originator id 'garbage' is not a UUID"
        _drop_projection(url)  # status reads the log (without the rows built before)
        line = _cli_error(url, "status", NS, "a")  # the migration lost its first record
        assert line.startswith("error: corrupt_history: ") and str(mid) in line
        assert "version 1 is missing" in line, line
    else:  # a uuid column: only the payload's copy can be garbage
        (state,) = _sql(url, "SELECT state FROM {events} WHERE {pos} = ?", position)[0]
        _sql(url, "UPDATE {events} SET state = ? WHERE {pos} = ?",
             bytes(state).replace(str(mid).encode(), b"garbage"), position)
        what = "originator_id"
        _drop_projection(url)  # status reads the log (without the rows built before)
        line = _cli_error(url, "status", NS, "a")
        assert line.startswith("error: undecodable_event: ") and str(mid) in line, line
    line = _cli_error(url, "verify")
    assert line.startswith("error: undecodable_event: ") and what in line, line
    assert f"{topic} at log position {position}" in line, line
    _drop_projection(url)
    line = _cli_error(url, "oncall")
    assert line.startswith("error: undecodable_event: ") and f"log position {position}" in line


def test_the_mapper_names_the_record_and_the_fault() -> None:
    mapper = PydanticMapper(transcoder=JSONBytes())
    oid = uuid.uuid4()
    topic = Migration.RequestIdAssigned.TOPIC  # v2: decoded through JSON, not the fast path
    cases = [
        (Notification(id=7, originator_id=oid, originator_version=3, topic=topic,
                      state=b"{nope"), "not valid JSON"),
        (Notification(id=7, originator_id=oid, originator_version=3, topic=topic,
                      state=b'"class_version"'), "JSON str, not an object"),
        (Notification(id=7, originator_id="zzz", originator_version=3, topic=topic,
                      state=b"{}"), "originator id 'zzz' is not a UUID"),
        (Notification(id=7, originator_id=oid, originator_version=3, topic=topic,
                      state=b'{"originator_id":"zzz","originator_version":3,"class_version":1}'),
         "originator_id"),
    ]
    for record, what in cases:
        with pytest.raises(UndecodableEvent) as err:
            mapper.to_domain_event(record)
        assert err.value.code == "undecodable_event" and what in err.value.message
        assert f"{topic} at log position 7 (aggregate " in err.value.message
        assert "version 3)" in err.value.message
    with pytest.raises(UndecodableEvent, match=rf"\(aggregate {oid} version 3\)"):
        mapper.to_domain_event(StoredEvent(oid, 3, topic, b"[]"))


# -- folding an aggregate -----------------------------------------------------------------------
def test_a_deleted_middle_record_names_the_aggregate_and_the_missing_version(store) -> None:
    url, mid = store["url"], store["mid"]
    position, version, _ = store["rows"][2]
    _sql(url, "DELETE FROM {events} WHERE {pos} = ?", position)
    next_topic = store["rows"][3][2]
    # (``list`` reads migration states from the projection, built before the damage; it
    # loads only each key's current source from the log, which is intact here. ``status``
    # answers from the projection's rows while each is at its aggregate's latest version,
    # which a damaged record does not change: without the rows it reads the log.)
    _drop_projection(url)
    for args in (("status", NS, "a"),):
        line = _cli_error(url, *args)
        assert line.startswith("error: corrupt_history: "), line
        assert f"aggregate {mid}: version {version} is missing" in line, line
        assert f"version {version + 1}, {next_topic}" in line, line
    # verify reports the damage as an invariant violation (I0), naming the versions
    result = CliRunner().invoke(cli, ["--store", url, "verify"])
    assert result.exit_code == 1 and "I0" in result.stdout and str(mid) in result.stdout


def test_fold_events_refuses_gaps_and_wraps_reducer_errors(store) -> None:
    with open_service(store["url"], "sim") as service:
        events = list(service.app.events.get(store["mid"]))
        assert fold_events(None, events).version == len(events)
        with pytest.raises(fence_store.CorruptHistory, match="versions 2..3 are missing"):
            fold_events(None, events[:1] + events[3:])
        with pytest.raises(fence_store.CorruptHistory, match="version 1 is missing"):
            fold_events(None, events[1:])
        with pytest.raises(fence_store.CorruptHistory, match="version 2 .* is stored again after "
                                                 "version 2"):
            fold_events(None, events[:2] + events[1:2])
        again = events[0].model_copy(update={"originator_version": 2})  # a second "creation"
        with pytest.raises(fence_store.CorruptHistory, match=f"{store['mid']} version 2 "
                                                 r"\(schedfence.migration.RequestIdAssigned\) "
                                                 "cannot be applied"):
            fold_events(None, [events[0], again])


def test_the_module_entry_point_prints_one_line_not_internal(store) -> None:
    _corrupt_first(store, b"{broken")
    _drop_projection(store["url"])  # status reads the log (without the rows built before)
    done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store["url"], "status",
                           NS, "a"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: undecodable_event: ") and \
        done.stderr.count("\n") == 1, done.stderr
    assert str(store["mid"]) in done.stderr and "version 1" in done.stderr


def test_status_from_current_rows_does_not_read_a_record_damaged_after_them(store) -> None:
    """What a read-model read means: ``status`` answers from the rows the projection built
    from the intact records; ``verify``, which reads the log, names the damage."""
    _corrupt_first(store, b"{broken")
    result = CliRunner().invoke(cli, ["--store", store["url"], "status", NS, "a"])
    assert result.exit_code == 0 and "completed" in result.stdout, result.stderr
    line = _cli_error(store["url"], "verify")
    assert line.startswith("error: undecodable_event: ") and str(store["mid"]) in line
