"""The state machine's findings, kept as explicit regression tests (issue 27): its own steps,
on its fixed clock, each once failing."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator
from uuid import UUID

import pytest

from schedfence.domain.errors import DomainError
from schedfence.domain.rollback.handover import Handover
from schedfence.domain.ids import schedule_aggregate_id
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.source.runs import ActionStartIssued
from tests.infra.test_state_machine import NS, RUNNING, SIDS, RollbackMachine


@contextmanager
def started(overlap: str, limit: int | None = None) -> Iterator[RollbackMachine]:
    """A machine with every schedule live and free at the destination, the running one under
    ``overlap`` (and ``limit``); torn down after."""
    machine = RollbackMachine()
    try:
        machine.schedules(pre=[(False, "", None)] * len(SIDS), overlap=overlap,
                          pause_on_failure=False, limit=limit)
        yield machine
    finally:
        machine.teardown()


def test_two_backfills_then_a_rollback_hand_each_time_over_once_per_origin() -> None:
    """Issue 27 item 4, the machine's own steps (it found them with a real clock in 2 of 3
    runs): two backfills of one range, then a rollback and a drain. Each (time, origin) is
    handed over once; the source started none of them, so none is started twice."""
    with started("skip") as machine:
        machine.run_until_idle()
        machine.manual("backfill")
        machine.manual("backfill")
        machine.rollback(RUNNING, None)
        machine.run_until_idle()
        [m] = [m for m in machine._migrations() if m.schedule_id == RUNNING]
        assert m.phase == "completed"
        machine.a_handed_over_time_starts_once()
        machine.checker_finds_nothing()
        h = Handover.model_validate(m.handover)
        assert [b["backfill_id"] for b in h.backfills] == ["backfill-1", "backfill-2"]


def test_the_machine_replays_a_seed_exactly() -> None:
    """The clock is fixed, so the same steps make the same log (nominal times included)."""
    def run() -> list[str]:
        with started("allow_all") as machine:
            machine.scheduler_pass(150)
            machine.manual("trigger")
            machine.scheduler_pass(61)
            return [f"{type(e).__name__}:{getattr(e, 'nominal', '')}:{getattr(e, 'cursor', '')}"
                    for e in machine._events(schedule_aggregate_id(NS, RUNNING, 1))]
    first = run()
    assert first == run()
    assert any(line.startswith("ActionStartIssued:2026-01-05T12:01:00Z") for line in first)


def test_a_re_created_schedule_starts_no_time_of_its_key_twice() -> None:
    """The machine found it once its clock was fixed: trigger and backfill, delete, re-create
    in the same second, trigger and backfill again. The new incarnation had the same
    ``backfill-1`` name and trigger second, so the same (time, origin) and request ids as the
    dead one (I17; a closed first run would have run again under ALLOW_DUPLICATE). A new
    incarnation now carries the key's backfill count, last trigger and cursor floor."""
    with started("allow_all") as machine:
        machine.scheduler_pass(130)
        machine.manual("trigger")
        machine.manual("backfill")
        machine.scheduler_pass(0)
        machine.mutate(RUNNING, "delete")
        machine.create(RUNNING, False, "")
        again = machine._call(machine.svc.trigger_schedule, NS, RUNNING, now=machine.now)
        assert isinstance(again, DomainError) and again.code == "already_exists"
        machine.manual("backfill")
        machine.scheduler_pass(0)
        machine.checker_finds_nothing()
        names = {e.origin for e in machine._events(schedule_aggregate_id(NS, RUNNING, 2))
                 if isinstance(e, ActionStartIssued)}
        assert names == {"backfill-2"}


def test_a_round_trip_carries_the_keys_backfill_names_to_the_forward_source() -> None:
    """A source the forward migration creates continues the key's backfill names, so a
    backfill after a round trip is not the first incarnation's ``backfill-1`` again (the same
    request ids: I17)."""
    with started("allow_all") as machine:
        machine.manual("backfill")
        machine.scheduler_pass(0)
        machine.rollback(RUNNING, None)
        machine.run_until_idle()
        machine.forward(RUNNING, "f1")
        for _ in range(3):
            machine.run_until_idle()
        state = machine.svc.load.source(NS, RUNNING).state
        assert (state.incarnation, state.closed) == (2, False), state
        assert state.backfill_count == 1
        machine.manual("backfill")
        machine.scheduler_pass(0)
        machine.checker_finds_nothing()
        names = {e.origin for e in machine._events(schedule_aggregate_id(NS, RUNNING, 2))
                 if isinstance(e, ActionStartIssued)}
        assert names == {"backfill-2"}, names


def test_a_program_update_follows_the_old_spec_until_its_instant() -> None:
    """The machine found it once it could update the program: the scheduler down for five
    minutes, the spec changed from every 60 s to every 90 s, then a pass. The update only
    swapped the spec, so the pass generated the new spec's times from the old cursor: it
    started 12:01:30, 12:03:00 and 12:04:30 (never owed) and lost 12:01 ... 12:05 (owed by
    the old spec before the update). An update now ticks first at its instant, as a pause
    does: from then on ticks follow the new spec."""
    with started("allow_all") as machine:
        machine.scheduler_down(300)  # 12:05:30, no pass since 12:00:30
        machine.update_program(90)
        machine.scheduler_pass(120)  # 12:07:30
        machine.the_oracle_finds_nothing_twice_or_unowed()
        machine.checker_finds_nothing()
        started_at = sorted(e.nominal for e in machine._events(
            schedule_aggregate_id(NS, RUNNING, 1)) if isinstance(e, ActionStartIssued))
        assert started_at == [f"2026-01-05T12:0{m}Z" for m in
                              ("1:00", "2:00", "3:00", "4:00", "5:00", "6:00", "7:30")]


def test_an_update_keeps_counting_a_limit_it_leaves_as_it_stands() -> None:
    """The soak found it (36,375 histories, 2 violations, both this): limit 2, the scheduler
    down 98 s, the spec changed to every 45 s, a pass. The update's tick started 12:01 and
    12:02, the last two the limit allowed, then wrote back the count read before the tick,
    so the pass started 12:02:15, which a never-migrated schedule would not."""
    with started("allow_all", limit=2) as machine:
        machine.scheduler_down(98)  # 12:02:08
        machine.update_program(45)
        machine.scheduler_pass(7)  # 12:02:15, a time of the new spec
        machine.the_oracle_finds_nothing_twice_or_unowed()
        machine.checker_finds_nothing()
        started_at = sorted(e.nominal for e in machine._events(
            schedule_aggregate_id(NS, RUNNING, 1)) if isinstance(e, ActionStartIssued))
        assert started_at == ["2026-01-05T12:01:00Z", "2026-01-05T12:02:00Z"]


@pytest.mark.parametrize("change", ["delete", "recreate"])
def test_a_schedule_deleted_between_the_receipt_and_the_settle_keeps_its_boundary(
        change: str) -> None:
    """The worker dies just before the settle and the schedule's user deletes it: the next
    drain starts the boundary's time (12:02:00, between the gap's end and the create) as a
    plain workflow, once, and the machine's own check holds it to that (it exempted this
    settle before: the time was lost). Deleted and re-created by its user (another chain at
    the id): the same, and the user's schedule is not written (before the fix the settle
    took the new schedule's create instant and recorded its times there: 12:02:00 lost)."""
    with started("allow_all") as machine:
        machine.scheduler_down(91)  # 12:02:01: the create falls 1 s after a time
        machine.rollback(RUNNING, None)
        machine.arm_crash("settle.before_call")
        machine.run_until_idle()  # the receipt, then the crash (a restart)
        [m] = [m for m in machine._migrations() if m.schedule_id == RUNNING]
        assert m.phase == "receipted" and not m.boundary_settled
        machine.scheduler_down(5)
        machine.temporal_user(RUNNING, change)
        theirs = machine._runs(RUNNING)[-1]
        assert (theirs["create_request_id"] != m.request_id) == (change == "recreate")
        machine.run_until_idle()
        machine.run_until_idle()  # a second drain: nothing more
        assert "settled" not in machine._runs(RUNNING)[-1] or change == "delete"
        [m] = [m for m in machine._migrations() if m.schedule_id == RUNNING]
        assert m.phase == "completed"
        [settle] = [e for e in machine._events(UUID(m.migration_id))
                    if isinstance(e, Migration.BoundarySettled)]
        assert settle.started == ["2026-01-05T12:02:00Z"]
        assert settle.deleted_at == "2026-01-05T12:02:06Z"
        assert machine.sim.created_count(NS, "act-2026-01-05T12:02:00Z") == 1
        machine.a_handed_over_time_starts_once()
        machine.the_oracle_finds_nothing_twice_or_unowed()
        machine.checker_finds_nothing()
