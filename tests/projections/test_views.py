"""Stats, migrations by state and the on-call list, on the failure modes' histories; the views
agree with the aggregates themselves and with the domain decisions."""
from __future__ import annotations

from uuid import UUID

import pytest

from schedfence.domain.rollback import decide as d
from schedfence.domain.errors import DomainError, InvalidArgument
from schedfence.domain.ids import destination_workflow_id
from tests.projections.histories import OTHER_NS, Histories, build

NS = "default"


@pytest.fixture
def hist(file_store_url: str):
    h = build(file_store_url)  # a SQLite file or a PostgreSQL schema (tests/conftest.py)
    yield h
    h.close()


def test_stats_count_migrations_per_namespace_and_state(hist: Histories) -> None:
    doc = hist.service.stats()
    assert doc["by_state"] == {"pending": 1, "claimed": 1, "receipted": 0, "completed": 2,
                               "parked": 3, "legacy_pending": 1, "aborted": 1}
    assert doc["by_namespace"] == {
        NS: {"pending": 1, "claimed": 1, "completed": 1, "parked": 3, "legacy_pending": 1,
             "aborted": 1},
        OTHER_NS: {"completed": 1}}
    assert doc["migrations"] == 9 and doc["open"] == 6
    assert doc["projected_through"] == hist.service.event_count()


def test_stats_follow_new_events(hist: Histories) -> None:
    hist.service.abort(NS, "foreign", reason="not-needed", actor="erin")
    hist.service.run_until_idle()  # the pending and claimed ones complete now
    doc = hist.service.stats()
    assert doc["by_state"]["parked"] == 2 and doc["by_state"]["aborted"] == 2
    assert doc["by_state"]["pending"] == 0 and doc["by_state"]["claimed"] == 0
    assert doc["by_state"]["completed"] == 4
    assert "pending" not in doc["by_namespace"][NS]  # no zero rows


def test_every_view_row_is_the_aggregates_own_state(hist: Histories) -> None:
    rows = hist.service.migrations_by_state()
    assert len(rows) == 9
    for row in rows:
        state = hist.service.app.repository.get(UUID(row.migration_id)).state
        assert (row.state, row.request_id, row.park_reason, row.attempts,
                row.starts_issued, row.claim_armed, row.destination_first_run_id) == \
            (state.phase, state.request_id, state.park_reason, state.attempts,
             state.starts_issued, state.claim_armed, state.receipt)
        assert row.request_id_origin == state.origin and row.last_worker == state.last_worker
        assert row.created_at <= row.updated_at and row.idle_seconds <= row.age_seconds


def test_migrations_by_state(hist: Histories) -> None:
    parked = hist.service.migrations_by_state("parked")
    assert {(r.schedule_id, r.park_reason) for r in parked} == {
        ("foreign", "foreign_destination"), ("gone", "head_missing"),
        ("adopted", "adopted_unverified")}
    assert [r.schedule_id for r in hist.service.migrations_by_state("claimed")] == ["claimed"]
    claimed = hist.service.migrations_by_state("claimed")[0]
    assert claimed.last_answer == "unavailable" and not claimed.claim_armed
    assert hist.service.migrations_by_state("receipted") == []
    assert len(hist.service.migrations_by_state(limit=2)) == 2
    with pytest.raises(InvalidArgument):
        hist.service.migrations_by_state("stuck")


def _items(hist: Histories, stuck_after: float) -> dict[str, object]:
    return {i.migration.schedule_id: i for i in hist.service.oncall(stuck_after)}


def test_oncall_lists_parked_and_legacy_and_only_old_open_ones_as_stuck(hist: Histories) -> None:
    patient = _items(hist, stuck_after=3600)
    assert {k: i.category for k, i in patient.items()} == {
        "foreign": "parked", "gone": "parked", "adopted": "parked", "legacy": "legacy"}
    now = _items(hist, stuck_after=0)
    assert {k: i.category for k, i in now.items() if i.category == "stuck"} == {
        "claimed": "stuck", "pending": "stuck"}
    assert not {"done", "done2", "aborted"} & set(now)
    assert list(now)[:3] == [k for k in now if now[k].category == "parked"]  # parked first


def test_oncall_advice_follows_the_domain_decisions(hist: Histories) -> None:
    items = _items(hist, stuck_after=0)
    for sid, item in items.items():
        state = hist.service.app.repository.get(UUID(item.migration.migration_id)).state
        try:
            d.decide_abort(state, "x", "y")
            allowed = True
        except DomainError:
            allowed = False
        assert item.abort_allowed == allowed, sid
        assert item.verdicts["abort"] == ("allowed" if allowed else
                                          f"refused: {item.abort_refusal}")
    foreign, gone, legacy = items["foreign"], items["gone"], items["legacy"]
    assert foreign.abort_allowed
    assert any("abort allowed" in a for a in foreign.actions)
    assert any("re-arms automatically when the foreign run closes" in a
               for a in foreign.actions)
    assert not gone.abort_allowed and "no answer proves" in gone.abort_refusal
    assert any("re-arm only after proving nothing committed, or resolve after a manual "
               "check" in a for a in gone.actions)
    assert gone.verdicts["rearm"].startswith("refused")
    assert not legacy.abort_allowed and legacy.verdicts["adopt"] == "allowed"
    assert any(a.endswith("recover adopt default legacy --actor YOU --reason WHY "
                          "--request-id NEW") for a in legacy.actions)
    assert items["adopted"].verdicts["rearm"].startswith("allowed with")
    assert any("reconcile only, never restart" in a for a in items["claimed"].actions)
    assert any("check that a worker runs" in a for a in items["pending"].actions)


def test_oncall_clears_once_the_foreign_run_closes_and_the_worker_finishes(
        hist: Histories) -> None:
    assert "foreign" in _items(hist, 3600)
    hist.dest.complete(NS, destination_workflow_id("foreign"))
    hist.service.run_until_idle()  # re-arms by itself, starts, completes
    assert "foreign" not in _items(hist, 0)
    assert hist.service.migration(NS, "foreign").state == "completed"


def test_oncall_rejects_a_negative_threshold(hist: Histories) -> None:
    with pytest.raises(InvalidArgument):
        hist.service.oncall(stuck_after_seconds=-1)
