"""The checker's forward rules over hand-built histories: given events, then the violations.
I19 (no ping-pong) and I20 (the source takes over only with proof)."""
from __future__ import annotations

from uuid import uuid4

from schedfence.domain.forward import steps as fs
from schedfence.domain.forward.aggregate import ForwardMigration as F
from schedfence.domain.invariants.checker import check_history
from schedfence.domain.model import Fact
from schedfence.domain.source.schedule import Schedule

NS, SID = "ns", "s"


def log(*aggregates_events):
    return list(enumerate(aggregates_events, start=1))


def forward(rid="F1"):
    return F.request(NS, SID, rid, "caller", "test", 0)


def events(agg):
    return agg.collect_events()


def codes(history):
    return sorted({v.invariant for v in check_history(history)})


def test_a_forward_requested_while_a_rollback_holds_the_source_is_i19():
    src = Schedule.create(NS, SID, 1, False, "")
    src.fence_for_migration("R1", uuid4())
    history = [*events(src), *events(forward())]
    assert "I19" in codes(log(*history))


def test_two_open_forwards_of_one_key_are_i19():
    history = [*events(forward("F1")), *events(forward("F2"))]
    assert codes(log(*history)) == ["I19"]


def test_completing_before_the_delete_was_issued_is_i20():
    mig = forward()
    mig.record([Fact(F.TemporalFenceIssued, {"request_id": "F1", "conflict_token": "1",
                                             "pre_paused": False, "pre_notes": "",
                                             "worker": "w"})])
    mig.record([Fact(F.ForwardCompleted, {"request_id": "F1"})])
    assert "I20" in codes(log(*events(mig)))


def test_a_source_created_without_its_migration_event_is_i20():
    mig = forward()
    mig.record([Fact(F.TemporalFenceIssued, {"request_id": "F1", "conflict_token": "1",
                                             "pre_paused": False, "pre_notes": "",
                                             "worker": "w"}),
                Fact(F.TemporalFenced, {"request_id": "F1", "conflict_token": "2",
                                        "handover": {}})])
    _, sfacts = fs.create_source_facts(mig.state, type("K", (), {
        "forward_migration_id": mig.state.migration_id})(), None, str(uuid4()), 1, 0)
    ((event, fields),) = sfacts
    fields = dict(fields, handover={"spec": None, "action": None, "policies": None,
                                    "remaining_actions": None, "cursor": None,
                                    "recent_actions": [], "running": [], "action_count": 0})
    src = Schedule._create(event, id=uuid4(), **fields)
    assert codes(log(*events(mig), *events(src))) == ["I20"]  # no SourceCreated beside it


def test_a_clean_forward_history_has_no_violation():
    assert codes(log(*events(forward()))) == []


def test_a_cursor_its_recorded_boundary_does_not_prove_is_i20():
    """TemporalFenced v2 carries what the server was seen to start; a cursor taken from the
    pause's time instead (10:00:20, which the server dropped) is flagged."""
    boundary = {"created": "2026-12-05T10:00:00.400000Z", "applied": "2026-12-05T10:00:20.700000Z",
                "floor": "2026-12-05T10:00:19Z",
                "probed": [["2026-12-05T10:00:21Z", False], ["2026-12-05T10:00:20Z", False]]}
    for cursor, found in (("2026-12-05T10:00:19Z", []), ("2026-12-05T10:00:20Z", ["I20"])):
        mig = forward()
        mig.record([Fact(F.TemporalFenceIssued, {"request_id": "F1", "conflict_token": "1",
                                                 "pre_paused": False, "pre_notes": "",
                                                 "worker": "w"}),
                    Fact(F.TemporalFenced, {"request_id": "F1", "conflict_token": "2",
                                            "handover": {"spec": {"every": 1}, "cursor": cursor},
                                            "boundary": boundary})])
        assert codes(log(*events(mig))) == found
