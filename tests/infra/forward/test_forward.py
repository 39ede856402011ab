"""Forward migration in the simulator: a schedule handed to a Temporal Schedule and back.

Given a schedule that runs on the source and was rolled back (the Temporal side runs it now),
when a forward migration is asked and the worker drains, then the Temporal side is fenced
(paused, marked), read, the source re-created dormant from it, the Temporal schedule deleted,
and only then the source released with the pre-fence pause and notes."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from schedfence.domain.source.action import make_action, make_policies, parse_nominal
from schedfence.domain.errors import AlreadyExists, MigrationPending
from schedfence.domain.forward.aggregate import forward_marker
from schedfence.domain.ports import DestinationNotFound
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from schedfence.domain.source.spec import make_spec

NS, SID = "ns", "s"
SPEC = make_spec(intervals=[(60, 0)])


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(timezone.utc).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def env(tmp_path):
    clock = Clock()
    dest = SimulatedDestination(clock=clock)
    svc = open_service(f"sqlite:///{tmp_path / 'f.db'}", dest, worker_id="w1")
    yield svc, dest, clock
    svc.close()


def on_temporal(svc, clock, notes="nightly", paused=False):
    """A schedule that ran on the source, handed over to the Temporal side."""
    svc.create_schedule(NS, SID, spec=SPEC, notes=notes, paused=paused,
                        action=make_action(workflow_type="W", task_queue="q", workflow_id="act"),
                        policies=make_policies(overlap="allow_all"))
    first = parse_nominal(svc.load.source(NS, SID).state.cursor)
    svc.run_scheduler(now=clock.now + timedelta(minutes=3))
    clock.now += timedelta(minutes=3, seconds=5)
    svc.rollback(NS, SID, "R1")
    svc.run_until_idle(retry_for=0)
    assert svc.migration(NS, SID).state == "completed"
    return first


def test_a_temporal_schedule_comes_back_to_the_source(env):
    svc, dest, clock = env
    on_temporal(svc, clock)
    clock.now += timedelta(minutes=5)
    assert svc.forward(NS, SID, "F1").outcome == "accepted"
    svc.run_until_idle(retry_for=0)
    st = svc.forward_state(NS, SID, "F1")
    assert st.phase == "completed", st
    with pytest.raises(DestinationNotFound):
        dest.describe_schedule(NS, SID)
    source = svc.load.source(NS, SID).state
    assert (source.incarnation, source.closed, source.migration_pending) == (2, False, False)
    assert (source.paused, source.notes) == (False, "nightly")  # the pre-fence state (I11)
    assert source.spec == svc.app.repository.get(
        svc.load.key(NS, SID).state.current_schedule_id).state.spec
    # The source resumes strictly after what the Temporal side answered for.
    temporal = dest.temporal_starts(NS, SID, clock.now)
    assert parse_nominal(source.cursor) >= temporal[-1]
    assert svc.verify() == []


def test_a_retried_request_is_the_same_migration(env):
    svc, dest, clock = env
    on_temporal(svc, clock)
    first = svc.forward(NS, SID, "F1")
    assert svc.forward(NS, SID, "F1").outcome == "already_pending"
    svc.run_until_idle(retry_for=0)
    assert svc.forward(NS, SID, "F1").outcome == "already_completed"
    assert first.migration_id == svc.forward(NS, SID, "F1").migration_id


def test_no_ping_pong_a_second_forward_or_a_live_source_is_refused_writing_nothing(env):
    svc, dest, clock = env
    on_temporal(svc, clock)
    svc.forward(NS, SID, "F1")
    before = svc.event_count()
    with pytest.raises(MigrationPending):
        svc.forward(NS, SID, "F2")
    assert svc.event_count() == before
    svc.run_until_idle(retry_for=0)
    before = svc.event_count()
    with pytest.raises(AlreadyExists):  # the source owns it now
        svc.forward(NS, SID, "F3")
    assert svc.event_count() == before


def test_no_new_incarnation_while_a_forward_holds_the_key(env):
    svc, dest, clock = env
    on_temporal(svc, clock)
    svc.forward(NS, SID, "F1")
    before = svc.event_count()
    with pytest.raises((MigrationPending, AlreadyExists)):
        svc.create_schedule(NS, SID)
    assert svc.event_count() == before


def test_a_concurrent_update_moves_the_token_and_is_never_lost(env):
    svc, dest, clock = env
    on_temporal(svc, clock)
    dest.defer_updates = True
    svc.forward(NS, SID, "F1")
    svc.run_until_idle(retry_for=0)  # fence issued, not applied yet
    assert svc.forward_state(NS, SID, "F1").phase == "fence_issued"
    dest.user_update(NS, SID, paused=False, notes="changed by an operator")
    dest.apply_updates(NS, SID)  # ours is dropped: its token moved
    dest.defer_updates = False
    svc.run_until_idle(retry_for=0)
    st = svc.forward_state(NS, SID, "F1")
    assert st.phase == "completed" and st.fence_issues == 2
    source = svc.load.source(NS, SID).state
    assert source.notes == "changed by an operator"  # the update was re-read, not lost


def test_a_delete_by_someone_else_during_the_handoff_parks_and_the_source_stays_dormant(env):
    svc, dest, clock = env
    on_temporal(svc, clock)
    svc.forward(NS, SID, "F1")

    def delete_after_create(point):
        if point == "forward.create.after_append":
            dest.delete_schedule(NS, SID)
    svc.forward_worker.crash_hook = delete_after_create
    worker = svc.forward_worker
    worker.crash_hook = delete_after_create
    mid = svc.open_forward_ids()[0]
    worker.attempt(mid)
    st = svc.forward_state(NS, SID, "F1")
    assert (st.phase, st.park_reason) == ("parked", "deleted_elsewhere")
    source = svc.load.source(NS, SID).state
    assert source.migration_pending and source.paused  # dormant: takes no action
    svc.take_over_forward(NS, SID, "F1", actor="oncall")
    assert svc.forward_state(NS, SID, "F1").phase == "completed"
    assert not svc.load.source(NS, SID).state.migration_pending
    assert svc.verify() == []


def test_abort_before_the_source_exists_restores_the_temporal_schedule(env):
    svc, dest, clock = env
    on_temporal(svc, clock, notes="keep")
    dest.user_update(NS, SID, paused=False, notes="keep")
    svc.forward(NS, SID, "F1")
    worker = svc.forward_worker
    worker.crash_hook = lambda p: (_ for _ in ()).throw(RuntimeError(p)) \
        if p == "forward.TemporalFenced.before_append" else None
    with pytest.raises(RuntimeError):
        worker.attempt(svc.open_forward_ids()[0])
    assert dest.describe_schedule(NS, SID).notes == forward_marker("F1")
    st = svc.abort_forward(NS, SID, "F1", reason="changed my mind", actor="oncall")
    assert st.phase == "aborted"
    snap = dest.describe_schedule(NS, SID)
    assert (snap.paused, snap.notes) == (False, "keep")
    assert svc.open_forward_ids() == []
    assert svc.verify() == []


def test_three_round_trips_keep_every_field_and_run_each_time_once(env):
    """Source -> Temporal -> source, three times, the clock moving minutes between steps:
    the spec, action, policies and limit come back unchanged, and the source's starts with
    each Temporal stint's starts are exactly what one scheduler would have started (I14)."""
    from schedfence.domain.invariants.exactly_once import Owed, check_exactly_once
    from schedfence.domain.source.runs import ActionStartIssued
    svc, dest, clock = env
    first = on_temporal(svc, clock)
    first_state = svc.app.repository.get(svc.load.key(NS, SID).state.current_schedule_id)
    program = {k: getattr(first_state.state, k) for k in ("spec", "action", "policies",
                                                          "remaining_actions")}
    temporal: list = []
    for trip in range(3):
        clock.now += timedelta(minutes=4, seconds=7)
        temporal += dest.temporal_starts(NS, SID, clock.now)  # what it will have started
        svc.forward(NS, SID, f"F{trip}")
        svc.run_until_idle(retry_for=0)
        assert svc.forward_state(NS, SID, f"F{trip}").phase == "completed"
        source = svc.load.source(NS, SID).state
        assert {k: getattr(source, k) for k in program} == program
        svc.run_scheduler(now=clock.now)  # the source catches up what came due meanwhile
        clock.now += timedelta(minutes=3, seconds=31)
        svc.run_scheduler(now=clock.now)
        clock.now += timedelta(seconds=2)
        svc.rollback(NS, SID, f"RT{trip}")
        svc.run_until_idle(retry_for=0)
        assert svc.migration(NS, SID).state == "completed"
    clock.now += timedelta(minutes=2)
    temporal += dest.temporal_starts(NS, SID, clock.now)
    started = [parse_nominal(e.nominal) for e in svc.app.notifications((ActionStartIssued.TOPIC,))
               for e in [svc.app.mapper.to_domain_event(e)]]
    verdict = check_exactly_once(Owed(SPEC, first, clock.now), started, temporal)
    assert verdict.ok, verdict.describe()
    assert svc.verify() == []


def test_history_and_replay_show_the_forward_migration(env):
    svc, dest, clock = env
    on_temporal(svc, clock)
    svc.forward(NS, SID, "F1")
    svc.run_until_idle(retry_for=0)
    kinds = [(e.aggregate, e.type.rsplit(".", 1)[-1]) for e in svc.history(NS, SID)]
    steps = [t for k, t in kinds if k == "forward"]
    assert steps == ["ForwardRequested", "TemporalFenceIssued", "TemporalFenced",
                     "SourceCreated", "TemporalDeleteIssued", "ForwardCompleted"]
    assert ("schedule", "OwnershipTaken") in kinds
    svc.replay(NS, SID)  # folds every step with today's reducers, the checker at each


def test_the_worker_pool_moves_forward_migrations_too(env):
    """`schedfence worker` (the pool over the due index) finishes a forward migration."""
    import threading
    svc, dest, clock = env
    on_temporal(svc, clock)
    svc.forward(NS, SID, "F1")
    svc.run_workers(threading.Event(), concurrency=2, until_idle=True, poll_interval=0)
    assert svc.forward_state(NS, SID, "F1").phase == "completed"


def test_a_rollback_abort_on_a_dormant_source_names_the_forward_migration(env):
    from schedfence.domain.errors import RecoveryRefused
    svc, dest, clock = env
    on_temporal(svc, clock)
    svc.forward(NS, SID, "F1")
    worker = svc.forward_worker
    worker.crash_hook = lambda p: (_ for _ in ()).throw(RuntimeError(p)) \
        if p == "forward.create.after_append" else None
    with pytest.raises(RuntimeError):
        worker.attempt(svc.open_forward_ids()[0])
    before = svc.event_count()
    with pytest.raises(RecoveryRefused, match="forward migration .* holds it"):
        svc.abort(NS, SID, reason="r", actor="a")
    assert svc.event_count() == before
