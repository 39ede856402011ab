"""A batch job's aggregate (domain/job.py) as the runner (infra/application/jobs.py) keeps it:
loaded or defined once, then each page, round and cancel recorded in one append.

A runner holds the job it last saved and records the next page on it, optimistically: the
save's version check refuses a job that changed since (a cancel, another run's page or round),
and the retry decides again on the job brought up to date. Neither path folds the job's whole
history again: a page costs the same on the 1,000th page as on the first.
"""
from __future__ import annotations

import copy
import itertools
from typing import Callable

from schedfence.domain import job as j
from schedfence.domain.errors import AlreadyExists, NotFound
from schedfence.domain.model import Facts
from schedfence.domain.text import validate_id

from schedfence.infra.pacing import retry_call
from schedfence.infra.adapters.store.bulk import load_many
from schedfence.infra.application.ports import Commands
from schedfence.infra.application.guards import accept_binding, check_bound

# An unknown job (defined by an older release) is never resumed: its requests finish as they
# are, a new job takes what is left (docs/operators.md).
JOB_BIND_HINT = ("the migrations it requested finish as they are; run a new job id for the "
                 "rest (docs/operators.md)")


def load_job(service: Commands, job_id: str) -> j.Job:
    found = service.app.find(j.job_aggregate_id(validate_id("job id", job_id)))
    if found is None:
        raise NotFound(f"job {job_id} not found")
    return found


def open_job(service: Commands, job_id: str, sel: j.Selection, actor: str,
             dry_run: bool) -> j.Job | None:
    """The job to resume (its definition must be ``sel``), or a new one (None when dry)."""
    def once() -> j.Job | None:
        job = service.app.find(j.job_aggregate_id(job_id))
        if job is not None:
            j.check_definition(job.state, sel)
            check_bound(f"job {job_id}", job.state.destination, service.destination,
                        JOB_BIND_HINT)  # resumed only on what it was defined against
            return job
        if dry_run:
            return None
        job = j.Job.define(job_id, sel, actor, accept_binding(service.destination,
                                                              sel.namespace))
        service.unit.save("job_define", job)  # a crash point, like every append
        return job

    racing = AlreadyExists(f"job {job_id} is being defined concurrently")
    return retry_call(once, **service.unit.on_conflict(racing))


def record(service: Commands, job: j.Job, point: str,
           decide: Callable[[j.JobState], Facts]) -> j.Job:
    """Record what ``decide`` makes of the job as it stands in one append (``point``).

    Optimistic: the first try decides on ``job`` as the caller holds it (committed), and the
    save's version check refuses it if anything was recorded on the job since; each try after
    a conflict brings the job up to date (``refreshed``) and decides again, so another
    runner's record in between is seen. Each try records on its own copy: a save that failed
    leaves ``job`` as it was, never half-recorded, and the caller keeps only what saved."""
    tries = itertools.count()

    def once() -> j.Job:
        current = refreshed(service, job) if next(tries) else _working_copy(job)
        facts = decide(current.state)
        if facts:
            current.record(facts)
            service.unit.save(point, current)
        return current

    racing = AlreadyExists(f"job {job.state.job_id} kept changing under concurrent runs; "
                           "run it again")
    return retry_call(once, **service.unit.on_conflict(racing))


def _working_copy(job: j.Job) -> j.Job:
    """A copy of ``job`` (committed: nothing pending) to record on. Its state is shared: the
    reducer never changes a state, it makes the next one."""
    if job.pending_events:
        raise ValueError(f"job {job.state.job_id} holds events not saved")
    copied = copy.copy(job)
    copied._pending_events = []  # not the original's list: the library's save empties it
    return copied


def refreshed(service: Commands, job: j.Job) -> j.Job:
    """``job`` as it stands in the store now: a copy with the events recorded on it since
    ``job.version`` folded on (the repository's own fold), not its whole history again."""
    return load_many(service.app, [job.id], {job.id: _working_copy(job)})[job.id]


def record_page(service: Commands, job: j.Job, cursor_before: str | None,
                cursor_after: str | None, exhausted: bool,
                decisions: list[dict[str, str]]) -> j.Job:
    return record(service, job, "job_page", lambda st: j.decide_page(
        st, cursor_before, cursor_after, exhausted, decisions))


def record_round(service: Commands, job: j.Job, round: int,
                 decisions: list[dict[str, str]]) -> tuple[j.Job, list[dict[str, str]]]:
    """Record round ``round``; also what it recorded (nothing: another runner's was first)."""
    recorded: list[dict[str, str]] = []

    def decide(state: j.JobState) -> Facts:
        facts = j.decide_blocked_round(state, round, decisions)
        recorded[:] = facts[0].fields["decisions"] if facts else []
        return facts

    return record(service, job, "job_round", decide), recorded


def changed(service: Commands, job: j.Job) -> bool:
    """Whether anything (a cancel, another run's page or round) was recorded on the job
    since."""
    return bool(service.app.recorder.select_events(job.id, gt=job.version, limit=1))
