"""A command or engine that loses an optimistic-concurrency race loads again and decides
again on what the winner wrote, never reporting the lost race as ``internal`` (issue 45, item
10): another writer's append is injected between a step's load and its save, for the forward
engine (at each of its appends), the forward commands, a recovery, a batch job's page and
cancel, and the schedule commands. Each runs on SQLite and on PostgreSQL."""
from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable

import pytest

from schedfence.domain.errors import RecoveryRefused
from schedfence.domain.forward.aggregate import forward_aggregate_id
from schedfence.domain.source.action import make_action
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application import jobs
from schedfence.infra.application.service import MigrationService, open_service

from tests.helpers import NS, SID, Crash, Hooks, World, new_world, world  # noqa: F401
from tests.infra.application.test_recovery import OP, parked_foreign
from tests.infra.forward.test_forward import NS as FNS, SID as FSID, Clock, on_temporal

APPENDS = ("fence", "TemporalFenced", "create", "delete", "complete")  # the forward's appends


def rival_before_save(svc: MigrationService, rival: Callable[[], Any],
                      when: Callable[[tuple[Any, ...]], bool] = lambda aggregates: True
                      ) -> list[Any]:
    """The first of ``svc``'s appends for which ``when(aggregates)`` holds runs ``rival``
    first (another writer appending after ``svc`` loaded what it saves), then itself. The
    returned list receives each append ``rival`` raced."""
    save, raced = svc.app.save, []

    def racing_save(*aggregates: Any, **kw: Any) -> Any:
        if not raced and when(aggregates):
            raced.append(aggregates)
            rival()
        return save(*aggregates, **kw)

    svc.app.save = racing_save  # an instance attribute: only this service's appends
    return raced


# -- the forward engine: every append of the handoff, lost to another worker -------------------
@pytest.fixture
def two_workers(file_store_url: str):
    """Two services (two workers) on one store, over one simulated Temporal side."""
    clock = Clock()
    dest = SimulatedDestination(clock=clock)
    hooks = Hooks()
    first = open_service(file_store_url, dest, worker_id="w1", crash_hook=hooks, retry_for=0)
    second = open_service(file_store_url, dest, worker_id="w2", retry_for=0)
    yield first, second, hooks, clock
    first.close()
    second.close()


@pytest.mark.parametrize("append", APPENDS)
def test_a_forward_step_lost_to_another_worker_decides_again(two_workers, append):
    """Just before worker 1 saves a step, worker 2 takes the migration as far as it can: worker
    1's append fails, and it loads the migration again and goes on from what worker 2 wrote
    (here: nothing left), where it used to raise ``IntegrityError``."""
    svc, other, hooks, clock = two_workers
    on_temporal(svc, clock)
    clock.now += timedelta(minutes=5)
    svc.forward(FNS, FSID, "F1")
    mid = forward_aggregate_id(FNS, FSID, "F1")
    hooks.once(f"forward.{append}.before_append", lambda: other.forward_worker.attempt(mid))
    svc.forward_worker.attempt(mid)
    assert f"forward.{append}.before_append" in hooks.points  # the race was run
    assert svc.forward_state(FNS, FSID, "F1").phase == "completed"
    source = svc.load.source(FNS, FSID).state
    assert (source.incarnation, source.closed, source.migration_pending) == (2, False, False)
    assert svc.verify() == []


def test_a_forward_abort_that_loses_to_a_worker_decides_again(two_workers):
    """The operator's abort loads the requested migration; before it saves, a worker takes
    the handoff to its end. The abort decides again on the completed migration and is
    refused in one line (nothing of it written), where it used to raise ``IntegrityError``."""
    svc, other, _, clock = two_workers
    on_temporal(svc, clock)
    svc.forward(FNS, FSID, "F1")
    mid = forward_aggregate_id(FNS, FSID, "F1")
    raced = rival_before_save(svc, lambda: other.forward_worker.attempt(mid))
    with pytest.raises(RecoveryRefused, match="is completed"):
        svc.abort_forward(FNS, FSID, "F1", "changed my mind", "ann")
    assert raced and svc.forward_state(FNS, FSID, "F1").phase == "completed"
    assert svc.verify() == []


# -- a recovery, a job, the schedule commands ------------------------------------------------
def test_a_recovery_that_loses_to_another_operator_decides_again(world):
    """Two operators rearm one parked migration at once: the one that loses decides again on
    the rearmed migration and is refused in one line, never an internal error."""
    w = parked_foreign(world)
    raced = rival_before_save(w.service, lambda: w.service.recover("rearm", NS, SID,
                                                                   actor="bob", reason="r"))
    with pytest.raises(RecoveryRefused, match="nothing to re-arm: the migration is pending"):
        w.service.recover("rearm", NS, SID, **OP)  # decided on bob's rearm
    assert raced and w.service.verify() == []


def _job_schedules(w: World, n: int = 4) -> None:
    for i in range(n):
        w.service.create_schedule("batch", f"s{i}")


def test_a_job_page_that_loses_to_a_cancel_decides_again(world):
    """A cancel lands between the job's load and its first page's save: the page is decided
    again on the cancelled job, and the job asks nothing more."""
    _job_schedules(world)
    svc = world.service
    is_page = (lambda aggregates: any(type(a).__name__ == "Job" and a.version > 1
                                      for a in aggregates))
    raced = rival_before_save(svc, lambda: jobs.cancel_job(svc, "j1", "bob", "stop"),
                              when=lambda aggregates: is_page(aggregates))
    doc = jobs.run_job(svc, "j1", "batch", "workflow", match="s*",
                       options=jobs.RunOptions(page_size=2, actor="ann"))
    assert raced and doc["phase"] == "cancelled", doc
    assert doc["requested"] == sum(doc["counts"].values()) - doc["counts"]["skipped"] \
        - doc["counts"]["blocked"]
    assert svc.verify() == []


def test_a_job_cancel_that_loses_to_another_cancel_decides_again(world):
    """Two operators cancel one job at once: the one that loses decides again on the
    cancelled job, which needs nothing more (a cancel is idempotent)."""
    _job_schedules(world)
    svc = world.service
    world.hooks.crash_once("job_page.before_append")  # defined, no page recorded yet
    with pytest.raises(Crash):
        jobs.run_job(svc, "j1", "batch", "workflow", match="s*",
                     options=jobs.RunOptions(page_size=2, actor="ann", wait=False))
    raced = rival_before_save(svc, lambda: jobs.cancel_job(svc, "j1", "bob", "first"))
    doc = jobs.cancel_job(svc, "j1", "ann", "second")
    assert raced and doc["phase"] == "cancelled" and doc["cancel_reason"] == "first", doc


COMMANDS: dict[str, Callable[[MigrationService], Any]] = {
    "pause": lambda s: s.update_schedule(NS, SID, paused=True, actor="ann"),
    "notes": lambda s: s.update_schedule(NS, SID, notes="n2", actor="ann"),
    "trigger": lambda s: s.trigger_schedule(NS, SID, actor="ann"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_schedule_command_that_loses_a_race_decides_again(world, command):
    """Another command appends to the schedule between this one's load and its save: this one
    loads again and is recorded on top of it, both kept."""
    svc = world.service
    svc.create_schedule(NS, SID, spec=make_spec(intervals=[(60, 0)]),
                        action=make_action(workflow_type="W", task_queue="q",
                                           workflow_id="act"))
    before = svc.schedule(NS, SID).conflict_token
    raced = rival_before_save(svc, lambda: svc.update_schedule(NS, SID, notes="rival",
                                                               actor="bob"))
    COMMANDS[command](svc)
    after = svc.schedule(NS, SID)
    assert raced and after.conflict_token >= before + 2  # the rival's and this command's
    assert after.notes == ("n2" if command == "notes" else "rival")
    assert svc.verify() == []
