"""Every id and free-text field of every event, on every path (Python API and CLI): the one set
of rules (domain/text.py), the destination's id limits (domain/ids.py), each field at its limit
and one past it on SQLite and PostgreSQL, and every read command on the store that holds them.

The log is append-only: a value accepted once is stored forever, so a refusal must come before
anything is written, and every accepted value must fit the projection and decode everywhere."""
from __future__ import annotations

import json
from typing import Any, Callable

import pytest
from click.testing import CliRunner

from schedfence.infra.application.actor import default_actor
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import (MAX_DESTINATION_ID_BYTES, MAX_SCHEDULE_ID_BYTES,
                                   WORKFLOW_ID_PREFIX)
from schedfence.domain.text import (MAX_ACTOR_LENGTH, MAX_ID_LENGTH, MAX_NOTES_LENGTH,
                                    MAX_REASON_LENGTH, MAX_WORKER_ID_LENGTH, validate_text)
from schedfence.infra.cli.commands import cli
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from tests.helpers import NS, SID, nothing_written, world

__all__ = ["world"]

# Refused in every field (notes included).
ANY_TEXT = {"surrogate": "a\udc80", "nul": "a\x00b", "cr": "a\rb", "escape": "a\x1bb",
            "c1": "a\x85b", "line_separator": "a\u2028b", "not_a_string": 5}
# Refused in every one-line field (all but notes).
ONE_LINE = dict(ANY_TEXT, newline="a\nb", tab="a\tb")
# Refused in ids, actors and worker ids.
IDENTIFIER = dict(ONE_LINE, bidi_override="a\u202eb", bidi_isolate="a\u2066b",
                  zero_width_space="a\u200bb", zero_width_joiner="a\u200db",
                  word_joiner="a\u2060b", bom="\ufeffa", padded=" a", empty="")

ACTOR, REASON, WORKER = "ü" * MAX_ACTOR_LENGTH, "ß" * MAX_REASON_LENGTH, "w" * MAX_WORKER_ID_LENGTH
NOTES = ("notes\twith ünïcode\n" * 1000)[:MAX_NOTES_LENGTH]
NS_MAX, SID_MAX, RID_MAX = "n" * MAX_ID_LENGTH, "s" * MAX_SCHEDULE_ID_BYTES, "r" * MAX_ID_LENGTH


def bad_values(kind: str, limit: int) -> dict[str, object]:
    base = {"notes": ANY_TEXT, "reason": dict(ONE_LINE, blank="   ")}.get(kind, IDENTIFIER)
    return dict(base, oversized="x" * (limit + 1))


# -- the Python API: every write, every field ---------------------------------------------------
def _seed(s: MigrationService) -> None:
    s.create_schedule(NS, SID, notes="pre")
    s.rollback(NS, SID, "R0")


def _recover(kind: str, **kw: Any) -> Callable[[MigrationService, Any], Any]:
    def call(s: MigrationService, v: Any) -> Any:
        args = {"actor": "ops", "reason": "why", **{k: (v if a is None else a)
                                                     for k, a in kw.items()}}
        return s.recover(kind, NS, SID, **args)
    return call


WRITES: dict[str, tuple[str, int, Callable[[MigrationService, Any], Any]]] = {
    "create.namespace": ("namespace", MAX_ID_LENGTH, lambda s, v: s.create_schedule(v, "new")),
    "create.schedule_id": ("schedule id", MAX_SCHEDULE_ID_BYTES,
                           lambda s, v: s.create_schedule(NS, v)),
    "create.notes": ("notes", MAX_NOTES_LENGTH,
                     lambda s, v: s.create_schedule(NS, "new", notes=v)),
    "update.notes": ("notes", MAX_NOTES_LENGTH, lambda s, v: s.update_schedule(NS, SID, notes=v)),
    "rollback.schedule_id": ("schedule id", MAX_SCHEDULE_ID_BYTES,
                             lambda s, v: s.rollback(NS, v, "R1")),
    "rollback.request_id": ("request id", MAX_ID_LENGTH, lambda s, v: s.rollback(NS, SID, v)),
    "rollback.actor": ("actor", MAX_ACTOR_LENGTH,
                       lambda s, v: s.rollback(NS, SID, "R0", actor=v)),
    "abort.reason": ("reason", MAX_REASON_LENGTH, lambda s, v: s.abort(NS, SID, v, "ops")),
    "abort.actor": ("actor", MAX_ACTOR_LENGTH, lambda s, v: s.abort(NS, SID, "why", v)),
    "recover_abort.actor": ("actor", MAX_ACTOR_LENGTH, _recover("abort", actor=None)),
    "recover_rearm.reason": ("reason", MAX_REASON_LENGTH, _recover("rearm", reason=None)),
    "recover_adopt.request_id": ("request id", MAX_ID_LENGTH,
                                 _recover("adopt", request_id=None)),
    "recover_resolve.first_run_id": ("first run id", MAX_ID_LENGTH, _recover(
        "resolve", resolution="destination_owns", first_run_id=None)),
    "promote.actor": ("actor", MAX_ACTOR_LENGTH, lambda s, v: s.promote(v, "why")),
    "promote.reason": ("reason", MAX_REASON_LENGTH, lambda s, v: s.promote("ops", v)),
}


@pytest.mark.parametrize("write", list(WRITES))
def test_every_write_refuses_every_bad_value_and_writes_nothing(world, write):
    kind, limit, call = WRITES[write]
    _seed(world.service)
    for name, bad in bad_values(kind, limit).items():
        if write == "rollback.actor" and bad == "":
            continue  # an omitted actor is the default one (user@host)
        with nothing_written(world.service), pytest.raises(InvalidArgument) as exc:
            call(world.service, bad)
        assert kind in exc.value.message, (name, exc.value.message)
        assert "\n" not in exc.value.message and "\x00" not in exc.value.message
    assert world.dest.start_log() == [] and world.service.verify() == []


@pytest.mark.parametrize("name,bad", list(bad_values("worker id", MAX_WORKER_ID_LENGTH).items()))
def test_open_service_refuses_a_bad_worker_id(store_url, name, bad):
    with pytest.raises(InvalidArgument, match="worker id"):
        open_service(store_url, "sim", worker_id=bad)


def test_notes_keep_newlines_and_tabs_and_unicode(world):
    view = world.service.create_schedule(NS, SID, notes="a\n\tb — 日本語 ✓")
    assert view.notes == "a\n\tb — 日本語 ✓"


def test_text_rules_in_one_place():
    assert validate_text("x", "a\nb", 10, multiline=True) == "a\nb"
    with pytest.raises(InvalidArgument, match="U\\+000D at position 1"):
        validate_text("x", "a\rb", 10, multiline=True)
    with pytest.raises(InvalidArgument, match="not valid UTF-8"):
        validate_text("x", "\udcff", 10)
    assert validate_text("reason", " spaced reason ", 20) == " spaced reason "


# -- what Temporal would refuse (limit.maxIDLength, in UTF-8 bytes) -----------------------------
def test_schedule_id_leaves_room_for_the_workflow_id_prefix(world):
    s = world.service
    assert MAX_SCHEDULE_ID_BYTES == MAX_DESTINATION_ID_BYTES - len(WORKFLOW_ID_PREFIX)
    for sid in ("s" * 990, "s" * (MAX_SCHEDULE_ID_BYTES + 1), "é" * 489):
        with nothing_written(s), pytest.raises(InvalidArgument, match="schedule id.*bytes"):
            s.create_schedule(NS, sid)
    s.create_schedule(NS, "é" * 488)
    s.create_schedule(NS, SID_MAX)
    for sid in (SID_MAX, "é" * 488):
        assert s.rollback(NS, sid, "R" * MAX_DESTINATION_ID_BYTES).outcome == "accepted"
    s.run_until_idle()
    assert s.schedule(NS, SID_MAX).close_reason == "migrated"
    assert s.verify() == []


def test_request_id_and_namespace_fit_the_destination_in_bytes(world):
    s = world.service
    s.create_schedule("é" * 500, SID)  # 1000 bytes
    with nothing_written(s), pytest.raises(InvalidArgument, match="namespace.*bytes"):
        s.create_schedule("é" * 501, SID)
    for rid in ("r" * (MAX_DESTINATION_ID_BYTES + 1), "é" * 501):
        with nothing_written(s), pytest.raises(InvalidArgument, match="request id"):
            s.rollback("é" * 500, SID, rid)
    assert s.rollback("é" * 500, SID, "é" * 500).outcome == "accepted"


# -- the CLI: the same rules, one line, nothing written ------------------------------------------
def run(store: str, *args: str, worker_id: str | None = None):
    pre = ["--worker-id", worker_id] if worker_id is not None else []
    return CliRunner().invoke(cli, ["--store", store, *pre, *args])


def ok(store: str, *args: str, **kw: Any) -> str:
    result = run(store, *args, **kw)
    assert result.exit_code == 0, (args[:2], result.stdout[-2000:], result.stderr[-2000:])
    return result.stdout


def refused_cli(store: str, *args: str, field: str, **kw: Any) -> None:
    before = events_in(store)
    result = run(store, *args, **kw)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, (args[:2], result.stderr[-2000:])
    assert lines[0].startswith("error: invalid_argument: ") and field in lines[0], lines
    assert events_in(store) == before


def events_in(store: str) -> int:
    with open_service(store, SimulatedDestination()) as service:
        return sum(1 for _ in service.app.notifications())


@pytest.mark.parametrize("args,field", [
    (["rollback", NS, SID, "--actor", "x" * 5000], "actor"),
    (["rollback", NS, SID, "--actor", "a\nb"], "actor"),
    (["rollback", NS, SID, "--request-id", "r\u202ex"], "request id"),
    (["rollback", NS, "s" * 990], "schedule id"),
    (["schedule", "create", NS, "b", "--notes", "\udcff"], "notes"),
    (["schedule", "notes", NS, SID, "a\x00b"], "notes"),
    (["abort", NS, SID, "--reason", "\udcff", "--actor", "ops"], "reason"),
    (["abort", NS, SID, "--reason", "why", "--actor", "ops\x00"], "actor"),
    (["recover", "abort", NS, SID, "--reason", "why", "--actor", "a\nb"], "actor"),
    (["status", NS, "\udcff"], "schedule id"),
    (["--worker-id", "w\udcff", "list"], "worker id"),
    (["promote", "--actor", "ops", "--reason", "a\nb"], "reason"),
])
def test_cli_refuses_bad_text_in_one_line(file_store_url, args, field):
    ok(file_store_url, "schedule", "create", NS, SID)
    refused_cli(file_store_url, *args, field=field)


# -- each field at its limit (accepted) and one past it (refused), then every read -------------
def _write_at_limits_api(url: str) -> None:
    with pytest.raises(InvalidArgument, match="worker id"):
        open_service(url, "sim", worker_id=WORKER + "w")
    with open_service(url, "sim", worker_id=WORKER) as s:
        s.promote(ACTOR, REASON)
        over = [lambda: s.promote(ACTOR + "ü", REASON), lambda: s.promote(ACTOR, REASON + "ß"),
                lambda: s.create_schedule(NS_MAX + "n", SID_MAX),
                lambda: s.create_schedule(NS_MAX, SID_MAX + "s"),
                lambda: s.create_schedule(NS_MAX, SID_MAX, notes=NOTES + "x")]
        for call in over:
            with nothing_written(s), pytest.raises(InvalidArgument):
                call()
        s.create_schedule(NS_MAX, SID_MAX, notes=NOTES)
        for call in [lambda: s.rollback(NS_MAX, SID_MAX, RID_MAX + "r", actor=ACTOR),
                     lambda: s.rollback(NS_MAX, SID_MAX, RID_MAX, actor=ACTOR + "ü"),
                     lambda: s.update_schedule(NS_MAX, SID_MAX, notes=NOTES + "x")]:
            with nothing_written(s), pytest.raises(InvalidArgument):
                call()
        assert s.rollback(NS_MAX, SID_MAX, RID_MAX, actor=ACTOR).outcome == "accepted"
        for call in [lambda: s.abort(NS_MAX, SID_MAX, REASON + "ß", ACTOR),
                     lambda: s.recover("abort", NS_MAX, SID_MAX, actor=ACTOR + "ü",
                                       reason=REASON)]:
            with nothing_written(s), pytest.raises(InvalidArgument):
                call()
        s.recover("abort", NS_MAX, SID_MAX, actor=ACTOR, reason=REASON)
        s.update_schedule(NS_MAX, SID_MAX, notes=NOTES[::-1])
        assert s.rollback(NS_MAX, SID_MAX).outcome == "accepted"  # actor: user@host


def _write_at_limits_cli(url: str) -> None:
    refused_cli(url, "list", worker_id=WORKER + "w", field="worker id")
    ok(url, "promote", "--actor", ACTOR, "--reason", REASON, worker_id=WORKER)
    for args, field in [
            (["promote", "--actor", ACTOR + "ü", "--reason", REASON], "actor"),
            (["promote", "--actor", ACTOR, "--reason", REASON + "ß"], "reason"),
            (["schedule", "create", NS_MAX + "n", SID_MAX], "namespace"),
            (["schedule", "create", NS_MAX, SID_MAX + "s"], "schedule id"),
            (["schedule", "create", NS_MAX, SID_MAX, "--notes", NOTES + "x"], "notes")]:
        refused_cli(url, *args, field=field, worker_id=WORKER)
    ok(url, "schedule", "create", NS_MAX, SID_MAX, "--notes", NOTES, worker_id=WORKER)
    for args, field in [
            (["rollback", NS_MAX, SID_MAX, "--request-id", RID_MAX + "r"], "request id"),
            (["rollback", NS_MAX, SID_MAX, "--request-id", RID_MAX, "--actor", ACTOR + "ü"],
             "actor"),
            (["schedule", "notes", NS_MAX, SID_MAX, NOTES + "x"], "notes")]:
        refused_cli(url, *args, field=field, worker_id=WORKER)
    ok(url, "rollback", NS_MAX, SID_MAX, "--request-id", RID_MAX, "--actor", ACTOR,
       worker_id=WORKER)
    for args, field in [
            (["abort", NS_MAX, SID_MAX, "--reason", REASON + "ß", "--actor", ACTOR], "reason"),
            (["recover", "abort", NS_MAX, SID_MAX, "--reason", REASON, "--actor", ACTOR + "ü"],
             "actor")]:
        refused_cli(url, *args, field=field, worker_id=WORKER)
    ok(url, "recover", "abort", NS_MAX, SID_MAX, "--reason", REASON, "--actor", ACTOR,
       worker_id=WORKER)
    ok(url, "schedule", "notes", NS_MAX, SID_MAX, NOTES[::-1], worker_id=WORKER)
    ok(url, "rollback", NS_MAX, SID_MAX, worker_id=WORKER)


@pytest.mark.parametrize("via", ["api", "cli"])
def test_every_field_at_its_limit_then_every_read_command(file_store_url, via):
    url = file_store_url
    (_write_at_limits_api if via == "api" else _write_at_limits_cli)(url)
    doc = json.loads(ok(url, "worker", "--until-idle", "--json", worker_id=WORKER))
    assert doc["migrations"] and doc["events_written"] > 0
    status = json.loads(ok(url, "status", NS_MAX, SID_MAX, "--json"))
    assert status["schedule"]["close_reason"] == "migrated"
    history = json.loads(ok(url, "history", NS_MAX, SID_MAX, "--json"))["events"]
    texts = json.dumps([e["data"] for e in history], ensure_ascii=False)
    for value in (NOTES, NOTES[::-1], ACTOR, REASON, RID_MAX, WORKER):
        assert json.dumps(value, ensure_ascii=False)[1:-1] in texts
    assert json.loads(ok(url, "verify", "--json"))["ok"]
    audit = json.loads(ok(url, "audit", "--actor", ACTOR, "--json"))["entries"]
    assert audit and all(e["actor"] == ACTOR for e in audit)
    # No --actor: who asked is the person (user@host), never the worker id.
    by_default = json.loads(ok(url, "audit", "--actor", default_actor(), "--json"))["entries"]
    assert [e["type"] for e in by_default][-1] == "RequestIdAssigned"
    assert json.loads(ok(url, "audit", "--request-id", RID_MAX, "--json"))["entries"]
    assert json.loads(ok(url, "audit", "--schedule", f"{NS_MAX}/{SID_MAX}", "--json"))["entries"]
    assert json.loads(ok(url, "oncall", "--json"))["items"] == []
    assert json.loads(ok(url, "stats", "--json"))["by_namespace"][NS_MAX]
    states = [m["state"] for m in json.loads(ok(url, "migrations", "--json"))["migrations"]]
    assert sorted(states) == ["aborted", "completed"]
    assert json.loads(ok(url, "replay", NS_MAX, SID_MAX, "--json"))
    ok(url, "projection", "rebuild", "--json")
    for args in (["list"], ["status", NS_MAX, SID_MAX], ["history", NS_MAX, SID_MAX],
                 ["verify"], ["audit"], ["oncall"], ["stats"], ["migrations"],
                 ["replay", NS_MAX, SID_MAX], ["projection", "status"]):
        ok(url, *args)
