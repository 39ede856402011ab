"""Prometheus metrics: scraped and parsed with prometheus_client's own parser.

After a scripted run in the simulator (rollbacks completed, parked, aborted and still pending,
and a forward migration) the scraped counters and gauges equal what the store holds, counted
here from the service's own views and histories; again after a restart (a new service over the
same SQLite file or PostgreSQL schema), where only the process-local latency starts over."""
from __future__ import annotations

from collections import Counter
from datetime import timedelta
from uuid import UUID

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from schedfence.domain.rollback import decide as decisions
from schedfence.domain.rollback.phases import PHASES
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.adapters.observability.metrics import render_metrics
from schedfence.projections.runner import ProjectionStopped
from tests.helpers import NS, new_world, start_foreign
from tests.infra.forward.test_forward import NS as FNS, SID as FSID, Clock, on_temporal

KINDS = ("started", "completed", "parked", "aborted")


def scrape(service) -> dict[str, dict[tuple, float]]:
    """name -> {sorted label items: value}, parsed from the exposition text."""
    body, content_type = render_metrics(service.views, service.app, service.destination)
    assert content_type.startswith("text/plain; version=0.0.4")
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            samples.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return samples


def counter(samples, kind: str, direction: str) -> float:
    return samples[f"schedfence_migrations_{kind}_total"][(("direction", direction),)]


def by_state(samples, direction: str) -> dict[str, float]:
    """The gauge's non-zero states of ``direction``, summed over namespaces."""
    found: Counter = Counter()
    for key, value in samples["schedfence_migrations"].items():
        if dict(key)["direction"] == direction:
            found[dict(key)["state"]] += value
    return {state: n for state, n in found.items() if n}


def scripted_run(w, clock) -> None:
    svc = w.service
    for sid in ("done", "parked", "aborted", "pending"):
        svc.create_schedule(NS, sid)
    start_foreign(w.dest, "parked")  # a running foreign workflow: the rollback parks
    for sid in ("done", "parked", "aborted"):
        svc.rollback(NS, sid)
    svc.abort(NS, "aborted", reason="changed my mind", actor="alice")
    svc.run_until_idle()
    on_temporal(svc, clock)  # one more rollback, completed
    clock.now += timedelta(minutes=5)
    svc.forward(FNS, FSID, "F1")
    svc.run_until_idle(retry_for=0)
    svc.rollback(NS, "pending")  # accepted, no worker since: still pending


def store_counts(svc) -> dict[tuple[str, str], int]:
    """What the store holds, from the service's views and histories (not from the metrics)."""
    rollback = Counter(row.state for row in svc.migrations_by_state())
    events = Counter(e.type.rsplit(".", 1)[-1] for ns, sid in
                     ((NS, "done"), (NS, "parked"), (NS, "aborted"), (NS, "pending"))
                     for e in svc.history(ns, sid))
    return {("rollback", "started"): sum(rollback.values()),
            ("rollback", "completed"): rollback["completed"],
            ("rollback", "aborted"): rollback["aborted"],
            ("rollback", "parked"): events["MigrationParked"],
            ("forward", "started"): 1,  # F1, the one forward request
            ("forward", "completed"): int(svc.forward_state(FNS, FSID, "F1").phase ==
                                          "completed"),
            ("forward", "parked"): 0, ("forward", "aborted"): 0}


def assert_matches_store(samples, svc) -> None:
    expected = store_counts(svc)
    assert expected[("rollback", "started")] == 5 and expected[("rollback", "parked")] == 1
    assert expected[("forward", "completed")] == 1
    for (direction, kind), n in expected.items():
        assert counter(samples, kind, direction) == n, (direction, kind)
    stats = svc.stats()["by_state"]
    assert by_state(samples, "rollback") == {k: v for k, v in stats.items() if v}
    assert by_state(samples, "forward") == {"completed": 1}
    attempts = sum(row.attempts for row in svc.migrations_by_state())
    assert samples["schedfence_migration_attempts_total"][(("direction", "rollback"),)] == \
        attempts > 0
    due = Counter(decisions.due(svc.app.repository.get(UUID(row.migration_id)).state)
                  for row in svc.migrations_by_state())  # folded from the events here
    assert due["now"] == 2  # the pending one, and the parked one waiting for the foreign run
    for klass in ("now", "after_failover", "operator"):
        assert samples["schedfence_due_migrations"][(("due", klass),)] == due[klass], klass
    assert samples["schedfence_projection_position"][()] == svc.views.projector.position
    assert samples["schedfence_projection_stopped"][()] == 0


def test_scraped_counters_equal_the_stores_counts_also_after_a_restart(
        file_store_url: str) -> None:
    clock = Clock()
    w = new_world(file_store_url, SimulatedDestination(clock=clock))
    try:
        scripted_run(w, clock)
        first = scrape(w.service)
        assert_matches_store(first, w.service)
        calls = first["schedfence_destination_call_duration_seconds_count"]
        assert calls[(("call", "start_workflow"), ("outcome", "ok"))] == 2  # done, and s
        assert calls[(("call", "start_workflow"), ("outcome", "already_started"))] == 1
        assert calls[(("call", "describe_schedule"), ("outcome", "ok"))] >= 1
    finally:
        w.service.close()
    again = new_world(file_store_url, SimulatedDestination(clock=clock))
    try:
        after = scrape(again.service)
        assert_matches_store(after, again.service)
        kept = [k for k in first if "destination_call" not in k and "_lag_" not in k]
        assert {k: after[k] for k in kept} == {k: first[k] for k in kept}
        assert "schedfence_destination_call_duration_seconds_count" not in after  # per process
    finally:
        again.service.close()


def test_names_follow_prometheus_conventions(world) -> None:
    world.service.create_schedule(NS, "s")
    world.service.rollback(NS, "s")
    world.service.run_until_idle()
    body, _ = render_metrics(world.service.views, world.service.app, world.service.destination)
    families = list(text_string_to_metric_families(body.decode()))
    assert families and all(f.name.startswith("schedfence_") for f in families)
    for f in families:
        if f.type == "counter":
            assert all(s.name.endswith("_total") for s in f.samples), f.name
        if f.type == "histogram":
            assert f.name.endswith("_seconds")
    states = {dict(k)["state"] for k in scrape(world.service)["schedfence_migrations"]}
    assert states == set(PHASES)  # every state of a namespace, zeros included


def test_the_lag_is_what_the_projection_had_not_applied_when_scraped(file_store_url) -> None:
    a, b = new_world(file_store_url), new_world(file_store_url)
    try:
        a.service.create_schedule(NS, "s")
        scrape(a.service)  # catches up
        assert scrape(a.service)["schedfence_projection_lag_events"][()] == 0
        b.service.create_schedule(NS, "t")  # written by another service: not applied yet
        written = b.service.event_count() - a.service.views.projector.position
        first = scrape(a.service)
        assert first["schedfence_projection_lag_events"][()] == written > 0
        assert 0 <= first["schedfence_projection_lag_seconds"][()] < 60
        second = scrape(a.service)  # the first scrape caught up
        assert second["schedfence_projection_lag_events"][()] == 0
        assert second["schedfence_projection_lag_seconds"][()] == 0
    finally:
        a.service.close()
        b.service.close()


def test_each_service_has_its_own_registry(world) -> None:
    other = new_world()
    try:
        world.service.create_schedule(NS, "s")
        world.service.rollback(NS, "s")
        world.service.run_until_idle()
        mine = scrape(world.service)["schedfence_destination_call_duration_seconds_count"]
        assert sum(mine.values()) >= 1
        assert "schedfence_destination_call_duration_seconds_count" not in scrape(other.service)
        exposed = prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
        assert "schedfence_" not in exposed  # nothing leaks into the global registry
    finally:
        other.service.close()


def test_a_stopped_projection_still_answers_and_says_so(world, monkeypatch) -> None:
    world.service.create_schedule(NS, "s")
    world.service.catch_up()
    projector = world.service.views.projector

    def stopped() -> int:
        raise ProjectionStopped("cannot apply the event at log position 4", 4)

    monkeypatch.setattr(projector, "catch_up", stopped)
    samples = scrape(world.service)
    assert samples["schedfence_projection_stopped"][()] == 1
    assert samples["schedfence_migrations_started_total"][(("direction", "rollback"),)] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_every_counter_is_exposed_for_both_directions_from_the_start(world, kind) -> None:
    samples = scrape(world.service)
    assert counter(samples, kind, "rollback") == counter(samples, kind, "forward") == 0


def test_batch_job_progress_is_scraped_as_the_job_recorded_it(world) -> None:
    from schedfence.domain.job import job_aggregate_id
    from schedfence.infra.application.jobs import RunOptions, run_job
    svc = world.service
    for sid in ("a", "b", "c"):
        svc.create_schedule(NS, sid)
    svc.create_schedule(NS, "fenced")
    svc.rollback(NS, "fenced", "R-x")  # pending: the job's own request is blocked
    report = run_job(svc, "job-1", NS, "workflow",
                     options=RunOptions(blocked_rounds=0))  # kept blocked: not asked again
    run_job(svc, "job-2", NS, "workflow", schedule_ids=["a"])  # already pending: blocked
    samples = scrape(svc)
    assert not any("job_id" in dict(k) for name, series in samples.items()
                   if name.startswith("schedfence_job") for k in series)  # no job id label
    decided = {dict(k)["decision"]: v for k, v in samples["schedfence_job_schedules"].items()
               if dict(k)["direction"] == "rollback"}
    states = [svc.app.repository.get(job_aggregate_id(j)).state for j in ("job-1", "job-2")]
    assert decided == {k: float(sum(s.counts[k] for s in states)) for k in states[0].counts}
    assert decided["requested"] == 3 and decided["blocked"] == 1 and report is not None
    assert {dict(k)["decision"]: v for k, v in samples["schedfence_job_schedules"].items()
            if dict(k)["direction"] == "forward"} == dict.fromkeys(decided, 0.0)
    assert samples["schedfence_jobs"] == {(("phase", "selecting"),): 0.0,
                                          (("phase", "selected"),): 2.0,
                                          (("phase", "cancelled"),): 0.0}
    assert samples["schedfence_job_pages"] == {(): float(sum(s.pages for s in states))}


def test_the_docs_table_lists_every_metric_with_its_type_and_labels(world) -> None:
    """docs/operators.md's metrics table is what a scrape exposes: each family's name, type
    and labels (``le`` is the histograms' own), and no label names a job, schedule or run."""
    import re
    from pathlib import Path

    from prometheus_client.parser import text_string_to_metric_families
    svc = world.service
    svc.create_schedule(NS, "a")
    svc.rollback(NS, "a", "R-1")
    body, _ = render_metrics(svc.views, svc.app, svc.destination, lambda: 0,  # as served
                             svc.failing_schedules, stuck=lambda: svc.stuck_counts(300.0),
                             stuck_after=300.0)
    exposed: dict[str, tuple[str, set[str]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        labels = {k for s in family.samples for k in s.labels} - {"le"}
        if family.name == "schedfence_destination_call_duration_seconds":
            assert not family.samples  # no worker call in this process: no labels shown
            labels = {"call", "outcome"}
        if family.name == "schedfence_schedules_step_failing_by_error":
            assert not family.samples  # no schedule failing here: no labels shown
            labels = {"namespace", "error"}
        name = family.name + ("_total" if family.type == "counter" else "")
        exposed[name] = (family.type, labels)
    text = (Path(__file__).resolve().parents[4] / "docs" / "operators.md").read_text()
    documented: dict[str, tuple[str, set[str]]] = {}
    for names, kind, labels in re.findall(r"^\| (`schedfence_[^|]+) \| (\w+) \|([^|]*)\|",
                                          text, re.M):
        for name in re.findall(r"`(schedfence_\w+)`", names):
            documented[name] = (kind, set(re.findall(r"`(\w+)`", labels)) - {"le"})
    assert exposed == documented
    assert not {"job_id", "schedule_id", "migration_id", "run_id"} & \
        {label for _, labels in exposed.values() for label in labels}
