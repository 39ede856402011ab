"""Batch jobs in the application (domain/job.py; docs/usage.md, "Batch jobs"): ``run_job`` is
what ``schedfence migrate`` runs. Page by page, in the selection's stable order: read the page
from the job's cursor, ask the service for each schedule (rate-limited, with the job's derived
request id), record the page's decisions in one append, then (unless ``wait`` is off) drive
the migrations with the service's workers before the next page, so a schedule stays fenced for
about one page. Once the whole selection is decided, the job asks its ``blocked`` schedules
again, in rounds (``RunOptions.blocked_rounds``, ``blocked_wait`` seconds before each), each
round recorded in one append and driven as a page is. A crash anywhere is resumed by running
the job again, and the rounds it recorded count.

The selection's stable orders and the one request live in infra/application/job_pages.py;
loading and recording the job's aggregate in infra/application/job_record.py.
A job asks what ``ports.Commands`` names of the application service, never importing it.
"""
from __future__ import annotations

import time
from datetime import datetime, timezone
from dataclasses import dataclass
from typing import Any, cast

from schedfence.domain import job as j
from schedfence.domain.direction import TO_SOURCE, TO_WORKFLOW
from schedfence.domain.errors import AlreadyExists, InvalidArgument
from schedfence.domain.process import retry_outcome
from schedfence.domain.text import validate_actor, validate_id, validate_reason

from schedfence.infra.pacing import TokenBucket, retry_call
from schedfence.infra.adapters.store.bulk import load_many
from schedfence.infra.application.actor import actor_or_default
from schedfence.infra.application.guards import require_served
from schedfence.infra.application.ports import Commands
from schedfence.infra.application.job_pages import (NO_FORWARD, migration_id, read_page,
                                                    request_one, rollback_answers,
                                                    selection_size)
from schedfence.infra.application.job_progress import JobProgress, Progress, request_ids
from schedfence.infra.application.job_record import (changed, load_job, open_job,
                                                     record_page, record_round, refreshed)
from schedfence.infra.engines.drive import Drive

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
    blocked_rounds: int = 3  # rounds that ask the blocked schedules again, in all (0: none)
    blocked_wait: float = 2.0  # seconds before each of those rounds

    def check(self) -> RunOptions:
        if self.rate is not None:
            j.parse_rate(self.rate)
        for name, value, low, top in (("concurrency", self.concurrency, 1, 64),
                                      ("page size", self.page_size, 1, j.MAX_PAGE_SIZE),
                                      ("blocked rounds", self.blocked_rounds, 0,
                                       j.MAX_BLOCKED_ROUNDS)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= top:
                raise InvalidArgument(f"{name} must be from {low} to {top}")
        wait = self.blocked_wait
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) \
                or not 0 <= wait <= j.MAX_BLOCKED_WAIT:  # NaN too
            raise InvalidArgument(f"blocked wait must be from 0 to {j.MAX_BLOCKED_WAIT:g} s")
        if self.actor:
            validate_actor(self.actor)
        return self


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
    """Run (or resume) job ``job_id``: its pages, then its rounds asking the blocked schedules
    again; return its report (``dry_run``: what the pages would do, writing nothing). Another
    definition under an existing job id is ``already_exists``."""
    validate_id("job id", job_id)
    sel = j.make_selection(namespace, direction, schedule_ids, match)
    options.check()
    if sel.direction == TO_SOURCE and not callable(getattr(service, "forward", None)):
        raise InvalidArgument(NO_FORWARD)
    require_served(service.destination, sel.namespace)
    if not options.dry_run:
        service.require_active()
    job = open_job(service, job_id, sel, actor_or_default(options.actor), options.dry_run)
    if options.dry_run:
        return _dry_run(service, job_id, sel, job, options.page_size)
    runner = _Runner(service, cast(j.Job, job), options, on_progress)  # not dry: never None
    runner.request_all()
    runner.ask_blocked()
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
        self.actor = actor_or_default(options.actor)
        self.bucket = TokenBucket(options.rate) if options.rate else None
        self.progress = None if on_progress is None else JobProgress(
            on_progress, selection_size(service, self.sel), options.wait, self._find)
        if self.progress is not None:
            self.progress.open.update(request_ids(job.state))  # asked by an earlier run
        self.started, self.asked, self.pages = time.monotonic(), 0, 0
        self.round, self.rounds, self.unblocked = 0, 0, 0  # the round being asked; this run's

    def _find(self, schedule_id: str, request_id: str) -> Any:
        return self.service.app.find(migration_id(self.sel.direction)(
            self.sel.namespace, schedule_id, request_id))

    def _reload(self) -> None:
        self.job = refreshed(self.service, self.job)

    def drive(self) -> Any:
        """Drive what was requested (``drive``); the progress counts what ended."""
        report = drive(self.service, self.options.concurrency)
        if self.progress is not None:
            self.progress.driven(self.asked)
        return report

    def request_all(self) -> None:
        while self.job.state.accepts_requests:
            if changed(self.service, self.job):  # a cancel, or another run's page
                self._reload()
                continue
            cursor = self.job.state.cursor
            ids, after, exhausted = read_page(self.service, self.sel, cursor,
                                              self.options.page_size)
            decisions = self._ask([sid for sid in ids if sid not in self.job.state.decided])
            self.job = record_page(self.service, self.job, cursor, after, exhausted,
                                   decisions)
            self.pages += 1
            if self.options.wait and any(x["decision"] == "requested" for x in decisions):
                self.drive()
        if self.job.state.cancelled and not self.job.state.exhausted:
            self._account_cut_asks()  # a decided job's: after the rounds (ask_blocked)

    def ask_blocked(self) -> None:
        """Once the selection is decided: ask the blocked schedules again, a round at a time
        (``blocked_wait`` seconds before each, looking for a cancel meanwhile), until none is
        blocked, the job is cancelled, or it recorded ``blocked_rounds`` rounds in all (an
        earlier run's rounds count). Each round: one append, then driven as a page is; when
        waiting, a round whose schedules wait on another migration drives it first."""
        while self._round_due():
            if not self._wait(self.options.blocked_wait):
                continue  # a cancel, or another run's round: look again
            st = self.job.state
            if self.options.wait and any(st.decided[sid]["reason"] == "migration_pending"
                                         for sid in st.blocked):
                self.drive()  # the migration holding a fence may end (any due one is driven)
            self.round = self.job.state.blocked_rounds + 1
            decisions = self._ask(self.job.state.blocked)
            self.job, recorded = record_round(self.service, self.job, self.round, decisions)
            self.rounds += bool(recorded)
            self.unblocked += sum(x["decision"] == "requested" for x in recorded)
            if self.options.wait and any(x["decision"] == "requested" for x in decisions):
                self.drive()
        self.round = 0
        if self.progress is not None:
            self.progress.round = 0
        if self.job.state.exhausted and self.job.state.blocked:
            self._account_cut_asks()

    def _round_due(self) -> bool:
        st = self.job.state
        return (st.exhausted and not st.cancelled and bool(st.blocked)
                and st.blocked_rounds < self.options.blocked_rounds)

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds``, looking at the job every CANCEL_CHECK_EVERY: False (the job
        reloaded) as soon as something was recorded on it (a cancel, another run's round)."""
        until = time.monotonic() + seconds
        while True:
            if changed(self.service, self.job):
                self._reload()
                return False
            left = until - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(left, max(CANCEL_CHECK_EVERY, 0.05)))

    def _account_cut_asks(self) -> None:
        """A cancelled job asks nothing more, and a job out of rounds asks its blocked
        schedules no more; but a page or round a crash cut may have asked some of them: find
        their migrations by the job's request ids and record them as requested, so the
        report holds every migration the job asked for."""
        st = self.job.state
        sids = st.blocked if st.exhausted else [
            sid for sid in read_page(self.service, self.sel, st.cursor,
                                     self.options.page_size)[0] if sid not in st.decided]
        found = []
        for sid in sids:
            rid = j.job_request_id(st.job_id, st.direction, sid)
            mig = self._find(sid, rid)
            if mig is not None:
                found.append(j.requested(sid, rid, retry_outcome(mig.state.phase)))
        if found and st.exhausted:
            self.job = record_round(self.service, self.job, st.blocked_rounds + 1, found)[0]
        elif found:
            self.job = record_page(self.service, self.job, st.cursor, st.cursor, False, found)

    def _ask(self, todo: list[str]) -> list[dict[str, str]]:
        """Ask for each of ``todo``: in one append without a rate (``--to workflow``),
        else one at a time at the rate, looking for a cancel every CANCEL_CHECK_EVERY."""
        if self.bucket is None and self.sel.direction == TO_WORKFLOW and len(todo) > 1:
            answers = rollback_answers(self.service, self.sel, self.job.state.job_id, todo,
                                       self.actor)
            self.asked += len(todo)
            self._progress(answers)
            return answers
        decisions: list[dict[str, str]] = []
        looked = time.monotonic()
        for sid in todo:
            if time.monotonic() - looked >= CANCEL_CHECK_EVERY:
                looked = time.monotonic()
                if changed(self.service, self.job):
                    self._reload()
                    if self.job.state.cancelled:
                        break  # no new request; what was asked is recorded below
            if self.bucket is not None:
                self.bucket.take()
            decisions.append(request_one(self.service, self.sel, self.job.state.job_id, sid,
                                         self.actor, False))
            self.asked += 1
            self._progress(decisions)
        return decisions

    def _progress(self, page: list[dict[str, str]]) -> None:
        if self.progress is not None:
            self.progress.decided(self.job.state.counts, page, self.asked, self.round)

    def summary(self) -> dict[str, Any]:
        seconds = time.monotonic() - self.started
        return {"asked": self.asked, "pages": self.pages, "blocked_rounds": self.rounds,
                "unblocked": self.unblocked, "seconds": round(seconds, 3),
                "rate_per_second": round(self.asked / max(seconds, 1e-9), 2)}


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
    """The job's report: its decisions, where each requested migration stands now, who asked,
    and when: ``started_at`` (defined), ``ended_at`` (its last step or its last migration's,
    once done or cancelled with none in progress; else null) and ``duration_s`` (to the end,
    or to now)."""
    job = load_job(service, job_id)
    migrations, last = _migrations(service, job.state)
    doc = dict(j.report(job.state, migrations), dry_run=False, actor=job.state.actor)
    ended = max([job.modified_on, *last]) if doc["phase"] in ("done", "cancelled") and \
        not doc["counts"].get("in_progress") else None
    return dict(doc, started_at=job.created_on.isoformat(),
                ended_at=ended.isoformat() if ended else None,
                duration_s=round(((ended or datetime.now(timezone.utc)) - job.created_on)
                                 .total_seconds(), 3))


def _migrations(service: Commands, state: j.JobState
                ) -> tuple[dict[str, tuple[str, str | None]], list[datetime]]:
    """Schedule id -> (phase, park reason) of each migration the job requested (read in bulk),
    and when each last changed."""
    aggregate_id = migration_id(state.direction)
    ids = {sid: aggregate_id(state.namespace, sid, d["request_id"])
           for sid, d in state.decided.items() if d["decision"] == "requested"}
    found = load_many(service.app, ids.values())
    return ({sid: (found[i].state.phase, found[i].state.park_reason)
             for sid, i in ids.items() if i in found},
            [found[i].modified_on for i in ids.values() if i in found])


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
    says it), rounds asking blocked schedules again, and counts."""
    rows = []
    for note in service.app.notifications((j.Job.Defined.TOPIC,)):
        st: j.JobState = service.app.repository.get(note.originator_id).state
        # as its report reads it: ``done`` once decided and none of its migrations in progress
        phase = j.report(st, _migrations(service, st)[0])["phase"] if st.phase == "selected" \
            else st.phase
        rows.append({"job_id": st.job_id, **st.selection.to_dict(), "phase": phase,
                     "pages": st.pages, "blocked_rounds": st.blocked_rounds,
                     "decided": len(st.decided), "counts": st.counts})
    return rows
