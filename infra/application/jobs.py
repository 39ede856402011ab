"""Batch jobs in the application (domain/job.py; docs/usage.md, "Batch jobs"): ``run_job`` is
what ``schedfence migrate`` runs. Page by page, in the selection's stable order: read the page
from the job's cursor, ask the service for each schedule (rate-limited, with the job's derived
request id), record the page's decisions in one append, then (unless ``wait`` is off) drive
the migrations with the service's workers before the next page, so a schedule stays fenced for
about one page. A crash anywhere is resumed by running the job again.

Stable orders and cursors: ``--to workflow`` takes the namespace's source schedules in the
order their keys were created (cursor: the log position of the last key read); ``--to source``
the Temporal side's, as ``destination.list_schedules`` pages them (cursor: its page token);
named schedule ids sorted (cursor: an index).
A job asks what ``ports.Commands`` names of the application service, never importing it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, cast

from schedfence.domain import job as j
from schedfence.domain.direction import TO_SOURCE, TO_WORKFLOW
from schedfence.domain.errors import (AlreadyExists, DomainError, InvalidArgument,
                                      MigrationPending, NotFound)
from schedfence.domain.forward.aggregate import forward_aggregate_id
from schedfence.domain.ids import migration_aggregate_id
from schedfence.domain.process import retry_outcome
from schedfence.domain.source.key import ScheduleKey
from schedfence.domain.text import validate_actor, validate_id, validate_reason

from schedfence.infra.pacing import TokenBucket, retry_call
from schedfence.infra.adapters.store.bulk import load_many
from schedfence.infra.application.guards import predict_rollback
from schedfence.infra.application.ports import Commands
from schedfence.infra.application.job_progress import JobProgress, Progress, request_ids
from schedfence.infra.engines.drive import Drive

NO_FORWARD = "forward migration is not available in this build"
PAGE_SIZE = 100
CANCEL_CHECK_EVERY = 0.5  # seconds between looks for a cancel while a page is requested


@dataclass(frozen=True)
class RunOptions:
    rate: float | None = None  # requests per second; None: unlimited
    concurrency: int = 1  # worker threads that drive the requested migrations
    dry_run: bool = False
    wait: bool = True  # drive the requested migrations to completion
    page_size: int = PAGE_SIZE
    actor: str = ""

    def check(self) -> RunOptions:
        if self.rate is not None:
            j.parse_rate(self.rate)
        for name, value, top in (("concurrency", self.concurrency, 64),
                                 ("page size", self.page_size, j.MAX_PAGE_SIZE)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise InvalidArgument(f"{name} must be from 1 to {top}")
        if self.actor:
            validate_actor(self.actor)
        return self


# -- the selection, page by page -------------------------------------------------------------
Page = tuple[list[str], str | None, bool]  # schedule ids, the next cursor, exhausted


def read_page(service: Commands, sel: j.Selection, cursor: str | None,
              size: int) -> Page:
    if sel.schedule_ids is not None:
        return sel.named_page(cursor, size)
    if sel.direction == TO_WORKFLOW:
        return _source_page(service, sel, cursor, size)
    return _temporal_page(service, sel, cursor, size)


def _source_page(service: Commands, sel: j.Selection, cursor: str | None,
                 size: int) -> Page:
    """Keys of the namespace in the order they were created, from the log position after
    ``cursor``; the page ends at the ``size``-th matching key."""
    ids: list[str] = []
    position = int(cursor or 0)
    for note in service.app.notifications((ScheduleKey.Created.TOPIC,), start=position + 1):
        position = note.id
        created = cast(ScheduleKey.Created, service.app.mapper.to_domain_event(note))
        if created.namespace == sel.namespace and sel.matches(created.schedule_id):
            ids.append(created.schedule_id)
            if len(ids) == size:
                return ids, str(position), False
    return ids, str(position), True


def _temporal_page(service: Commands, sel: j.Selection, cursor: str | None,
                   size: int) -> Page:
    lister = getattr(service.destination, "list_schedules", None)
    if lister is None:
        raise InvalidArgument(f"{NO_FORWARD}: the destination cannot list its schedules")
    token = bytes.fromhex(cursor) if cursor else None
    names, following = lister(sel.namespace, token, size)
    ids = [s for s in names if sel.matches(s)]
    return ids, following.hex() if following else None, not following


def selection_size(service: Commands, sel: j.Selection) -> int | None:
    """How many schedules the selection holds now, where that is cheap to know (for the
    progress bar's ETA); None for the Temporal side's listing."""
    if sel.schedule_ids is not None:
        return sum(1 for s in sel.schedule_ids if sel.matches(s))
    if sel.direction != TO_WORKFLOW:
        return None
    total = 0
    for note in service.app.notifications((ScheduleKey.Created.TOPIC,)):
        created = cast(ScheduleKey.Created, service.app.mapper.to_domain_event(note))
        total += created.namespace == sel.namespace and sel.matches(created.schedule_id)
    return total


# -- one schedule's request --------------------------------------------------------------------
def request_one(service: Commands, sel: j.Selection, job_id: str, schedule_id: str,
                actor: str, dry_run: bool) -> dict[str, str]:
    """Ask the service for one schedule's migration (or, dry, predict its answer)."""
    rid = j.job_request_id(job_id, sel.direction, schedule_id)
    ns = sel.namespace
    try:
        if sel.direction == TO_WORKFLOW:
            outcome = (predict_rollback(service.load, service.destination, ns, schedule_id, rid)
                       if dry_run else
                       service.rollback(ns, schedule_id, request_id=rid, actor=actor,
                                        job_id=job_id).outcome)
        elif dry_run:
            outcome, park = service.predict_forward(ns, schedule_id, rid)
            return j.requested(schedule_id, rid, outcome, predicted=True, park=park)
        else:
            outcome = service.forward(ns, schedule_id, request_id=rid, actor=actor,
                                      job_id=job_id).outcome
    except AlreadyExists as exc:
        return j.refused(schedule_id, rid, _held_by_another(service, sel, schedule_id, exc))
    except DomainError as exc:
        return j.refused(schedule_id, rid, exc)
    return j.requested(schedule_id, rid, outcome, predicted=dry_run)


def _held_by_another(service: Commands, sel: j.Selection, schedule_id: str,
                     exc: AlreadyExists) -> DomainError:
    """Another migration holds the source's fence: blocked (it clears), not skipped."""
    if sel.direction == TO_WORKFLOW:
        source = service.load.source(sel.namespace, schedule_id).state
        if source.migration_pending:
            return MigrationPending(exc.message)
    return exc


def migration_id(direction: str) -> Callable[[str, str, str], Any]:
    """(namespace, schedule id, request id) -> the migration's aggregate id."""
    return migration_aggregate_id if direction == TO_WORKFLOW else forward_aggregate_id


# -- the job's aggregate -------------------------------------------------------------------------
def load_job(service: Commands, job_id: str) -> j.Job:
    found = service.app.find(j.job_aggregate_id(validate_id("job id", job_id)))
    if found is None:
        raise NotFound(f"job {job_id} not found")
    return found


def _open_job(service: Commands, job_id: str, sel: j.Selection, actor: str,
              dry_run: bool) -> j.Job | None:
    """The job to resume (its definition must be ``sel``), or a new one (None when dry)."""
    def once() -> j.Job | None:
        job = service.app.find(j.job_aggregate_id(job_id))
        if job is not None:
            j.check_definition(job.state, sel)
            return job
        if dry_run:
            return None
        job = j.Job.define(job_id, sel, actor)
        service.unit.save("job_define", job)  # a crash point, like every append
        return job

    racing = AlreadyExists(f"job {job_id} is being defined concurrently")
    return retry_call(once, **service.unit.on_conflict(racing))


def _record_page(service: Commands, job: j.Job, cursor_before: str | None,
                 cursor_after: str | None, exhausted: bool,
                 decisions: list[dict[str, str]]) -> j.Job:
    def once() -> j.Job:
        fresh: j.Job = service.app.repository.get(job.id)
        facts = j.decide_page(fresh.state, cursor_before, cursor_after, exhausted, decisions)
        if facts:
            fresh.record(facts)
            service.unit.save("job_page", fresh)
        return fresh

    racing = AlreadyExists(f"job {job.state.job_id} kept changing under concurrent runs; "
                           "run it again")
    return retry_call(once, **service.unit.on_conflict(racing))


def _changed(service: Commands, job: j.Job) -> bool:
    """Whether anything (a cancel, another run's page) was recorded on the job since."""
    return bool(service.app.recorder.select_events(job.id, gt=job.version, limit=1))


# -- running -----------------------------------------------------------------------------------
def drive(service: Commands, concurrency: int) -> Any:
    """Drive every due migration to completion as ``schedfence worker --until-idle
    --concurrency N`` does: a pool of N threads until a pass finds nothing, then a drain
    that retries what backs off (the service's ``retry_for``), trusting the pool's claims."""
    return service.drive(Drive(threads=concurrency if concurrency > 1 else None)).report


def run_job(service: Commands, job_id: str, namespace: str, direction: str, *,
            schedule_ids: list[str] | None = None, match: str | None = None,
            options: RunOptions = RunOptions(),
            on_progress: Progress | None = None) -> dict[str, Any]:
    """Run (or resume) job ``job_id`` and return its report (``dry_run``: what it would do,
    writing nothing). Another definition under an existing job id is ``already_exists``."""
    validate_id("job id", job_id)
    sel = j.make_selection(namespace, direction, schedule_ids, match)
    options.check()
    if sel.direction == TO_SOURCE and not callable(getattr(service, "forward", None)):
        raise InvalidArgument(NO_FORWARD)
    if not options.dry_run:
        service.require_active()
    job = _open_job(service, job_id, sel, options.actor or service.worker_id, options.dry_run)
    if options.dry_run:
        return _dry_run(service, job_id, sel, job, options.page_size)
    runner = _Runner(service, cast(j.Job, job), options, on_progress)  # not dry: never None
    runner.request_all()
    drained = runner.drive() if options.wait else None
    doc = job_report(service, job_id)
    doc["this_run"] = runner.summary()
    doc["drain"] = drained.to_dict() if drained is not None else None
    return doc


class _Runner:
    def __init__(self, service: Commands, job: j.Job, options: RunOptions,
                 on_progress: Progress | None) -> None:
        self.service, self.job, self.options = service, job, options
        self.sel = job.state.selection
        self.actor = options.actor or service.worker_id
        self.bucket = TokenBucket(options.rate) if options.rate else None
        self.progress = None if on_progress is None else JobProgress(
            on_progress, selection_size(service, self.sel), options.wait, self._find)
        if self.progress is not None:
            self.progress.open.update(request_ids(job.state))  # asked by an earlier run
        self.started, self.asked, self.pages = time.monotonic(), 0, 0

    def _find(self, schedule_id: str, request_id: str) -> Any:
        return self.service.app.find(migration_id(self.sel.direction)(
            self.sel.namespace, schedule_id, request_id))

    def drive(self) -> Any:
        """Drive what was requested (``drive``); the progress counts what ended."""
        report = drive(self.service, self.options.concurrency)
        if self.progress is not None:
            self.progress.driven(self.asked)
        return report

    def request_all(self) -> None:
        while self.job.state.accepts_requests:
            if _changed(self.service, self.job):  # a cancel, or another run's page
                self.job = self.service.app.repository.get(self.job.id)
                continue
            cursor = self.job.state.cursor
            ids, after, exhausted = read_page(self.service, self.sel, cursor,
                                              self.options.page_size)
            decisions = self._request_page(ids)
            self.job = _record_page(self.service, self.job, cursor, after, exhausted,
                                    decisions)
            self.pages += 1
            if self.options.wait and any(x["decision"] == "requested" for x in decisions):
                self.drive()
        if self.job.state.cancelled:
            self._account_cut_page()

    def _account_cut_page(self) -> None:
        """A cancelled job asks nothing more, but a page a crash cut before the cancel may
        have asked some of its schedules: find their migrations by the job's request ids and
        record them as requested, so the report holds every migration the job asked for."""
        st = self.job.state
        found = []
        for sid in read_page(self.service, self.sel, st.cursor, self.options.page_size)[0]:
            rid = j.job_request_id(st.job_id, st.direction, sid)
            mig = None if sid in st.decided else self.service.app.find(
                migration_id(st.direction)(st.namespace, sid, rid))
            if mig is not None:
                found.append(j.requested(sid, rid, retry_outcome(mig.state.phase)))
        if found:
            self.job = _record_page(self.service, self.job, st.cursor, st.cursor, False, found)

    def _request_page(self, ids: list[str]) -> list[dict[str, str]]:
        todo = [sid for sid in ids if sid not in self.job.state.decided]
        if self.bucket is None and self.sel.direction == TO_WORKFLOW and len(todo) > 1:
            return self._rollback_page(todo)
        decisions: list[dict[str, str]] = []
        looked = time.monotonic()
        for sid in todo:
            if time.monotonic() - looked >= CANCEL_CHECK_EVERY:
                looked = time.monotonic()
                if _changed(self.service, self.job):
                    self.job = self.service.app.repository.get(self.job.id)
                    if self.job.state.cancelled:
                        break  # no new request; what was asked is recorded below
            if self.bucket is not None:
                self.bucket.take()
            decisions.append(request_one(self.service, self.sel, self.job.state.job_id, sid,
                                         self.actor, False))
            self.asked += 1
            self._progress(decisions)
        return decisions

    def _rollback_page(self, sids: list[str]) -> list[dict[str, str]]:
        """No rate limit: the page's rollbacks in one append (MigrationService.rollback_many),
        each answer the decision its own ``rollback`` would have given."""
        rids = [j.job_request_id(self.job.state.job_id, TO_WORKFLOW, sid) for sid in sids]
        answers = self.service.rollback_many(self.sel.namespace, sids, rids, self.actor,
                                             self.job.state.job_id)
        decisions = [j.requested(sid, rid, a.outcome) if not isinstance(a, DomainError) else
                     j.refused(sid, rid, _held_by_another(self.service, self.sel, sid, a)
                               if isinstance(a, AlreadyExists) else a)
                     for sid, rid, a in zip(sids, rids, answers)]
        self.asked += len(sids)
        self._progress(decisions)
        return decisions

    def _progress(self, page: list[dict[str, str]]) -> None:
        if self.progress is not None:
            self.progress.decided(self.job.state.counts, page, self.asked)

    def _rate(self) -> float:
        return self.asked / max(time.monotonic() - self.started, 1e-9)

    def summary(self) -> dict[str, Any]:
        return {"asked": self.asked, "pages": self.pages,
                "seconds": round(time.monotonic() - self.started, 3),
                "rate_per_second": round(self._rate(), 2)}


def _dry_run(service: Commands, job_id: str, sel: j.Selection, job: j.Job | None,
             page_size: int) -> dict[str, Any]:
    """What a run would ask from where the job stands, and what would be refused and why."""
    state = job.state if job is not None else None
    cursor = state.cursor if state else None
    done = state is not None and not state.accepts_requests
    decided = state.decided if state else {}
    plan: list[dict[str, str]] = []
    while not done:
        ids, cursor, done = read_page(service, sel, cursor, page_size)
        plan += [request_one(service, sel, job_id, sid, "", True)
                 for sid in ids if sid not in decided]
    return {"job_id": job_id, "dry_run": True, **sel.to_dict(),
            "phase": state.phase if state else "new", **j.plan_summary(plan),
            "decisions": plan}


# -- reading and cancelling --------------------------------------------------------------------
def job_report(service: Commands, job_id: str) -> dict[str, Any]:
    """The job's report: its decisions, and where each requested migration stands now."""
    state = load_job(service, job_id).state
    return dict(j.report(state, _migrations(service, state)), dry_run=False)


def _migrations(service: Commands, state: j.JobState) -> dict[str, tuple[str, str | None]]:
    """Schedule id -> (phase, park reason) of each migration the job requested (read in bulk)."""
    aggregate_id = migration_id(state.direction)
    ids = {sid: aggregate_id(state.namespace, sid, d["request_id"])
           for sid, d in state.decided.items() if d["decision"] == "requested"}
    found = load_many(service.app, ids.values())
    return {sid: (found[i].state.phase, found[i].state.park_reason)
            for sid, i in ids.items() if i in found}


def cancel_job(service: Commands, job_id: str, actor: str,
               reason: str = "") -> dict[str, Any]:
    """Stop the job's new requests; the migrations it requested finish."""
    validate_actor(actor)
    if reason:
        validate_reason(reason)
    service.require_active()

    def once() -> None:
        job = load_job(service, job_id)
        facts = j.decide_cancel(job.state, actor, reason)
        if facts:
            job.record(facts)
            service.unit.save("job_cancel", job)

    racing = AlreadyExists(f"job {job_id} kept changing; retry the cancel")
    retry_call(once, **service.unit.on_conflict(racing))
    return job_report(service, job_id)


def list_jobs(service: Commands) -> list[dict[str, Any]]:
    """Every job, in the order they were defined: its selection, phase (``done`` as its report
    says it) and counts."""
    rows = []
    for note in service.app.notifications((j.Job.Defined.TOPIC,)):
        st: j.JobState = service.app.repository.get(note.originator_id).state
        # as its report reads it: ``done`` once decided and none of its migrations in progress
        phase = j.report(st, _migrations(service, st))["phase"] if st.phase == "selected" \
            else st.phase
        rows.append({"job_id": st.job_id, **st.selection.to_dict(), "phase": phase,
                     "pages": st.pages, "decided": len(st.decided), "counts": st.counts})
    return rows
