"""The ownership audit's pure decision (domain/owners/classify.py): each kind from its
situation, and properties over every combination of what the store says and what Temporal
holds."""
from __future__ import annotations

from hypothesis import given, strategies as st

from schedfence.domain.owners.audit import OwnershipAudits, decide_record, evolve_audits
from schedfence.domain.owners.classify import (DRIFT, FAILING, KINDS, OWNERS, AtDestination,
                                               OwnerRow, StoreSays, classify, changed,
                                               counts, needs_describe, store_says)
from schedfence.domain.owners.resolve import advice, program_args, resolutions

SPEC = {"intervals": [{"every": 60, "offset": 0}]}
ACTION = {"workflow_type": "W", "task_queue": "q", "workflow_id": "w"}
HANDOVER = {"spec": SPEC, "action": ACTION}


def test_each_kind_from_its_situation() -> None:
    handed = StoreSays("temporal", migration_id="m1", handover=HANDOVER)
    assert classify("k", handed, None).kind == "missing_at_destination"
    assert classify("k", handed, None).owner == "none"
    row = classify("k", handed, AtDestination(next_run="2030-01-01T00:00:00Z"))
    assert (row.owner, row.kind, row.migration_id, row.next_run) == \
        ("temporal", "none", "m1", "2030-01-01T00:00:00Z")
    edited = {"spec": {"intervals": [{"every": 120}]}, "action": ACTION}
    assert classify("k", handed, AtDestination(program=edited)).kind == "changed_at_destination"
    assert classify("k", handed, AtDestination(program=HANDOVER)).kind == "none"
    running = StoreSays("source")
    assert classify("k", running, AtDestination()).kind == "two_owners"
    assert classify("k", running, AtDestination(paused=True)).kind == \
        "unexplained_at_destination"
    assert classify("k", StoreSays("source", paused=True), AtDestination()).owner == "temporal"
    assert classify("k", StoreSays("closed"), AtDestination()).kind == \
        "unexplained_at_destination"
    assert classify("k", None, AtDestination()).kind == "native"
    assert classify("k", StoreSays("moving", migration_id="f"), AtDestination()).kind == "none"


def test_our_handover_at_a_key_the_store_never_knew_is_failing_drift() -> None:
    """Another store's handover (or this store's, lost or restored) is not native: the
    audit fails on it and says what to do, never to delete it."""
    row = classify("k", None, AtDestination(next_run="2030-01-01T00:00:00Z", handed_over=True))
    assert (row.owner, row.store, row.kind, row.next_run) == \
        ("temporal", "unknown", "foreign_handover", "2030-01-01T00:00:00Z")
    assert row.kind in FAILING and row.kind in KINDS
    assert counts([row])["kind"]["foreign_handover"] == 1
    # a listing with the memo is confirmed by a describe; one without needs none
    assert needs_describe(None, AtDestination(handed_over=True))
    assert not needs_describe(None, AtDestination())
    assert classify("k", None, AtDestination()).kind == "native"
    # the memo changes nothing where the store knows the key
    handed = StoreSays("temporal", migration_id="m1")
    assert classify("k", handed, AtDestination(handed_over=True)).kind == "none"
    assert resolutions(row, "ns", "h:7233") == ["schedfence forward ns k"]
    said = advice(row, "ns")
    assert said is not None and "schedfence owners --namespace ns" in said \
        and "never delete" in said
    assert advice(classify("k", None, AtDestination()), "ns") is None
    assert OwnerRow.of_list(row.to_list()) == row


def test_store_says_from_folded_states() -> None:
    key = {"incarnation": 1, "forward_migration_id": None}
    assert store_says(key, None) is None
    assert store_says({"forward_migration_id": "f"}, None) == StoreSays("moving",
                                                                       migration_id="f")
    assert store_says(key, {"closed": True, "close_reason": "migrated",
                            "completed_migration_id": "m"}) == \
        StoreSays("temporal", migration_id="m")
    assert store_says(key, {"closed": True, "close_reason": "deleted"}).stand == "closed"
    assert store_says(key, {"fence_migration_id": "m"}).stand == "moving"
    assert store_says(key, {"paused": True}) == StoreSays("source", True)


def test_changed_compares_programs_as_models() -> None:
    assert not changed(HANDOVER, {"spec": {"intervals": [{"every": 60}]}, "action": ACTION})
    assert changed(HANDOVER, {"spec": SPEC, "action": None})
    assert changed(HANDOVER, {"spec": {"bogus": 1}, "action": ACTION})
    assert not changed(None, HANDOVER) and not changed(HANDOVER, None)


stores = st.one_of(st.none(), st.builds(
    StoreSays, st.sampled_from(["source", "temporal", "closed", "moving"]), st.booleans(),
    st.one_of(st.none(), st.just("m")), st.one_of(st.none(), st.just(HANDOVER))))
dests = st.one_of(st.none(), st.builds(
    AtDestination, st.booleans(), st.one_of(st.none(), st.just("2030-01-01T00:00:00Z")),
    st.one_of(st.none(), st.just(HANDOVER), st.just({"spec": None, "action": ACTION})),
    st.booleans()))


@given(stores, dests)
def test_every_situation_has_one_sound_row(store, dest) -> None:
    if store is None and dest is None:
        return
    row = classify("k", store, dest)
    assert row.owner in OWNERS and row.kind in KINDS
    # a key the store never knew is native, or drift when it carries our handover memo
    assert (row.kind in ("native", "foreign_handover")) == (store is None)
    if store is None:
        assert (row.kind == "foreign_handover") == dest.handed_over
    if row.kind == "missing_at_destination":
        assert dest is None and store.stand == "temporal"
    if row.kind in ("two_owners", "unexplained_at_destination"):
        assert dest is not None and store.stand in ("source", "closed")
    if row.kind == "changed_at_destination":
        assert dest is not None and dest.program is not None
    if dest is None:
        assert row.owner != "temporal" and row.next_run is None
    if store is not None and store.stand == "moving":
        assert row.kind == "none"  # a migration in flight is never drift
    # a listing that claims drift is confirmed by a describe; one that does not is not
    assert needs_describe(store, dest) == (row.kind in FAILING)
    assert OwnerRow.of_list(row.to_list()) == row


@given(st.lists(st.tuples(stores, dests), max_size=20))
def test_counts_add_up_and_the_recorded_audit_folds_back(pairs) -> None:
    rows = [classify(f"k{i}", s, d) for i, (s, d) in enumerate(pairs)
            if s is not None or d is not None]
    c = counts(rows)
    assert sum(c["owner"].values()) == sum(c["kind"].values()) == len(rows)
    (fact,) = decide_record("ns", rows, deep=False, destination="sim", actor="a",
                            calls={"list": 1, "describe": 0})
    import uuid
    event = fact.event(originator_id=uuid.uuid4(), originator_version=2, **fact.fields)
    state = evolve_audits(None, event)
    assert state.owner_rows() == sorted(rows, key=lambda r: r.schedule_id)
    assert OwnershipAudits.from_last(event).state == state


def test_resolutions_name_the_command_for_each_kind() -> None:
    def row(kind: str, store: str = "source") -> OwnerRow:
        return OwnerRow("k 1", "none", store, "m", kind)  # type: ignore[arg-type]
    assert resolutions(row("missing_at_destination", "temporal"), "ns", "", HANDOVER) == [
        "schedfence schedule create ns 'k 1' --interval 60 --workflow-type W --task-queue q "
        "--workflow-id w"]
    assert resolutions(row("two_owners"), "ns", "h:7233") == [
        "temporal schedule delete --address h:7233 --namespace ns --schedule-id 'k 1'"]
    assert resolutions(row("unexplained_at_destination", "closed"), "ns", "")[1] == \
        "schedfence forward ns 'k 1'"
    assert len(resolutions(row("unexplained_at_destination"), "ns", "")) == 1
    assert resolutions(row("changed_at_destination", "temporal"), "ns", "") == []
    assert set(DRIFT) - set(FAILING) == {"changed_at_destination"}
    assert "--cron" in program_args({"spec": {"cron_expressions": ["0 * * * *"],
                                              "time_zone": "Europe/Paris"}})


def test_a_recorded_audit_is_narrated() -> None:
    from schedfence.projections.narration import narrate
    rows = [classify("a", StoreSays("temporal", migration_id="m"), None),
            classify("b", None, AtDestination())]
    (fact,) = decide_record("ns", rows, deep=False, destination="sim", actor="ann",
                            calls={"list": 1, "describe": 1})
    line = narrate("schedfence.ownership.AuditRecorded", fact.fields)
    assert line is not None and "ownership audit of ns by ann: 2 key(s)" in line.text
    assert "missing_at_destination 1" in line.text and "native" not in line.text
