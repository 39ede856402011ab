"""The timeline's pieces: ids found by field name, ids linked inside text only where they stand
whole, the narration asked for whole ids, and an event type this release does not narrate."""
from __future__ import annotations

from schedfence.projections.narration import narrate
from schedfence.infra.application.views import HistoryEntry
from schedfence.infra.web.timeline import (MIGRATION, RUN, WORKFLOW, Linker, Segment, ids_in,
                                           observed_runs, row_of, utc_parts)

RUN_A = "0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"  # UUIDv7s of one millisecond: one 8-digit prefix
RUN_B = "0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5c"


def test_ids_are_found_by_their_field_names_at_any_depth() -> None:
    fields = {"run_id": RUN_A, "evidence": {"current_run_id": RUN_B}, "workflow_id": "wf",
              "workflow_ids": ["w1", "w2"], "migration_id": "m", "detail": RUN_A,
              "request_id": "R1", "first_execution_run_id": ""}
    assert sorted(ids_in(fields)) == [(MIGRATION, "m"), (RUN, RUN_A), (RUN, RUN_B),
                                      (WORKFLOW, "w1"), (WORKFLOW, "w2"), (WORKFLOW, "wf")]


def test_an_id_is_linked_only_where_it_stands_whole() -> None:
    link = Linker({RUN_A: RUN, "act": WORKFLOW, "temporal-sys-scheduler:s1": WORKFLOW})
    assert link(f"created run {RUN_A}: accept") == [
        Segment("created run "), Segment(RUN_A, RUN), Segment(": accept")]
    assert link("action act started; act-2 and act:1 are others") == [
        Segment("action "), Segment("act", WORKFLOW),
        Segment(" started; act-2 and act:1 are others")]
    assert link("at temporal-sys-scheduler:s10") == [Segment("at temporal-sys-scheduler:s10")]
    assert link(f"{RUN_B} is not {RUN_A}.") == [
        Segment(f"{RUN_B} is not "), Segment(RUN_A, RUN), Segment(".")]
    assert Linker({})("nothing known") == [Segment("nothing known")]


def test_the_narration_shows_whole_ids_unless_asked_for_prefixes() -> None:
    answer = {"kind": "created", "run_id": RUN_A, "first_execution_run_id": RUN_A,
              "status": "running", "detail": "", "proves_no_commit": False,
              "start_request_id": ""}
    whole = narrate("DestinationAnswered", answer, full_ids=True)
    cut = narrate("DestinationAnswered", answer, full_ids=False)
    assert whole is not None and cut is not None
    assert RUN_A in whole.text and RUN_A not in cut.text and RUN_A[:8] in cut.text
    assert narrate("DestinationAnswered", answer).text == whole.text  # whole by default


def entry(event_type: str, data: dict, position: int = 7) -> HistoryEntry:
    return HistoryEntry(position, "migration", "m-1", 3, f"schedfence.migration.{event_type}",
                        "2026-12-04T10:00:00.123456+00:00", data)


def test_a_type_this_release_does_not_narrate_is_shown_from_its_fields() -> None:
    row = row_of(entry("SomethingLater", {"run_id": RUN_A, "note": "<b>"}), None,
                 Linker({RUN_A: RUN}))
    assert row.text == [] and row.who == "-" and row.lane == "migration"
    assert row.fields == [("run_id", [Segment(RUN_A, RUN)]), ("note", [Segment("<b>")])]
    assert row.decision is None


def test_observed_runs_gather_each_run_with_its_fields_and_statuses() -> None:
    link = Linker({RUN_A: RUN, RUN_B: RUN})
    rows = [row_of(entry("DestinationAnswered", {"run_id": RUN_A, "status": "running",
                                                 "first_execution_run_id": RUN_B}, 4),
                   None, link),
            row_of(entry("ChainVerified", {"current_run_id": RUN_A,
                                           "current_status": "completed"}, 5), None, link)]
    runs = {r.run_id: r for r in observed_runs(rows)}
    assert runs[RUN_A].statuses == ["running", "completed"]
    assert runs[RUN_A].seen_as == ["DestinationAnswered.run_id",
                                   "ChainVerified.current_run_id"]
    assert runs[RUN_A].positions == [4, 5] and runs[RUN_B].positions == [4]
    assert runs[RUN_B].statuses == []


def test_times_are_shown_in_utc_to_the_microsecond() -> None:
    assert utc_parts("2026-12-04T11:30:00.000001+01:30") == ("2026-12-04", "10:00:00.000001")


def test_runs_a_start_only_carries_are_not_observed_runs() -> None:
    carried = {"input": {"handover": {"recent_actions": [{"run_id": RUN_B}]}}}
    rearm = {"evidence": {"current_run_id": RUN_A, "current_status": "completed"},
             "handover": {"recent_actions": [{"run_id": RUN_B}]}}
    link = Linker({RUN_A: RUN, RUN_B: RUN})
    runs = observed_runs([row_of(entry("DestinationStartIssued", carried, 3), None, link),
                          row_of(entry("StartClaimRearmed", rearm, 4), None, link)])
    assert [(r.run_id, r.seen_as, r.statuses) for r in runs] == [
        (RUN_A, ["StartClaimRearmed.evidence.current_run_id"], ["completed"])]
