"""Every event type a store may hold (domain/topics.py) reads as a line: the timeline never
falls back to "no narration" for a type this release writes. The registry is enumerated, and
every event a store of many kinds of history holds (rollbacks completed, parked and handed over
paused, a deletion, a forward migration, a batch job, its cancel and a round asking a blocked
schedule again, a promotion) narrates from its stored fields."""
from __future__ import annotations

from pathlib import Path

from schedfence.domain.model import DomainEvent
from schedfence.domain.topics import STORED_TOPICS, resolve_stored
from schedfence.infra.application.jobs import RunOptions, cancel_job, run_job
from schedfence.projections.narration import actor_name, narrate, narration_of
from tests.helpers import NS
from tests.infra.web import worlds

SNAPSHOT = "schedfence.Snapshot"  # a stored state, not a step: history never shows one


def _event_topics() -> list[str]:
    """The registered topics that name an event type (not an aggregate or a snapshot)."""
    return [topic for topic in STORED_TOPICS if topic != SNAPSHOT
            and issubclass(resolve_stored(topic), DomainEvent)]


def test_every_registered_event_type_has_a_narration() -> None:
    topics = _event_topics()
    # the registry less its aggregates and the snapshot: every event type, none left out
    assert set(STORED_TOPICS) - set(topics) == {
        SNAPSHOT, "schedfence.Schedule", "schedfence.ScheduleKey",
        "schedfence.Migration", "schedfence.ForwardMigration", "schedfence.Job",
        "schedfence.StoreEpoch", "schedfence.OwnershipAudits"}
    missing = [t for t in topics if narration_of(t) is None]
    assert missing == [], f"narrate these in projections/narration.py: {missing}"


def test_types_sharing_a_name_each_read_as_their_own(tmp_path: Path) -> None:
    schedule = narrate("schedfence.schedule.Created",
                       {"incarnation": 2, "paused": True, "namespace": NS, "schedule_id": "a"})
    key = narrate("schedfence.schedule_key.Created", {"namespace": NS, "schedule_id": "a"})
    assert schedule is not None and key is not None
    assert schedule.text == "schedule created, incarnation 2, paused=yes"
    assert key.text == f"key {NS}/a first used"
    assert narrate("Created", {}) is None  # a bare shared name is ambiguous


def test_every_stored_event_of_a_varied_store_narrates_from_its_fields(tmp_path: Path) -> None:
    w = worlds.mixed(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        run_job(w.service, "job-1", NS, "workflow", schedule_ids=[worlds.PLAIN],
                options=RunOptions(actor="carol"))
        w.service.create_schedule(NS, "later-1")
        cancelled: list[dict] = []  # cancelled mid-run, after its first request

        def cancel(_: dict) -> None:
            if not cancelled:
                cancelled.append(cancel_job(w.service, "job-2", "dave", "enough"))

        run_job(w.service, "job-2", NS, "workflow", schedule_ids=["later-1", "later-2"],
                options=RunOptions(actor="carol", wait=False, page_size=1, rate=1000.0),
                on_progress=cancel)
        assert cancelled[0]["phase"] == "cancelled"
        w.service.create_schedule(NS, "later-3")
        w.service.rollback(NS, "later-3", "R-other")  # the job's first ask is blocked
        asked = run_job(w.service, "job-3", NS, "workflow", schedule_ids=["later-3"],
                        options=RunOptions(actor="carol", blocked_wait=0.0))
        assert asked["blocked_rounds"] == 1  # asked again: closed by R-other now, skipped
        w.service.promote("erin", "drill")
        seen, silent = set(), []
        for note in w.service.app.notifications():
            event = w.service.app.mapper.to_domain_event(note)
            topic = type(event).TOPIC
            seen.add(topic)
            if narrate(topic, event.payload()) is None:
                silent.append(topic)
    finally:
        w.service.close()
    assert silent == []
    for topic in ("schedfence.job.Defined", "schedfence.job.PageDecided",
                  "schedfence.job.BlockedAsked", "schedfence.job.CancelRequested", "schedfence.store_epoch.FailoverRecorded",
                  "schedfence.schedule_key.ForwardOpened", "schedfence.forward.ForwardCompleted",
                  "schedfence.schedule.Deleted", "schedfence.migration.MigrationParked"):
        assert topic in seen, topic


def test_the_actor_is_named_by_the_operator_else_the_worker() -> None:
    assert actor_name({"actor": "alice", "worker": "w1"}) == "alice"
    assert actor_name({"actor": "worker", "worker": "w2"}) == "w2"
    assert actor_name({"worker": "w3"}) == "w3"
    assert actor_name({"detail": "x"}) is None
