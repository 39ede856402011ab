"""A batch job: one durable run of many migrations in one direction over a selection.

A job is named by the caller's job id. It records its definition (namespace, direction, the
selection) once, then one event per page of the selection, in a stable order, holding each
schedule's decision (requested, skipped or blocked, with the reason) and the cursor of the next
page, *before* the next page is read. A rerun loads the job and resumes from its cursor; a
schedule already decided is never decided again, and every request carries a request id derived
from (job id, direction, schedule id), so a page re-read after a crash asks the same migrations
again and the service's dedupe answers ``already_pending`` / ``already_completed`` (counted
once, as requested). Cancel stops new requests; migrations already requested finish.

Once the whole selection is decided, the runner asks the job's ``blocked`` schedules again,
in numbered rounds (``BlockedAsked``): each round replaces those schedules' decisions with the
new answer (requested, skipped, or still blocked with the reason of now). A round asks with
the same derived request id: a blocked request wrote nothing, so the id is unused until then,
and a round cut by a crash and asked again dedupes like a page. A schedule decided requested
or skipped is never asked again.

Pure: decisions take the job's state and return ``Facts`` or raise a domain error (nothing is
written); ``evolve_job`` is the one reducer. The runner (infra/application/jobs.py) does the reading, the
requesting and the driving.
"""
from __future__ import annotations

import fnmatch
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, cast, get_args

from schedfence.domain.bounds import check_rate
from schedfence.domain.direction import SIDES, Side
from schedfence.domain.errors import AlreadyExists, DomainError, InvalidArgument, RecoveryRefused
from schedfence.domain.ids import SCHEDFENCE_NAMESPACE
from schedfence.domain.model import EvolvingAggregate, Fact, Facts
from schedfence.domain.rollback.upcasts import no_destination
from schedfence.domain.text import validate_id

Decision = Literal["requested", "skipped", "blocked"]
JOB_PHASES = ("selecting", "selected", "cancelled")  # JobState.phase
# What the service answered to a request it took (MigrationResult.outcome): each counts once.
REQUESTED_OUTCOMES = ("accepted", "already_pending", "already_completed")
# Refusals that may clear by themselves: reported as blocked, and asked again by the job's
# rounds (``decide_blocked_round``) once its selection is decided.
BLOCKED_CODES = ("sentinel_blocked", "phase_blocked", "migration_pending", "unavailable")
MAX_SELECTED_IDS = 10_000  # explicit --schedule-id values one job may name
MAX_PAGE_SIZE = 1000
MAX_BLOCKED_ROUNDS = 20  # rounds a job may ask its blocked schedules again (0: none)
MAX_BLOCKED_WAIT = 300.0  # seconds a job may wait before each such round


def job_aggregate_id(job_id: str) -> uuid.UUID:
    return uuid.uuid5(SCHEDFENCE_NAMESPACE, f"job/{len(job_id)}:{job_id}")


def job_request_id(job_id: str, direction: str, schedule_id: str) -> str:
    """The request id a job sends for one schedule: the same on every rerun of the job, and
    different for another job or the other direction."""
    key = f"job-request/{len(job_id)}:{job_id}/{direction}/{len(schedule_id)}:{schedule_id}"
    return str(uuid.uuid5(SCHEDFENCE_NAMESPACE, key))


def parse_rate(text: str | float | None) -> float | None:
    """``--rate``: ``N/s`` or ``N`` requests per second (None: unlimited)."""
    if text is None:
        return None
    raw = str(text).strip().removesuffix("/s")
    try:
        rate = float(raw)
    except ValueError:
        rate = -1.0
    return check_rate("rate", rate)


@dataclass(frozen=True)
class Selection:
    """Which schedules a job takes: ``schedule_ids`` (sorted, unique; None: every schedule of
    the namespace on the chosen side) narrowed by ``match`` (a glob on the schedule id)."""

    namespace: str
    direction: str
    schedule_ids: list[str] | None = None
    match: str | None = None

    def matches(self, schedule_id: str) -> bool:
        return self.match is None or fnmatch.fnmatchcase(schedule_id, self.match)

    def named_page(self, cursor: str | None, size: int) -> tuple[list[str], str, bool]:
        """A page of the named schedules (the cursor is an index): ids, next, exhausted."""
        ids = self.schedule_ids or []
        start = int(cursor or 0)
        end = start + size
        return [s for s in ids[start:end] if self.matches(s)], str(end), end >= len(ids)

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "direction": self.direction,
                "schedule_ids": self.schedule_ids, "match": self.match}


def make_selection(namespace: object, direction: object, schedule_ids: Any = None,
                   match: object = None) -> Selection:
    """A checked, canonical selection (the same schedules in another order are the same)."""
    ns = validate_id("namespace", namespace)
    if direction not in SIDES:
        raise InvalidArgument(f"direction must be one of {', '.join(SIDES)}")
    ids = None
    if schedule_ids:
        if isinstance(schedule_ids, str) or len(schedule_ids) > MAX_SELECTED_IDS:
            raise InvalidArgument(f"schedule ids must be a list of at most "
                                  f"{MAX_SELECTED_IDS:,} ids")
        ids = sorted({validate_id("schedule id", s) for s in schedule_ids})
    pattern = None if match in (None, "") else validate_id("match pattern", match)
    return Selection(ns, str(direction), ids, pattern)


@dataclass(frozen=True)
class JobState:
    job_id: str
    namespace: str
    direction: str
    schedule_ids: list[str] | None
    match: str | None
    actor: str
    cursor: str | None = None  # where the next page starts (opaque to the domain)
    pages: int = 0
    exhausted: bool = False  # every page of the selection was decided
    cancelled: bool = False
    cancel_reason: str = ""
    # schedule id -> {"decision", "request_id", "outcome", "reason", "detail"}
    decided: dict[str, dict[str, str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(get_args(Decision), 0))
    blocked_rounds: int = 0  # rounds that asked the blocked schedules again (BlockedAsked)
    # The destination its selection was read against (domain/destination_id.py); None:
    # unknown (defined by an older release).
    destination: dict[str, str] | None = None

    @property
    def selection(self) -> Selection:
        return Selection(self.namespace, self.direction, self.schedule_ids, self.match)

    @property
    def phase(self) -> str:
        """``selecting`` (pages left), ``selected`` (all decided) or ``cancelled``
        (``JOB_PHASES``)."""
        if self.cancelled:
            return "cancelled"
        return "selected" if self.exhausted else "selecting"

    @property
    def accepts_requests(self) -> bool:
        return not (self.cancelled or self.exhausted)

    @property
    def blocked(self) -> list[str]:
        """The schedules decided ``blocked`` now, sorted: what a round asks again."""
        return sorted(sid for sid, d in self.decided.items() if d["decision"] == "blocked")


class Job(EvolvingAggregate):
    TOPIC = "schedfence.Job"
    class_version: ClassVar[int] = 2  # snapshot state v2: destination
    upcast_v1_v2: ClassVar[Callable[[dict[str, Any]], None]] = staticmethod(no_destination)

    class Created(EvolvingAggregate.Created):
        """Abstract: a job begins with ``Defined``."""

        TOPIC: ClassVar[str] = "schedfence.job.Created"

    class Defined(Created):
        """The job's identity and selection, recorded on its first run. v2 adds
        ``destination``: what the job was defined against (domain/destination_id.py); None on
        v1: unknown, never guessed."""

        TOPIC: ClassVar[str] = "schedfence.job.Defined"
        class_version: ClassVar[int] = 2
        job_id: str
        namespace: str
        direction: Side
        schedule_ids: list[str] | None = None
        match: str | None = None
        actor: str = ""
        destination: dict[str, str] | None = None

        upcast_v1_v2: ClassVar[Callable[[dict[str, Any]], None]] = staticmethod(no_destination)

    class PageDecided(EvolvingAggregate.Event):
        """One page of the selection decided: each schedule's decision, and the cursor of
        the next page (``exhausted``: there is none). ``cursor_before`` is the cursor the page
        was read from, so a page is recorded once, in order."""

        TOPIC: ClassVar[str] = "schedfence.job.PageDecided"
        class_version: ClassVar[int] = 1
        page: int
        cursor_before: str | None
        cursor_after: str | None
        exhausted: bool
        decisions: list[dict[str, str]]

    class BlockedAsked(EvolvingAggregate.Event):
        """Round ``round`` (from 1) of asking the job's blocked schedules again, after its
        whole selection was decided: each one's new decision (the shape of
        ``PageDecided.decisions``), which replaces its blocked one. Numbered, so a round is
        recorded once, in order."""

        TOPIC: ClassVar[str] = "schedfence.job.BlockedAsked"
        class_version: ClassVar[int] = 1
        round: int
        decisions: list[dict[str, str]]

    class CancelRequested(EvolvingAggregate.Event):
        TOPIC: ClassVar[str] = "schedfence.job.CancelRequested"
        class_version: ClassVar[int] = 1
        actor: str
        reason: str = ""

    if TYPE_CHECKING:  # folded by evolve; an annotation here would make a dataclass field
        state: JobState

    @staticmethod
    def evolve(state: JobState | None, event: object) -> JobState:
        return evolve_job(state, event)

    @classmethod
    def define(cls, job_id: str, selection: Selection, actor: str,
               destination: dict[str, str] | None = None) -> Job:
        return cls._create(cls.Defined, id=job_aggregate_id(job_id), job_id=job_id,
                           namespace=selection.namespace, direction=selection.direction,
                           schedule_ids=selection.schedule_ids, match=selection.match,
                           actor=actor, destination=destination)


def evolve_job(state: JobState | None, event: object) -> JobState:
    """Pure, total reducer of a job's events. Unknown events raise (never skipped)."""
    if isinstance(event, Job.Defined):
        return JobState(event.job_id, event.namespace, event.direction,
                        event.schedule_ids, event.match, event.actor,
                        destination=event.destination)
    if state is None:
        raise ValueError(f"{type(event).__name__} before the job was defined")
    if isinstance(event, Job.PageDecided):
        decided, counts = dict(state.decided), dict(state.counts)
        for d in event.decisions:
            decided[d["schedule_id"]] = {k: v for k, v in d.items() if k != "schedule_id"}
            counts[d["decision"]] = counts.get(d["decision"], 0) + 1
        return replace(state, cursor=event.cursor_after, pages=state.pages + 1,
                       exhausted=event.exhausted, decided=decided, counts=counts)
    if isinstance(event, Job.BlockedAsked):
        decided, counts = dict(state.decided), dict(state.counts)
        for d in event.decisions:
            sid = d["schedule_id"]
            before = decided.get(sid)
            if before is not None:  # the blocked decision it replaces
                counts[before["decision"]] = counts.get(before["decision"], 0) - 1
            decided[sid] = {k: v for k, v in d.items() if k != "schedule_id"}
            counts[d["decision"]] = counts.get(d["decision"], 0) + 1
        return replace(state, decided=decided, counts=counts, blocked_rounds=event.round)
    if isinstance(event, Job.CancelRequested):
        return replace(state, cancelled=True, cancel_reason=event.reason)
    raise TypeError(f"unknown job event {type(event).__name__}")


# -- decisions ----------------------------------------------------------------------------------
def check_definition(state: JobState, selection: Selection) -> None:
    """A rerun must name the job it resumes: another selection or direction under an existing
    job id is refused (``already_exists``), with nothing written."""
    if state.selection != selection:
        raise AlreadyExists(
            f"job {state.job_id} already exists with another definition "
            f"({describe(state.selection)}); rerun it with the same one, or use a new job id")


def describe(selection: Selection) -> str:
    ids = selection.schedule_ids
    which = f"{len(ids)} named schedule(s)" if ids is not None else "every schedule"
    match = f" matching {selection.match!r}" if selection.match is not None else ""
    return f"--to {selection.direction} in {selection.namespace}: {which}{match}"


def requested(schedule_id: str, request_id: str, outcome: str, predicted: bool = False,
              park: tuple[str, str] | None = None) -> dict[str, str]:
    """A request the service took (or, ``predicted``, would take, and the park (reason,
    detail) the schedule as it stands would lead to)."""
    if outcome not in REQUESTED_OUTCOMES or (park is not None and not predicted):
        raise ValueError(f"not a request outcome: {outcome!r}")
    reason, detail = park or ("", "")
    return {"schedule_id": schedule_id, "decision": "requested", "request_id": request_id,
            "outcome": outcome, "reason": reason, "detail": detail}


def refused(schedule_id: str, request_id: str, error: DomainError) -> dict[str, str]:
    """A request the service refused: ``blocked`` when the refusal may clear by itself (a
    sentinel, the phase gate, another migration pending, the destination unreachable),
    otherwise ``skipped``; the reason is the error's code, the detail its message."""
    decision = "blocked" if error.code in BLOCKED_CODES else "skipped"
    return {"schedule_id": schedule_id, "decision": decision, "request_id": request_id,
            "outcome": "", "reason": error.code, "detail": error.message}


def decide_page(state: JobState, cursor_before: str | None, cursor_after: str | None,
                exhausted: bool, decisions: list[dict[str, str]]) -> Facts:
    """Record one page. A page read from a cursor the job has moved past (another runner
    recorded it) records nothing; a schedule decided before keeps its first decision."""
    if state.exhausted or state.cursor != cursor_before:
        return []
    seen: set[str] = set()
    fresh = []
    for d in decisions:
        sid = d["schedule_id"]
        if sid not in state.decided and sid not in seen:
            seen.add(sid)
            fresh.append(d)
    if state.cancelled:
        # Cancelled mid-page: keep what was requested (it counts), move no cursor.
        return [Fact(Job.PageDecided, {"page": state.pages + 1, "cursor_before": cursor_before,
                                       "cursor_after": cursor_before, "exhausted": False,
                                       "decisions": fresh})] if fresh else []
    return [Fact(Job.PageDecided, {"page": state.pages + 1, "cursor_before": cursor_before,
                                   "cursor_after": cursor_after, "exhausted": exhausted,
                                   "decisions": fresh})]


def decide_blocked_round(state: JobState, round: int,
                         decisions: list[dict[str, str]]) -> Facts:
    """Record round ``round`` of asking the blocked schedules again: the new decision of each
    schedule still ``blocked`` (any other is ignored: a schedule decided requested or skipped
    is never decided again; the first of a repeated one counts). Nothing before the selection
    is exhausted, nor for a round that is not the next one (another runner recorded it), nor
    when no decision is fresh. Cancelled mid-round: only what was requested is kept (it
    counts), as ``decide_page`` keeps a cut page's requests.

    Each decision carries ``job_request_id(job, direction, schedule)``, the id of the first
    ask: a blocked request wrote nothing, so the id is unused until a round's ask takes it,
    and a round cut by a crash and asked again dedupes to ``already_pending`` /
    ``already_completed``."""
    if not state.exhausted or round != state.blocked_rounds + 1:
        return []
    seen: set[str] = set()
    fresh = []
    for d in decisions:
        sid = d["schedule_id"]
        if sid in seen or state.decided.get(sid, {}).get("decision") != "blocked":
            continue
        if d["decision"] not in get_args(Decision):
            raise ValueError(f"not a decision: {d['decision']!r}")
        seen.add(sid)
        if not state.cancelled or d["decision"] == "requested":
            fresh.append(d)
    if not fresh:
        return []
    return [Fact(Job.BlockedAsked, {"round": round, "decisions": fresh})]


def decide_cancel(state: JobState, actor: str, reason: str) -> Facts:
    """Stop new requests, and the rounds that ask blocked schedules again (idempotent);
    refused once every schedule has been decided and none is still blocked."""
    if state.cancelled:
        return []
    if state.exhausted and not state.blocked:
        raise RecoveryRefused(f"job {state.job_id} has already decided every schedule of its "
                              "selection; the migrations it requested finish as they are")
    return [Fact(Job.CancelRequested, {"actor": actor, "reason": reason})]


# -- the report ---------------------------------------------------------------------------------
Outcome = Literal["completed", "parked", "aborted", "in_progress", "blocked", "skipped"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)


def outcome_of(decision: dict[str, str], phase: str | None) -> Outcome:
    """Where one schedule of the job stands: its decision, and for a requested one the
    phase of its migration now (None: not found, which the runner reports in progress)."""
    if decision["decision"] != "requested":
        return cast(Outcome, decision["decision"])  # recorded by the job: "skipped", "blocked"
    if phase in ("completed", "parked", "aborted"):
        return cast(Outcome, phase)
    return "in_progress"


def _count(by: dict[str, int], reason: str | None) -> None:
    by[reason or "unknown"] = by.get(reason or "unknown", 0) + 1


def plan_summary(plan: list[dict[str, str]]) -> dict[str, Any]:
    """A dry run's decisions counted: what ``would`` be requested, skipped, blocked, and the
    reasons of the refusals."""
    would = dict.fromkeys(get_args(Decision), 0)
    reasons: dict[str, dict[str, int]] = {"skipped": {}, "blocked": {}, "would_park": {}}
    for x in plan:
        would[x["decision"]] += 1
        if x["decision"] in reasons:
            _count(reasons[x["decision"]], x["reason"])
        elif x["reason"]:  # requested, predicted to park
            _count(reasons["would_park"], x["reason"])
    return {"would": would, "reasons": reasons}


def report_phase(state: JobState, in_progress: int) -> str:
    """The job's phase as its report reads it: ``done`` once it decided its whole selection
    and none of its migrations is still in progress (each completed, parked or aborted, or
    its schedule skipped or blocked); otherwise its own phase (``JobState.phase``)."""
    if state.phase == "selected" and in_progress == 0:
        return "done"
    return state.phase


def report(state: JobState, migrations: dict[str, tuple[str, str | None]]) -> dict[str, Any]:
    """The job's report: counts by outcome, and reasons for the parked, blocked and skipped.
    ``migrations``: schedule id -> (phase, park reason) of each requested migration."""
    counts = dict.fromkeys(OUTCOMES, 0)
    reasons: dict[str, dict[str, int]] = {"parked": {}, "blocked": {}, "skipped": {}}
    unfinished = []  # every schedule not completed: which, why, and its request id
    for sid, decision in state.decided.items():
        phase, park = migrations.get(sid, (None, None))
        outcome = outcome_of(decision, phase)
        counts[outcome] += 1
        reason = park if outcome == "parked" else decision.get("reason")
        if outcome in reasons:
            _count(reasons[outcome], reason)
        if outcome != "completed":
            unfinished.append({"schedule_id": sid, "outcome": outcome, "reason": reason or "",
                               "request_id": decision["request_id"]})
    return {"job_id": state.job_id, "phase": report_phase(state, counts["in_progress"]),
            **state.selection.to_dict(),
            "pages": state.pages, "blocked_rounds": state.blocked_rounds,
            "decided": len(state.decided),
            "requested": state.counts.get("requested", 0), "counts": counts,
            "reasons": reasons, "cancel_reason": state.cancel_reason, "unfinished": unfinished}
