"""Replay corpus (Temporal's TestReplays): every recorded history still decodes through the
real mapper and folds, with today's code, to the recorded states, decisions and verdicts."""
from __future__ import annotations

import copy
import json

import pytest

from schedfence.domain.rollback.aggregate import Migration
from schedfence.infra.application.replay import replayer as replay
from tests import pgtools
from tests.helpers import MEMORY
from tests.replay import corpus, regenerate

FILES = corpus.files()
DOCS = {corpus.key(p): corpus.load(p) for p in FILES}


def by_type(doc: dict, short: str) -> dict:
    return next(e for e in doc["events"] if e["topic"].endswith("." + short))


@pytest.mark.parametrize("name", sorted(DOCS))
def test_recorded_history_refolds_to_the_recorded_expectations(name):
    doc = DOCS[name]
    assert corpus.check(doc) == []
    positions = [e["position"] for e in doc["events"]]
    assert positions == sorted(set(positions)) and len(doc["expected"]["steps"]) == len(positions)


def test_the_corpus_covers_every_rollback_failure_mode_and_random_workloads():
    modes = {d["failure_mode"] for d in DOCS.values()}
    assert {f"F{n}" for n in range(1, 12)} <= modes
    randoms = [d for d in DOCS.values() if d["failure_mode"] == "random"]
    assert len(randoms) >= 2
    for d in randoms:  # each exercised lost responses, crashes and continue-as-new
        w = d["workload"]
        assert w["start_lost_response"] and w["crashes"] and w["continue_as_new"], d["name"]
        assert len(d["events"]) >= 80
    assert all(p.stat().st_size < corpus.MAX_BYTES for p in FILES)


def test_the_corrupt_history_pins_a_violation_at_each_bad_step():
    doc = DOCS["corrupt_history.json"]
    flagged = {s["type"]: sorted(v["invariant"] for v in s["violations"])
               for s in doc["expected"]["steps"] if s["violations"]}
    assert flagged == {"DestinationStartIssued": ["I11", "I4"], "SourceClosed": ["I2"]}
    assert [v["invariant"] for v in doc["expected"]["final_violations"]] == ["I10"]


def test_an_old_schema_version_stays_old_and_is_upcast_on_read():
    doc = DOCS["f8_legacy_v1.json"]
    record = by_type(doc, "RequestIdAssigned")
    assert "class_version" not in record["state"] and "request_id" not in record["state"]
    [(_, event)] = corpus.decode([record])
    assert (event.request_id, event.origin, event.claim_armed) == (None, "legacy", False)
    step = next(s for s in doc["expected"]["steps"] if s["position"] == record["position"])
    assert (step["state"]["phase"], step["next_step"]) == ("legacy_pending", "fail_closed")


def test_a_v1_boundary_settle_reads_as_not_pinned():
    record = by_type(DOCS["s3_handover.json"], "BoundarySettled")
    assert "class_version" not in record["state"] and "pin" not in record["state"]
    [(_, event)] = corpus.decode([record])
    assert event.pin is None and event.started == record["state"]["started"]
    assert event.deleted_at is None and event.over_limit is None  # v3's, v4's: not known


def test_a_v3_boundary_settle_reads_as_over_limit_unknown():
    record = copy.deepcopy(by_type(DOCS["s3_handover.json"], "BoundarySettled"))
    record["state"].update(class_version=3, pin="2026-12-04T09:31:07Z", deleted_at=None)
    [(_, event)] = corpus.decode([record])
    assert (event.pin, event.over_limit) == ("2026-12-04T09:31:07Z", None)


# -- a change that breaks an old history fails the corpus check ------------------------------
def mutated(name: str, change) -> dict:
    doc = copy.deepcopy(DOCS[name])
    change(doc)
    return doc


def test_a_changed_payload_is_caught_at_its_step():
    def lose_the_answer(doc):
        by_type(doc, "DestinationAnswered")["state"]["kind"] = "unavailable"
    problems = corpus.check(mutated("f7_other_request_id.json", lose_the_answer))
    assert problems and "state differs" in problems[0]
    position = by_type(DOCS["f7_other_request_id.json"], "DestinationAnswered")["position"]
    assert problems[0].startswith(f"position {position} DestinationAnswered")


@pytest.mark.parametrize("change", ["renamed_topic", "dropped_field", "renamed_field"])
def test_a_stored_event_todays_code_cannot_read_is_caught(change):
    def edit(doc):
        event = by_type(doc, "ChainVerified")
        if change == "renamed_topic":
            event["topic"] = "schedfence.migration.ChainChecked"
        elif change == "dropped_field":
            del event["state"]["verdict"]
        else:
            event["state"]["outcome"] = event["state"].pop("verdict")
    problems = corpus.check(mutated("f3_lost_response.json", edit))
    assert len(problems) == 1 and problems[0].startswith("cannot decode")


def test_a_schema_bump_without_an_upcaster_fails_old_histories(monkeypatch):
    monkeypatch.setattr(Migration.StartClaimConsumed, "class_version", 2)
    problems = corpus.check(DOCS["f1_foreign_destination.json"])
    assert problems and "cannot decode" in problems[0] and "upcast_v1_v2" in problems[0]


def test_a_reducer_change_fails_old_histories(monkeypatch):
    real = replay.REDUCERS["migration"]

    def forgets_the_claim(state, event):
        after = real(state, event)
        return after if not isinstance(event, Migration.StartClaimConsumed) else state
    monkeypatch.setitem(replay.REDUCERS, "migration", forgets_the_claim)
    problems = corpus.check(DOCS["f3_lost_response.json"])
    assert problems and "StartClaimConsumed: state differs" in problems[0]


# -- the regenerate tool ---------------------------------------------------------------------
def test_regenerate_refuses_to_overwrite_without_force(tmp_path, monkeypatch, capsys,
                                                       store_kind, request):
    """Recorded on SQLite (in memory) or PostgreSQL (a fresh schema per history): the same."""
    if store_kind == "postgres":
        dbname = request.getfixturevalue("pg_database")

        def new_store() -> str:
            return pgtools.new_schema_url(dbname)
    else:
        def new_store() -> str:
            return MEMORY
    monkeypatch.setattr(corpus, "HISTORIES", tmp_path)
    (tmp_path / "f3_lost_response.json").write_text("old")
    assert regenerate.main(["f3_lost_response", "f7_other_request_id"], new_store) == 1
    assert "refusing to overwrite" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f3_lost_response.json"]
    assert (tmp_path / "f3_lost_response.json").read_text() == "old"
    assert regenerate.main(["--force", "f3_lost_response", "f7_other_request_id"],
                           new_store) == 0
    for name in ("f3_lost_response.json", "f7_other_request_id.json"):
        doc = json.loads((tmp_path / name).read_text())
        assert corpus.check(doc) == []
        recorded = [(e["topic"], e["originator_version"]) for e in DOCS[name]["events"]]
        assert [(e["topic"], e["originator_version"]) for e in doc["events"]] == recorded


def test_regenerate_rejects_unknown_names(capsys):
    with pytest.raises(SystemExit):
        regenerate.main(["no_such_history"])
    assert "unknown histories" in capsys.readouterr().err
