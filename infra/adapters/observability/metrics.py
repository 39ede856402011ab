"""Prometheus metrics of one store: ``render_metrics(views, app, destination) -> (body,
content type)``, from the service's parts (its operator views, its store and its destination).

The HTTP app serves it at ``GET /metrics``; ``schedfence metrics`` writes the same text for
node_exporter's textfile collector. Each call collects into a registry of its own (nothing
is registered in prometheus_client's global registry, so services and tests never share
state).

Where each number comes from:

- counters and ``schedfence_migrations`` (by state): the operator projection
  (projections/metrics.py), caught up first, so they are counted from the events and are
  exact after a restart, from any process; forward migrations' states are folded from their
  own events (the projection does not fold them);
- ``schedfence_projection_lag_*``: how far the projection was behind when asked;
- ``schedfence_destination_call_duration_seconds``: this process's worker calls only
  (infra/adapters/observability/calls.py), empty in a process that made none.

``schedfence_ownership_drift{kind}``: the last ownership audit of each namespace, read from
the log (projections/ownership.py), summed over namespaces.

Batch job progress (``schedfence_jobs``, ``_job_schedules``, ``_job_pages``) is read from the
jobs' log on each scrape and summed over the jobs: no label names a job (a job id is unbounded,
one series per job ever run); ``schedfence job status ID`` tells one job's progress.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, get_args
from uuid import UUID

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily, Metric)
from prometheus_client.registry import Collector

from schedfence.domain.direction import DIRECTIONS, FORWARD, ROLLBACK, direction_of
from schedfence.domain.forward.aggregate import PHASES as FORWARD_PHASES
from schedfence.domain.job import JOB_PHASES, Decision, Job, JobState
from schedfence.domain.rollback.phases import PHASES as ROLLBACK_PHASES
from schedfence.domain.owners.audit import AuditState
from schedfence.domain.owners.classify import DRIFT
from schedfence.projections.metrics import COUNTERS, MetricsSnapshot
from schedfence.projections.ownership import last_audits
from schedfence.projections.tables import LAG_SUM, START_LAG_BUCKETS

from .calls import latency_of
from .logs import get_logger

if TYPE_CHECKING:  # types only: the application hands its parts in (it is never imported)
    from schedfence.infra.adapters.store.eventstore import FenceApplication
    from schedfence.projections.service_views import OperatorViews

PREFIX = "schedfence_"
STATES: dict[str, tuple[str, ...]] = {ROLLBACK: ROLLBACK_PHASES, FORWARD: FORWARD_PHASES}
DUE_CLASSES = ("now", "after_failover", "operator")  # domain.decisions.due, open ones
LOG = get_logger("metrics")

_COUNTER_HELP = {
    "started": "Migrations started (a migration's first event), by direction.",
    "completed": "Migrations completed (rollback: the source closed; forward: the source "
                 "took ownership), by direction.",
    "parked": "Times a migration was parked for an operator, by direction.",
    "aborted": "Migrations aborted (the source restored), by direction.",
}


def render_metrics(views: OperatorViews, app: FenceApplication, destination: object,
                   schedules_due: Callable[[], int] | None = None,
                   failing_schedules: Callable[[], list[Any]] | None = None, *,
                   stuck: Callable[[], dict[str, int]] | None = None,
                   stuck_after: float | None = None) -> tuple[bytes, str]:
    """The exposition text of a service's metrics (its operator ``views``, its store ``app``
    and its ``destination``, whose calls this process timed; ``schedules_due``: the
    scheduler's due backlog now; ``failing_schedules``: the schedules whose scheduler step
    keeps failing, projections/schedule_oncall.py's items; ``stuck``: open migrations without
    progress for ``stuck_after`` seconds, by direction), and its content type."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceCollector(views, app, destination, schedules_due,
                                       failing_schedules))
    if stuck is not None:
        registry.register(StuckCollector(stuck, stuck_after))
    # The classic text format (0.0.4), which every Prometheus server and node_exporter reads;
    # every name here is plain ASCII, so the newer format would add nothing.
    return generate_latest(registry), CONTENT_TYPE_PLAIN_0_0_4


class ServiceCollector(Collector):
    """Reads the service's numbers afresh on every collect."""

    def __init__(self, views: OperatorViews, app: FenceApplication, destination: object,
                 schedules_due: Callable[[], int] | None = None,
                 failing_schedules: Callable[[], list[Any]] | None = None) -> None:
        self.views, self.app, self.destination = views, app, destination
        self.schedules_due, self.failing_schedules = schedules_due, failing_schedules

    def collect(self) -> Iterator[Metric]:
        snap: MetricsSnapshot = self.views.metrics()
        if snap.stopped is not None:
            LOG.warning("metrics: the projection is stopped (%s); numbers are as of log "
                        "position %d", snap.stopped, snap.projected_through,
                        extra={"code": snap.stopped})
        forward = self._forward_states(snap.forward_ids)
        yield _by_state(snap, forward)
        yield from _counters(snap, forward)
        yield _due(snap)
        yield _start_lag(snap)
        if self.schedules_due is not None:
            yield GaugeMetricFamily(f"{PREFIX}schedules_due", "Schedules due now in the source "
                                    "scheduler's due index: those a pass has not reached yet, "
                                    "among them those with actions running, looked at every "
                                    "second.", value=self.schedules_due())
        if self.failing_schedules is not None:
            yield from _failing(self.failing_schedules())
        yield from _projection(snap)
        yield from _jobs(self._job_states())
        yield _ownership(last_audits(self.app))
        yield from latency_of(self.destination).histogram.collect()

    def _job_states(self) -> list[JobState]:
        app = self.app
        return [app.repository.get(n.originator_id).state
                for n in app.notifications((Job.Defined.TOPIC,))]

    def _forward_states(self, ids: list[str]) -> list[Any]:
        repository = self.app.repository
        return [repository.get(UUID(i)).state for i in ids]


class StuckCollector(Collector):
    """``schedfence_oncall_stuck{kind}``: open migrations (``rollback``, ``forward``) that
    made no progress (no event, or only failed attempts) and batch jobs (``job``) whose run
    stopped, for the on-call threshold, read afresh on every collect (what ``schedfence
    oncall`` lists as ``stuck``)."""

    def __init__(self, stuck: Callable[[], dict[str, int]], after: float | None) -> None:
        self.stuck, self.after = stuck, after

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(f"{PREFIX}oncall_stuck", "Open migrations (kind rollback, "
                                   "forward) without progress (no event, or only failed "
                                   "attempts) and batch jobs (kind job) whose run stopped, "
                                   "for schedfence_stuck_after_seconds: see `schedfence "
                                   "oncall`.", labels=["kind"])
        for kind, n in sorted(self.stuck().items()):
            family.add_metric([kind], n)
        yield family
        if self.after is not None:
            yield GaugeMetricFamily(f"{PREFIX}stuck_after_seconds", "The threshold "
                                    "schedfence_oncall_stuck counts with.", value=self.after)


def _by_state(snap: MetricsSnapshot, forward: list[Any]) -> Metric:
    family = GaugeMetricFamily(f"{PREFIX}migrations", "Migrations by direction, namespace "
                               "and state (every state of a namespace that has migrations).",
                               labels=("direction", "namespace", "state"))
    counts: dict[tuple[str, str, str], int] = {}
    for (namespace, state), n in snap.by_state.items():
        counts[(ROLLBACK, namespace, state)] = n
    for st in forward:
        key = (FORWARD, st.namespace, st.phase)
        counts[key] = counts.get(key, 0) + 1
    seen = sorted({(direction, ns) for direction, ns, _ in counts})
    for direction, namespace in seen:
        for state in STATES[direction]:
            family.add_metric((direction, namespace, state),
                              counts.get((direction, namespace, state), 0))
    return family


def _counters(snap: MetricsSnapshot, forward: list[Any]) -> Iterator[Metric]:
    for counter in COUNTERS:
        family = CounterMetricFamily(f"{PREFIX}migrations_{counter}", _COUNTER_HELP[counter],
                                     labels=("direction",))
        for direction in DIRECTIONS:
            family.add_metric((direction,), snap.totals.get((direction, counter), 0))
        yield family
    attempts = CounterMetricFamily(
        f"{PREFIX}migration_attempts", "Worker attempts recorded on migrations (each "
        "migration's highest attempt number), by direction.", labels=("direction",))
    attempts.add_metric((ROLLBACK,), snap.attempts)
    attempts.add_metric((FORWARD,), sum(st.attempts for st in forward))
    yield attempts


def _due(snap: MetricsSnapshot) -> Metric:
    family = GaugeMetricFamily(
        f"{PREFIX}due_migrations", "Open rollback migrations in the due-work index, by who "
        "may move them on: now (a worker), after_failover, operator.", labels=("due",))
    for due in DUE_CLASSES:
        family.add_metric((due,), snap.due.get(due, 0))
    return family


def _start_lag(snap: MetricsSnapshot) -> Metric:
    """The source scheduler's action starts by lag after their nominal time, from the log."""
    buckets, total = [], 0
    for bound in [f"{b:g}" for b in START_LAG_BUCKETS] + ["+Inf"]:
        total += snap.start_lag.get(bound, 0)
        buckets.append((bound, total))
    return HistogramMetricFamily(
        f"{PREFIX}action_start_lag_seconds", "Seconds from an action's nominal time to its "
        "start being recorded (the source scheduler's ActionStarted events).",
        buckets=buckets, sum_value=snap.start_lag.get(LAG_SUM, 0) / 1000)


def _failing(items: list[Any]) -> Iterator[Metric]:
    """The schedules whose scheduler step keeps failing (infra/engines/step_failures.py):
    how many, and how many by namespace and last error. No label names a schedule (one
    series per schedule that ever failed); ``schedfence oncall`` names each."""
    yield GaugeMetricFamily(f"{PREFIX}schedules_step_failing", "Schedules whose last "
                            "scheduler step failed alone: put off (exponentially, capped) "
                            "until a step succeeds (`schedfence oncall` names them).",
                            value=len(items))
    family = GaugeMetricFamily(f"{PREFIX}schedules_step_failing_by_error", "The same, by "
                               "namespace and last error (its first 200 characters).",
                               labels=("namespace", "error"))
    counts: dict[tuple[str, str], int] = {}
    for i in items:
        key = (i.namespace, i.last_error[:200])
        counts[key] = counts.get(key, 0) + 1
    for key, n in sorted(counts.items()):
        family.add_metric(key, n)
    yield family


def _projection(snap: MetricsSnapshot) -> Iterator[Metric]:
    yield GaugeMetricFamily(f"{PREFIX}projection_lag_events", "Log positions the operator "
                            "projection was behind the event log when scraped (it then "
                            "caught up).", value=snap.lag_events)
    yield GaugeMetricFamily(f"{PREFIX}projection_lag_seconds", "Age of the oldest event the "
                            "projection had not applied when scraped (0: none).",
                            value=snap.lag_seconds)
    yield GaugeMetricFamily(f"{PREFIX}projection_position", "The log position the "
                            "projection (and these numbers) are exact through.",
                            value=snap.projected_through)
    yield GaugeMetricFamily(f"{PREFIX}log_position", "The event log's highest position.",
                            value=snap.log_position)
    yield GaugeMetricFamily(f"{PREFIX}projection_stopped", "1 when the projection stopped at "
                            "an event it cannot apply (the logs and `schedfence projection "
                            "status` name it), else 0.",
                            value=0 if snap.stopped is None else 1)


def _jobs(jobs: list[JobState]) -> Iterator[Metric]:
    """Batch job progress (domain/job.py), summed over every job of the store: jobs by phase,
    schedules decided by direction and decision, pages decided. Every series is exposed
    from the start (zeros included) and none names a job: the labels are bounded sets."""
    phases: dict[str, int] = dict.fromkeys(JOB_PHASES, 0)
    decided = {(d, c): 0 for d in DIRECTIONS for c in get_args(Decision)}
    for job in jobs:
        phases[job.phase] += 1
        for decision in get_args(Decision):
            decided[(direction_of(job.direction), decision)] += job.counts.get(decision, 0)
    by_phase = GaugeMetricFamily(f"{PREFIX}jobs", "Batch jobs by phase: selecting (pages "
                                 "left), selected (whole selection decided), cancelled.",
                                 labels=("phase",))
    for phase, n in phases.items():
        by_phase.add_metric((phase,), n)
    schedules = GaugeMetricFamily(f"{PREFIX}job_schedules", "Schedules the batch jobs "
                                  "decided, by direction and decision (requested, skipped, "
                                  "blocked).", labels=("direction", "decision"))
    for (direction, decision), n in decided.items():
        schedules.add_metric((direction, decision), n)
    yield by_phase
    yield schedules
    yield GaugeMetricFamily(f"{PREFIX}job_pages", "Pages of their selections the batch jobs "
                            "decided.", value=sum(job.pages for job in jobs))


def _ownership(audits: list[AuditState]) -> Metric:
    """Drift found by the last ownership audit of each namespace, summed, by kind (read from
    the log: no Temporal call on a scrape)."""
    family = GaugeMetricFamily(f"{PREFIX}ownership_drift", "Keys with ownership drift in the "
                               "last `schedfence owners` audit of each namespace, by kind "
                               "(changed_at_destination only from a --deep audit).",
                               labels=("kind",))
    for kind in DRIFT:
        family.add_metric((kind,), sum(a.counts.get("kind", {}).get(kind, 0) for a in audits))
    return family
