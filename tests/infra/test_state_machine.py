"""Stateful property test: admin calls, worker attempts, crashes, faults and a hostile
destination interleaved at random over several schedules (docs/protocol.md). One schedule
runs (a spec, an action, a random overlap policy): scheduler passes at a compressed clock,
triggers, backfills, program updates and actions finishing interleave with its rollbacks, so the checker's
action rules (I1, I17, I18) and the handover's (one boundary settle, I8; each time once, I14)
are held every step. Forward migrations (the Temporal side taken back), their aborts and the
Temporal side's other users (an update, a delete) race the rollbacks, so no ping-pong (I19) and
the takeover's proof (I20) are held too.

After every step the service's own invariant checker must find nothing, and the destination
must agree with the event log: a source closed by migration names a chain its migration
created, no migration ever created two runs, and an open migration keeps its source paused
(the invariants: tests/infra/machine_invariants.py).
``SCHEDFENCE_HYPOTHESIS_EXAMPLES`` raises the number of examples (default keeps the file fast).
The machine runs on SQLite in memory and on PostgreSQL (fewer examples there; see below).
"""
from __future__ import annotations

import itertools
import os
from datetime import datetime, timedelta, timezone
from typing import Callable
from uuid import UUID

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (RuleBasedStateMachine, initialize, invariant, precondition,
                                 rule, run_state_machine_as_test)

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.errors import DomainError, MigrationPending, SentinelBlocked
from schedfence.domain.ids import (DUMMY_WORKFLOW_TYPE, SCHEDULER_WORKFLOW_TYPE,
                                   destination_workflow_id, schedule_aggregate_id)
from schedfence.domain.source.invoker import OVERLAPS
from schedfence.domain.source.spec import make_spec
from schedfence.domain.destination_id import DestinationId
from schedfence.domain.ports import DestinationError, DestinationUnavailable, StartWorkflow
from schedfence.infra.demo.legacy import plant_legacy_v1
from schedfence.infra.application.service import MigrationService, open_service
from schedfence.infra.application.views import ScheduleView
from schedfence.infra.adapters.destination.simulator import InMemorySimState, SimulatedDestination
from tests import pgtools
from tests.infra.machine_crashes import BOUNDARIES, ArmedCrash, SimulatedCrash
from tests.infra.machine_invariants import NS, RUNNING, SIDS, MachineInvariants
from tests.infra.machine_oracle import PauseLog, UpdateLog
from tests.helpers import MEMORY

REQUEST_IDS = (None, "r1", "r2")  # None: the derived (fallback) id
OCCUPANTS = (None, None, SCHEDULER_WORKFLOW_TYPE, "user-workflow", DUMMY_WORKFLOW_TYPE,
             "dummy_completed")
EXAMPLES = int(os.environ.get("SCHEDFENCE_HYPOTHESIS_EXAMPLES", "200"))
START = datetime(2026, 1, 5, 12, 0, 30, tzinfo=timezone.utc)  # every example's first instant
ACTION_PREFIX = "act"


SIM_BINDING = {"kind": "sim", "address": "store", "namespace": NS, "cluster_id": ""}


class Stranger:
    """A destination of another kind and cluster: every call it is asked is recorded (and
    fails), so a test sees that none was made."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def destination_identity(self, with_cluster: bool = False) -> DestinationId:
        return DestinationId("temporal", "10.0.0.9:7233", (NS,), "another-cluster")

    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            self.calls.append(name)
            raise DestinationUnavailable(f"stranger: {name}")
        return call


class RollbackMachine(MachineInvariants, RuleBasedStateMachine):
    """The steps: admin calls, the running schedule's life, forward migrations, worker
    attempts, crashes and faults, and the destination's environment (its invariants and
    read-backs are ``MachineInvariants``, tests/infra/machine_invariants.py)."""

    store: Callable[[], str] = staticmethod(lambda: MEMORY)  # a fresh store per example
    drop: Callable[[str], None] = staticmethod(lambda url: None)  # after each example

    def __init__(self) -> None:
        super().__init__()
        self.raw = InMemorySimState()  # ours, so invariants read runs without consuming faults
        self.now = START  # the compressed clock of both sides: fixed, so a seed replays
        self.sim = SimulatedDestination(self.raw, seed=11, clock=lambda: self.now)
        self.overlap, self.pause_on_failure = "allow_all", False
        self.catchup: int | None = None
        self.limit: int | None = None
        self.ticks: list[datetime] = []  # every instant the running schedule's times advance
        self.hook = ArmedCrash()
        self.url = self.store()
        self.svc = open_service(self.url, self.sim, worker_id="w0", crash_hook=self.hook)
        self.restarts = itertools.count(1)
        self.foreign = itertools.count(1)
        self.foreign_ids: set[str] = set()
        self.pauses = PauseLog()  # the stretches a user paused the running schedule
        self.updates = UpdateLog()  # the running schedule's program updates

    def teardown(self) -> None:
        self.svc.close()
        self.drop(self.url)

    # -- helpers ----------------------------------------------------------------------------
    def _restart(self) -> None:
        """After a crash: a fresh service (and worker) on the same store, as a new process."""
        self.svc = MigrationService(self.svc.app, self.sim, worker_id=f"w{next(self.restarts)}",
                                    crash_hook=self.hook)

    def _call(self, fn, *args, **kwargs):
        """Run one service call: crashes restart, domain errors must have written nothing."""
        before = self.svc.event_count()
        try:
            return fn(*args, **kwargs)
        except SimulatedCrash:
            self._restart()
        except DomainError as exc:
            assert self.svc.event_count() == before, f"{exc.code} wrote events"
            return exc
        finally:
            self.hook.point = None
        return None

    def _fenced(self, sid: str) -> bool:
        try:
            return self.svc.schedule(NS, sid).migration_pending
        except DomainError:
            return False

    def _foreign_start(self, sid: str, wtype: str, input: dict | None = None) -> str:
        rid = f"foreign-{next(self.foreign)}"
        self.foreign_ids.add(rid)
        try:
            self.sim.start_workflow(StartWorkflow(NS, destination_workflow_id(sid), rid, wtype,
                                                  {} if input is None else input))
        except DestinationError:
            pass  # something is running there, or an injected fault hit this start
        return rid

    # -- admin ------------------------------------------------------------------------------
    def _program(self, sid: str) -> dict:
        if sid != RUNNING:
            return {}
        return {"spec": make_spec(intervals=[(60, 0)]),
                "action": make_action(workflow_type="W", task_queue="q",
                                      workflow_id=ACTION_PREFIX),
                "policies": make_policies(overlap=self.overlap,
                                          pause_on_failure=self.pause_on_failure,
                                          **({} if self.catchup is None else
                                             {"catchup_window": self.catchup})),
                "limit": self.limit}

    @initialize(pre=st.lists(st.tuples(st.booleans(), st.sampled_from(["", "n"]),
                                       st.sampled_from(OCCUPANTS)),
                             min_size=len(SIDS), max_size=len(SIDS)),
                overlap=st.sampled_from(OVERLAPS), pause_on_failure=st.booleans(),
                catchup=st.sampled_from([None, None, 120, 600]),
                limit=st.sampled_from([None, None, 2, 6]))
    def schedules(self, pre, overlap, pause_on_failure, catchup=None, limit=None):
        """Every example starts with all schedules live, so steps reach migrations sooner, and
        with the destination id free or already held (F1 foreign run, F4 sentinel). The
        running schedule may have a catch-up window (seconds) and an action limit."""
        self.overlap, self.pause_on_failure = overlap, pause_on_failure
        self.catchup, self.limit = catchup, limit
        for sid, (paused, notes, occupant) in zip(SIDS, pre):
            view = self.svc.create_schedule(NS, sid, paused=paused, notes=notes, now=self.now,
                                            **self._program(sid))
            self._paused(sid, view, paused)
            if occupant == "dummy_completed":
                self.dummy_sentinel(sid, running=False)
            elif occupant is not None:
                self._foreign_start(sid, occupant)

    @rule(sid=st.sampled_from(SIDS), paused=st.booleans(), notes=st.sampled_from(["", "n"]))
    def create(self, sid, paused, notes):
        got = self._call(self.svc.create_schedule, NS, sid, paused=paused, notes=notes,
                         now=self.now, **self._program(sid))
        self._paused(sid, got, paused)

    def _paused(self, sid: str, view, paused: bool) -> None:
        """A user's pause or unpause of the running schedule that took effect, for the
        oracle (tests/infra/machine_oracle.py)."""
        if sid == RUNNING and isinstance(view, ScheduleView):
            self.pauses.set(view.incarnation, paused, self.now)
            self.ticks.append(self.now)  # a pause ticks first

    # -- the running schedule ---------------------------------------------------------------
    @rule(seconds=st.integers(0, 150))
    def scheduler_pass(self, seconds):
        self.now += timedelta(seconds=seconds)
        self.ticks.append(self.now)
        self._call(self.svc.run_scheduler, now=self.now, crash_hook=self.hook)

    @rule(seconds=st.integers(1, 150))
    def scheduler_down(self, seconds):
        """Time passes with no scheduler pass (it is down, or passes rarely): what happens
        meanwhile (a pause and an unpause, a rollback) must not change what is owed."""
        self.now += timedelta(seconds=seconds)

    @rule(seconds=st.integers(1, 300))
    def pause_while_down(self, seconds):
        """A user pauses the running schedule and unpauses it with no pass between (issue 27
        item 9: the paused stretch was caught up at the next pass)."""
        self.mutate(RUNNING, "pause")
        self.scheduler_down(seconds)
        self.mutate(RUNNING, "resume")

    @rule(kind=st.sampled_from(["trigger", "backfill"]))
    def manual(self, kind):
        fenced = self._fenced(RUNNING)
        if kind == "trigger":
            got = self._call(self.svc.trigger_schedule, NS, RUNNING, now=self.now)
        else:
            got = self._call(self.svc.backfill_schedule, NS, RUNNING,
                             self.now - timedelta(minutes=12), self.now - timedelta(minutes=4),
                             now=self.now)
        if fenced:  # I1: a fenced source takes no trigger or backfill
            assert isinstance(got, MigrationPending), got

    @rule(status=st.sampled_from(["completed", "failed", "canceled"]))
    def finish_action(self, status):
        """The oldest running action workflow closes (frees the overlap slot)."""
        for ns, wid in self.sim.workflow_ids():
            if ns == NS and wid.startswith(f"{ACTION_PREFIX}-"):
                try:
                    self.sim.close(NS, wid, status)
                    return
                except (ValueError, DestinationError):
                    continue

    @rule(every=st.sampled_from([45, 60, 90]))
    def update_program(self, every):
        """``schedule update``: the running schedule's spec changes mid-life (every 45, 60 or
        90 s); from the update's instant on its ticks follow the new spec."""
        fenced = self._fenced(RUNNING)
        spec = make_spec(intervals=[(every, 0)])
        got = self._call(self.svc.update_schedule, NS, RUNNING, spec=spec, now=self.now)
        if isinstance(got, ScheduleView):
            self.updates.add(got.incarnation, self.now, spec)
            self.ticks.append(self.now)  # an update ticks first, as a pause does
        if fenced:  # I1: a fenced source takes no update
            assert isinstance(got, MigrationPending), got

    @rule(sid=st.sampled_from(SIDS), change=st.sampled_from(["pause", "resume", "notes",
                                                              "delete"]))
    def mutate(self, sid, change):
        fenced = self._fenced(sid)
        kwargs = {"pause": {"paused": True}, "resume": {"paused": False},
                  "notes": {"notes": "edited"}, "delete": {"delete": True}}[change]
        got = self._call(self.svc.update_schedule, NS, sid, now=self.now, **kwargs)
        if change in ("pause", "resume"):
            self._paused(sid, got, change == "pause")
        if fenced:  # I1: every mutation of a fenced source is refused
            assert isinstance(got, MigrationPending), got

    @rule(sid=st.sampled_from(SIDS), request_id=st.sampled_from(REQUEST_IDS))
    def rollback(self, sid, request_id):
        current = self._current(sid)
        sentinel = bool(current and current["workflow_type"] == DUMMY_WORKFLOW_TYPE
                        and current["status"] == "running")
        got = self._call(self.svc.rollback, NS, sid, request_id=request_id, actor="admin")
        if sentinel:  # I12: a running dummy never lets a new migration in
            assert getattr(got, "outcome", None) != "accepted"
        if got is not None and not isinstance(got, DomainError) and request_id is not None:
            assert got.request_id == request_id and got.request_id_origin == "caller"
        if isinstance(got, SentinelBlocked):
            assert sentinel

    # -- forward migrations (a Temporal Schedule taken back) and the Temporal side's users --
    @rule(sid=st.sampled_from(SIDS), request_id=st.sampled_from(("f1", "f2")))
    def forward(self, sid, request_id):
        self._call(self.svc.forward, NS, sid, request_id)

    @rule(sid=st.sampled_from(SIDS), request_id=st.sampled_from(("f1", "f2")))
    def forward_abort(self, sid, request_id):
        self._call(self.svc.abort_forward, NS, sid, request_id, reason="r", actor="oncall")

    @rule(sid=st.sampled_from(SIDS), change=st.sampled_from(["update", "delete", "recreate"]))
    def temporal_user(self, sid, change):
        """Someone else updates (the token moves) or deletes the Temporal schedule, or
        deletes it and creates their own at the same id (a new chain)."""
        try:
            if change == "update":
                self.sim.user_update(NS, sid, paused=False, notes="theirs")
            else:
                self.sim.delete_schedule(NS, sid)
        except DestinationError:
            return  # no schedule there, or an injected fault
        if change == "recreate":
            self._foreign_start(sid, SCHEDULER_WORKFLOW_TYPE,
                                {"paused": False, "notes": "theirs", "incarnation": 1})

    @rule(sid=st.sampled_from(SIDS))
    def abort(self, sid):
        self._call(self.svc.abort, NS, sid, reason="operator", actor="ops")

    # -- worker -----------------------------------------------------------------------------
    @precondition(lambda self: self.svc.open_migration_ids())
    @rule(data=st.data())
    def attempt(self, data):
        mid = data.draw(st.sampled_from(self.svc.open_migration_ids()))
        self._call(self.svc.worker.attempt, mid)

    @rule()
    def run_until_idle(self):
        # One try each (retry_for=0): a migration that backs off (another worker's claim
        # inside its grace, after a crash restarted the process) waits for a later step
        # instead of the drain sleeping in real time.
        self._call(self.svc.run_until_idle, max_attempts=50, retry_for=0)

    @rule()
    def stranger_worker(self):
        """A worker on the same store serving another destination (issue 45, item 1): it
        writes nothing and calls nothing there, whatever is open."""
        stranger = Stranger()
        other = MigrationService(self.svc.app, stranger, worker_id="stranger")
        before = self.svc.event_count()
        report = other.run_until_idle(max_attempts=50, retry_for=0)
        assert self.svc.event_count() == before and stranger.calls == []
        # Each refused is named (one that only waits, another's start in flight, is not)
        assert len(report.refused) <= len(report.blocked)
        assert all(line.startswith(("destination_mismatch: ", "destination_unknown: "))
                   for line in report.refused)

    @invariant()
    def every_migration_is_bound_to_its_destination(self):
        """What each migration was accepted against: this machine's simulator; a planted
        older release's record reads as unknown (never guessed)."""
        for m in self._migrations():
            want = None if m.origin == "legacy" else SIM_BINDING
            assert m.destination == want, (m.migration_id, m.origin, m.destination)
        for fid in self.svc.open_forward_ids():
            assert self.svc.app.repository.get(fid).state.destination == SIM_BINDING

    @rule(point=st.sampled_from(BOUNDARIES))
    def arm_crash(self, point):
        self.hook.point = point

    @rule(op=st.sampled_from(["start", "describe"]),
          fault=st.sampled_from(["unavailable", "fail_before_commit", "lose_response"]))
    def inject(self, op, fault):
        self.sim.inject(op, fault)

    # -- the destination's environment ------------------------------------------------------
    @rule(sid=st.sampled_from(SIDS), op=st.sampled_from(["continue_as_new", "terminate",
                                                          "complete"]))
    def current_run(self, sid, op):
        try:
            getattr(self.sim, op)(NS, destination_workflow_id(sid))
        except (ValueError, DestinationError):
            pass  # no current run, or it is not running

    @rule(sid=st.sampled_from(SIDS), which=st.sampled_from(["current", "head"]))
    def delete_run(self, sid, which):
        current = self._current(sid)
        if current is None:
            return
        run_id = None if which == "current" else current["first_execution_run_id"]
        try:
            self.sim.delete(NS, destination_workflow_id(sid), run_id)
        except DestinationError:
            pass  # the head is already gone

    @rule(sid=st.sampled_from(SIDS), wtype=st.sampled_from([SCHEDULER_WORKFLOW_TYPE,
                                                             "user-workflow"]))
    def foreign_start(self, sid, wtype):
        self._foreign_start(sid, wtype)

    @rule(sid=st.sampled_from(SIDS), running=st.booleans())
    def dummy_sentinel(self, sid, running):
        self._foreign_start(sid, DUMMY_WORKFLOW_TYPE)
        current = self._current(sid)
        if not running and current and current["workflow_type"] == DUMMY_WORKFLOW_TYPE \
                and current["status"] == "running":
            self.sim.complete(NS, destination_workflow_id(sid))

    @rule(roll=st.integers(0, 7))
    def legacy_migration(self, roll):
        """What an older release left behind: a fence with no durable request id (F8).

        Rare, and on one schedule only: nothing but an operator's adoption unblocks it."""
        sid = SIDS[-1]
        if roll:
            return
        try:
            view = self.svc.schedule(NS, sid)
        except DomainError:
            return
        source = self.svc.app.repository.get(schedule_aggregate_id(NS, sid, view.incarnation))
        if source.state.closed or source.state.migration_pending:
            return
        # The v1 record an older release stored, upcast on every read.
        plant_legacy_v1(self.svc, NS, sid, migration_id=UUID(int=len(self._migrations()) + 1))

# PostgreSQL runs every example on a fresh schema (dropped after it) and each step is a few
# round trips to the server, several times slower than SQLite in memory: it runs a quarter of
# the examples (same step count), so the suite stays a few minutes on two cores.
# SCHEDFENCE_HYPOTHESIS_EXAMPLES raises both.
PG_EXAMPLES = max(1, EXAMPLES // 4)


def test_rollback_machine(stores) -> None:
    """The machine on SQLite (in memory) and on PostgreSQL (a fresh schema per example)."""
    machine: type[RollbackMachine]
    if stores.kind == "postgres":
        class OnPostgres(RollbackMachine):
            store = staticmethod(stores.new)
            drop = staticmethod(pgtools.drop_schema)
        machine, examples = OnPostgres, PG_EXAMPLES
    else:
        machine, examples = RollbackMachine, EXAMPLES
    run_state_machine_as_test(machine, settings=settings(
        max_examples=examples, stateful_step_count=50, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
