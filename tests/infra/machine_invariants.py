"""The state machine's invariants (tests/infra/test_state_machine.py), held after every step,
and what they read back: the service's event log and the destination's runs.

The service's own invariant checker finds nothing; the destination agrees with the log (a
source closed by migration names a chain its migration created, no migration ever created two
runs, every start is ours or a foreign one the machine made); an open migration keeps its
source paused; each handed-over (time, origin) starts once; and the one exactly-once oracle
(tests/infra/machine_oracle.py) finds nothing started twice or never owed.
"""
from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from uuid import UUID

from hypothesis.stateful import invariant

from schedfence.domain.source.action import SchedulePolicies, parse_nominal
from schedfence.domain.invariants.exactly_once import Owed
from schedfence.domain.ids import WORKFLOW_ID_PREFIX, destination_workflow_id, schedule_aggregate_id
from schedfence.domain.rollback.handover import Handover, destination_slots
from schedfence.domain.source.runs import ActionStartIssued
from schedfence.domain.source.schedule import Schedule
from schedfence.infra.application.service import MIGRATION_TOPICS, MigrationService
from schedfence.infra.adapters.destination.simulator import InMemorySimState, SimulatedDestination
from tests.infra import machine_oracle as oracle
from tests.infra.machine_oracle import PauseLog, UpdateLog

# The machine's world: one namespace, three schedules, the first of them running a program.
NS = "sm"
SIDS = ("alpha", "beta", "gamma")
RUNNING = SIDS[0]  # the schedule with a program


class MachineInvariants:
    """Mixed into ``RollbackMachine``, which sets these up in its ``__init__``."""

    svc: MigrationService
    sim: SimulatedDestination
    raw: InMemorySimState  # the simulator's state, read without consuming its faults
    now: datetime
    ticks: list[datetime]
    foreign_ids: set[str]
    pauses: PauseLog
    updates: UpdateLog

    # -- reading back the log and the destination ------------------------------------------
    def _runs(self, sid: str) -> list[dict]:
        with self.raw.transaction() as state:
            return state.get("workflows", {}).get(json.dumps([NS, destination_workflow_id(sid)]),
                                                  [])

    def _current(self, sid: str) -> dict | None:
        runs = self._runs(sid)
        return runs[-1] if runs and not runs[-1]["deleted"] else None

    def _migrations(self) -> list:
        ids = [n.originator_id for n in self.svc.app.notifications(MIGRATION_TOPICS)]
        return [self.svc.app.repository.get(i).state for i in ids]

    def _events(self, aggregate_id: UUID) -> list:
        return [self.svc.app.mapper.to_domain_event(e)
                for e in self.svc.app.recorder.select_events(aggregate_id)]

    def _handed_over(self, m) -> tuple[Handover, datetime, list] | None:
        """The handover ``m`` made, the instant its destination was created and that
        destination's (time, origin) starts by now; None before a destination took it."""
        run = next((r for r in self._runs(m.schedule_id) if r["by_start"] and
                    r["create_request_id"] == m.request_id and "created_at" in r), None)
        if m.handover is None or run is None:
            return None
        h, created = Handover.model_validate(m.handover), parse_nominal(run["created_at"])
        return h, created, destination_slots(
            h, created, [parse_nominal(t) for t in run.get("settled", [])], self.now)

    # -- invariants -------------------------------------------------------------------------
    @invariant()
    def checker_finds_nothing(self):
        assert self.svc.verify() == []

    @invariant()
    def destination_agrees_with_the_log(self):
        migrations = self._migrations()
        # Caller ids repeat across schedules, so a migration is known by (workflow id, id).
        ours = {(m.workflow_id, m.request_id): m for m in migrations if m.request_id}
        for m in migrations:
            runs = self._runs(m.schedule_id)
            created = [r for r in runs if r["by_start"] and r["create_request_id"] == m.request_id]
            # One chain per migration, even after a re-armed claim (I4).
            assert len(created) <= 1, (m.migration_id, created)
            if m.request_id is None:
                continue
            if m.phase == "completed" or m.receipt is not None:
                # The receipt names a chain head this migration's own request id created.
                assert [r["run_id"] for r in created] == [m.receipt]
                assert created[0]["first_execution_run_id"] == m.receipt
        for sid in SIDS:
            wid = destination_workflow_id(sid)
            for run in self._runs(sid):
                if run["by_start"]:
                    rid = run["create_request_id"]
                    assert (wid, rid) in ours or rid in self.foreign_ids, rid
        for request, _kind in self.sim.start_log():
            if not request.workflow_id.startswith(WORKFLOW_ID_PREFIX):
                continue  # an action of the running schedule, not a handover's start
            m = ours.get((request.workflow_id, request.request_id))
            if m is not None:  # every start of ours: the durable id and the pre-migration pause
                assert (request.input["paused"], request.input["notes"]) == (m.pre_paused,
                                                                             m.pre_notes)
            else:
                assert request.request_id in self.foreign_ids, request

    @invariant()
    def a_handed_over_time_starts_once(self):
        """I14 at the handover, every step, per origin (the spec's ``auto``, each backfill,
        a trigger), as both schedulers count starts: no (time, origin) the source started is
        started again by the destination that took its handover, the destination starts none
        twice, and once the boundary is settled every spec time between the source's cursor
        and the destination's first instant has started there."""
        for m in self._migrations():
            taken = self._handed_over(m)
            if taken is None:
                continue
            h, created, dest = taken
            assert len(dest) == len(set(dest)), dest
            issued = {(parse_nominal(e.nominal), e.origin)
                      for e in self._events(UUID(m.source_id)) if isinstance(e, ActionStartIssued)}
            assert not issued & set(dest), sorted(issued & set(dest))
            # A schedule deleted on the destination between the receipt and the settle owes
            # (and has started, as plain workflows) the gap's times before its delete.
            deleted = oracle.deleted_before_settle(self._events(UUID(m.migration_id)))
            if m.boundary_settled and not h.paused and h.remaining_actions is None:
                window = timedelta(seconds=(h.policies or SchedulePolicies()).catchup_window)
                gap = Owed(h.spec, parse_nominal(h.cursor), created, catchup_window=window,
                           ticks=(created,)).spec_times()  # the oracle, at the create
                gap = [t for t in gap if deleted is None or t < deleted]
                assert set(gap) <= {t for t, _ in dest}, sorted(set(gap) - {t for t, _ in dest})

    @invariant()
    def the_oracle_finds_nothing_twice_or_unowed(self):
        """The one oracle (domain/invariants/exactly_once.py) over each incarnation of the running
        schedule: the source's starts and its handovers' destinations' together."""
        migrations = self._migrations()
        created = [parse_nominal(r["created_at"]) for r in self._runs(RUNNING)
                   if "created_at" in r]
        for n in itertools.count(1):
            aggregate = schedule_aggregate_id(NS, RUNNING, n)
            events = self._events(aggregate)
            if not events:
                return
            dest = [slot for m in migrations if m.source_id == str(aggregate)
                    for slot in (self._handed_over(m) or (None, None, []))[2]]
            got = oracle.verdict(events, self.pauses, n, dest, self.now,
                                 ticks=tuple(sorted([*self.ticks, *created])),
                                 live=tuple(created), updates=self.updates)
            assert got is None or not (got.twice or got.unexpected), got.describe()

    @invariant()
    def open_migration_keeps_its_source_paused(self):
        for m in self._migrations():
            source = self.svc.app.repository.get(UUID(m.source_id)).state
            if m.is_open:
                assert source.paused and not source.closed
                assert source.fence_migration_id == m.migration_id
                assert source.fence_request_id == m.request_id
            elif m.phase == "completed":
                assert source.closed and source.close_reason == "migrated"
                assert source.completed_migration_id == m.migration_id

    @invariant()
    def closed_by_migration_only_with_a_receipt(self):
        for note in self.svc.app.notifications((Schedule.ClosedByMigration.TOPIC,)):
            event = self.svc.app.mapper.to_domain_event(note)
            m = self.svc.app.repository.get(UUID(event.migration_id)).state
            assert m.phase == "completed" and m.receipt == event.destination_first_run_id
