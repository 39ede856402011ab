"""Ill-formed input and unknown schedules: the named DomainError, and nothing written."""
from __future__ import annotations

import pytest

from schedfence.domain.errors import AlreadyExists, Closed, DomainError, InvalidArgument, NotFound
from schedfence.domain.ids import MAX_ID_LENGTH, MAX_SCHEDULE_ID_BYTES, destination_workflow_id
from schedfence.infra.application.service import open_service
from tests.helpers import NS, SID, given, nothing_written, refused, then, when, world

__all__ = ["world"]  # the fixture, imported for pytest

BAD_IDS = {
    "empty": "",
    "oversized": "x" * (MAX_ID_LENGTH + 1),
    "nul": "a\x00b",
    "newline": "a\nb",
    "tab": "a\tb",
    "escape": "a\x1bb",
    "delete": "a\x7fb",
    "padded": " a",
    "not_a_string": 5,
    "surrogate": "a\udc80",  # an invalid UTF-8 byte from a command line arrives as this
    "c1": "a\x85b",
    "line_separator": "a\u2028b",
    "bidi_override": "a\u202eb",
    "zero_width": "a\u200bb",
    "bom": "\ufeffa",
}

# Every operation addressed by (namespace, schedule id); all validate both.
OPERATIONS = {
    "create_schedule": lambda s, ns, sid: s.create_schedule(ns, sid),
    "rollback": lambda s, ns, sid: s.rollback(ns, sid, "R1"),
    "rollback_derived": lambda s, ns, sid: s.rollback(ns, sid),
    "schedule": lambda s, ns, sid: s.schedule(ns, sid),
    "migration": lambda s, ns, sid: s.migration(ns, sid),
    "history": lambda s, ns, sid: s.history(ns, sid),
    "update_schedule": lambda s, ns, sid: s.update_schedule(ns, sid, paused=True),
    "abort": lambda s, ns, sid: s.abort(ns, sid, "reason", "ops"),
}


def _seed(w) -> None:
    """A valid schedule with a pending rollback, so the store holds events to protect."""
    w.service.create_schedule(NS, SID, notes="pre")
    w.service.rollback(NS, SID, "R0")


@pytest.mark.parametrize("field", ["namespace", "schedule id"])
@pytest.mark.parametrize("bad", list(BAD_IDS.values()) + [None], ids=list(BAD_IDS) + ["none"])
@pytest.mark.parametrize("op", list(OPERATIONS))
def test_ill_formed_ids_are_invalid_argument_and_write_nothing(world, op, bad, field):
    w = world
    with given("a store that already holds a schedule with a pending rollback"):
        _seed(w)
        before = w.service.schedule(NS, SID)
    with when(f"{op} is called with an ill-formed {field}"):
        ns, sid = (bad, SID) if field == "namespace" else (NS, bad)
        with nothing_written(w.service), pytest.raises(InvalidArgument) as exc:
            OPERATIONS[op](w.service, ns, sid)
    with then("the message names the field, and the existing schedule is untouched"):
        assert field in exc.value.message and exc.value.code == "invalid_argument"
        assert w.service.schedule(NS, SID) == before
        assert w.dest.start_log() == []
    assert w.service.verify() == []


@pytest.mark.parametrize("bad", list(BAD_IDS.values()), ids=list(BAD_IDS))
@pytest.mark.parametrize("pending", [False, True])
def test_ill_formed_request_id_is_invalid_argument(world, bad, pending):
    w = world
    with given("a schedule" + (" with a pending rollback" if pending else "")):
        w.service.create_schedule(NS, SID)
        if pending:
            w.service.rollback(NS, SID, "R0")
    with then("rollback with an ill-formed request id writes nothing"):
        with nothing_written(w.service), pytest.raises(InvalidArgument) as exc:
            w.service.rollback(NS, SID, bad)
        assert "request id" in exc.value.message
        assert w.service.schedule(NS, SID).migration_pending is pending
    assert w.service.verify() == []


@pytest.mark.parametrize("op", [o for o in OPERATIONS if o != "create_schedule"])
@pytest.mark.parametrize("ns,sid", [(NS, "missing"), ("other-namespace", SID)])
def test_unknown_schedule_is_not_found_and_writes_nothing(world, op, ns, sid):
    w = world
    with given(f"only {NS}/{SID} exists"):
        w.service.create_schedule(NS, SID)
    with then(f"{op} on {ns}/{sid} is not_found with nothing written"):
        with nothing_written(w.service), pytest.raises(NotFound) as exc:
            OPERATIONS[op](w.service, ns, sid)
        assert exc.value.code == "not_found" and sid in exc.value.message
    assert w.service.verify() == []


def test_schedule_without_migration_has_no_migration_view(world):
    w = world
    w.service.create_schedule(NS, SID)
    with refused(w.service, NotFound):
        w.service.migration(NS, SID)
    with refused(w.service, DomainError):  # nothing to abort
        w.service.abort(NS, SID, "reason", "ops")
    assert w.service.verify() == []


@pytest.mark.parametrize("field", ["reason", "actor"])
@pytest.mark.parametrize("bad", ["", "a\nb", "x" * (MAX_ID_LENGTH + 1)], ids=["empty", "newline",
                                                                            "oversized"])
def test_abort_validates_reason_and_actor(world, field, bad):
    w = world
    _seed(w)
    args = {"reason": "r", "actor": "ops", field: bad}
    with refused(w.service, InvalidArgument):
        w.service.abort(NS, SID, **args)
    assert w.service.migration(NS, SID).state == "pending"
    assert w.service.verify() == []


def test_boundary_ids_are_accepted(world):
    """Ids at their limits (the schedule id leaves room for the destination workflow id's
    prefix), and non-ASCII text, are well-formed."""
    w = world
    ns, sid, rid = "n" * MAX_ID_LENGTH, "s" * MAX_SCHEDULE_ID_BYTES, "r" * MAX_ID_LENGTH
    w.service.create_schedule(ns, sid)
    assert w.service.rollback(ns, sid, rid).outcome == "accepted"
    w.service.create_schedule(NS, "日程-é")
    assert w.service.rollback(NS, "日程-é", "请求-1").outcome == "accepted"
    w.service.run_until_idle()
    assert w.service.schedule(ns, sid).close_reason == "migrated"
    assert w.service.schedule(NS, "日程-é").close_reason == "migrated"
    assert w.service.verify() == []


def test_create_on_open_key_already_exists(world):
    w = world
    w.service.create_schedule(NS, SID, notes="first")
    with refused(w.service, AlreadyExists):
        w.service.create_schedule(NS, SID, notes="second")
    assert w.service.schedule(NS, SID).notes == "first"
    assert w.service.verify() == []


@pytest.mark.parametrize("notes", [7, "x" * 10_001], ids=["not_a_string", "oversized"])
def test_create_rejects_bad_notes(world, notes):
    with refused(world.service, InvalidArgument):
        world.service.create_schedule(NS, SID, notes=notes)
    with refused(world.service, NotFound):
        world.service.schedule(NS, SID)
    assert world.service.verify() == []


@pytest.mark.parametrize("notes", [7, "x" * 10_001], ids=["not_a_string", "oversized"])
def test_update_rejects_bad_notes(world, notes):
    world.service.create_schedule(NS, SID, notes="pre")
    with refused(world.service, InvalidArgument):
        world.service.update_schedule(NS, SID, notes=notes)
    assert world.service.schedule(NS, SID).notes == "pre"
    assert world.service.verify() == []


@pytest.mark.parametrize("how", ["deleted", "migrated"])
def test_closed_incarnation_is_recreated_as_a_new_incarnation(world, how):
    w = world
    with given(f"incarnation 1 of the key was {how}"):
        w.service.create_schedule(NS, SID, paused=True, notes="one")
        if how == "deleted":
            w.service.update_schedule(NS, SID, delete=True)
        else:
            w.service.rollback(NS, SID, "R1")
            w.service.run_until_idle()
        assert w.service.schedule(NS, SID).close_reason == how
    with then("a closed incarnation refuses mutations and new rollbacks"):
        with refused(w.service, Closed):
            w.service.update_schedule(NS, SID, notes="late")
        with refused(w.service, Closed):
            w.service.rollback(NS, SID, "R2")
    with when("the key is created again (once a handed-over chain has ended: I1)"):
        if how == "migrated":
            with refused(w.service, AlreadyExists):
                w.service.create_schedule(NS, SID, notes="two")
            w.dest.terminate(NS, destination_workflow_id(SID))
        view = w.service.create_schedule(NS, SID, notes="two")
    with then("it is incarnation 2, open and unfenced; history keeps both"):
        assert (view.incarnation, view.closed, view.migration_pending, view.paused,
                view.notes) == (2, False, False, False, "two")
        assert w.service.schedule(NS, SID) == view
        created = [e.data["incarnation"] for e in w.service.history(NS, SID)
                   if e.type == "schedfence.schedule.Created"]
        assert created == [1, 2]
        assert [v.incarnation for v in w.service.list_schedules()] == [2]
    assert w.service.verify() == []


@pytest.mark.parametrize("url,expect", [
    ("", "empty"),
    ("   ", "empty"),
    (None, "empty"),
    ("sqlite:///", "names no file"),
    ("sqlite:////no/such/dir/fence.db", "does not exist"),
    ("sqlite://relative.db", "expected sqlite:///PATH"),
    ("mysql://db/fence", "expected sqlite:///PATH"),
    ("fence.db", "expected sqlite:///PATH"),
    ("postgresql://localhost/fence?sslmode=disable", "not supported"),
    ("postgresql://localhost", "names no database"),
    ("postgresql://localhost/fence?schema=a;drop", "not a plain identifier"),
])
def test_bad_store_urls_are_invalid_argument(url, expect):
    with pytest.raises(InvalidArgument) as exc:
        open_service(url, "sim")
    assert expect in exc.value.message


def test_run_until_idle_rejects_non_positive_budget(world):
    with refused(world.service, InvalidArgument):
        world.service.run_until_idle(0)
    assert world.service.verify() == []
