"""One registry of every stored topic (domain/topics.py): every event and aggregate class in the
code is in it, mapped to the module that defines it, and every entry resolves in a fresh
interpreter that has imported nothing but the registry (issue 28, item 1: a process that never
imported domain/job.py could not read a job's record)."""
from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from eventsourcing.utils import TopicError

import schedfence.domain
import schedfence.infra
import schedfence.projections
from schedfence.domain.failover import StoreEpoch
from schedfence.domain.job import Job, Selection
from schedfence.domain.model import DomainEvent, EvolvingAggregate
from schedfence.domain.topics import STORED_TOPICS, resolve_stored
from schedfence.infra.adapters.store.codec import JSONBytes, PydanticMapper

ROOT = Path(__file__).resolve().parents[2]


def _all_modules() -> list[str]:
    names = []
    for package in (schedfence.domain, schedfence.projections, schedfence.infra):
        for found in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not found.name.endswith(".__main__"):  # running it would run the CLI
                importlib.import_module(found.name)
                names.append(found.name)
    return names


def _subclasses(base: type) -> set[type]:
    found, todo = set(), [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def _stored_classes() -> tuple[dict[str, list[type]], set[type]]:
    """Every event and aggregate class our packages define, by topic; and those without one."""
    modules = _all_modules()
    assert len(modules) > 100  # the walk really imported the packages
    by_topic: dict[str, list[type]] = {}
    untopiced = set()
    for cls in _subclasses(DomainEvent) | _subclasses(EvolvingAggregate):
        if not cls.__module__.startswith("schedfence."):
            continue  # a test's own event class
        topic = getattr(cls, "TOPIC", None)
        if topic is None:
            untopiced.add(cls)
        else:
            by_topic.setdefault(topic, []).append(cls)
    return by_topic, untopiced


def test_every_event_and_aggregate_class_in_the_code_is_registered() -> None:
    by_topic, untopiced = _stored_classes()
    missing = sorted(t for t in by_topic if t not in STORED_TOPICS)
    assert missing == [], f"add these topics to domain/topics.py: {missing}"
    for topic, classes in by_topic.items():
        for cls in classes:
            assert STORED_TOPICS[topic] == cls.__module__, (topic, cls)
            # eventsourcing redefines an aggregate's nested event classes as subclasses of the
            # written ones: the registered class is the one the aggregate holds
            assert issubclass(resolve_stored(topic), cls), (topic, cls)
    stale = sorted(set(STORED_TOPICS) - set(by_topic))
    assert stale == [], f"no class defines these topics: {stale}"
    # A class without a topic cannot be stored: it is only a base of classes that have one.
    topiced = [cls for classes in by_topic.values() for cls in classes]
    for cls in untopiced:
        assert any(issubclass(sub, cls) for sub in topiced), f"{cls} has no TOPIC"
    assert {"schedfence.job.Defined", "schedfence.store_epoch.FailoverRecorded",
            "schedfence.forward.ForwardRequested", "schedfence.Snapshot"} <= set(by_topic)


_RESOLVE_ALL = """
import json, sys
from schedfence.domain.topics import STORED_TOPICS, resolve_stored
seen = []
for topic, module in STORED_TOPICS.items():
    before = module in sys.modules
    cls = resolve_stored(topic)
    seen.append([topic, before, cls.__module__, getattr(cls, "TOPIC", None)])
print(json.dumps(seen))
"""


def test_every_entry_resolves_in_a_fresh_interpreter_importing_its_module_on_use() -> None:
    done = subprocess.run([sys.executable, "-c", _RESOLVE_ALL], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert len(seen) == len(STORED_TOPICS)
    for topic, _, module, class_topic in seen:
        assert (module, class_topic) == (STORED_TOPICS[topic], topic)
    before = {topic: loaded for topic, loaded, _, _ in seen}
    # Importing the registry loads none of the modules it names (the job module last of all)
    assert before["schedfence.Job"] is False


_DECODE = """
import json, sys
from eventsourcing.persistence import StoredEvent
from schedfence.infra.adapters.store.codec import JSONBytes, PydanticMapper
mapper = PydanticMapper(transcoder=JSONBytes())
out = []
for oid, version, topic, state in json.loads(sys.stdin.read()):
    module = {modules!r}[topic]
    before = module in sys.modules
    import uuid
    event = mapper.to_domain_event(StoredEvent(uuid.UUID(oid), version, topic, state.encode()))
    if topic == "schedfence.Snapshot":
        event = event.mutate(None)
    out.append([topic, before, type(event).__module__, type(event).__name__])
print(json.dumps(out))
"""


def test_a_fresh_process_decodes_a_job_event_and_a_snapshot_it_never_imported() -> None:
    mapper = PydanticMapper(transcoder=JSONBytes())
    job = Job.define("J", Selection(namespace="ns", direction="workflow"), "ann")
    epoch = StoreEpoch.start()
    epoch.record_failover("ann", "INC-1", {})
    snapshot = EvolvingAggregate.Snapshot.take(epoch)
    records = [mapper.to_stored_event(e) for e in (*job.collect_events(), snapshot)]
    lines = [[str(r.originator_id), r.originator_version, r.topic, r.state.decode()]
             for r in records]
    modules = {r.topic: STORED_TOPICS[r.topic] for r in records}
    modules["schedfence.Snapshot"] = STORED_TOPICS[StoreEpoch.TOPIC]  # what mutate resolves
    done = subprocess.run([sys.executable, "-c", _DECODE.format(modules=modules)], cwd=ROOT,
                          input=json.dumps(lines), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    decoded = json.loads(done.stdout)
    assert decoded == [
        ["schedfence.job.Defined", False, "schedfence.domain.job", "Defined"],
        ["schedfence.Snapshot", False, "schedfence.domain.failover", "StoreEpoch"]]


@pytest.mark.parametrize("topic", ["schedfence.migration.LegacyRollbackRequested",
                                   "schedfence.future.Thing", "json", "json:JSONDecoder",
                                   "schedfence.domain.job:Job.Defined"])
def test_a_topic_outside_the_registry_is_unknown(topic: str) -> None:
    """The retired class and anything not named here is not a stored type, even when it
    names an importable module or class (the written topics are the explicit ones only)."""
    with pytest.raises(TopicError):
        resolve_stored(topic)


def test_an_unknown_record_is_undecodable_naming_its_topic() -> None:
    from eventsourcing.persistence import StoredEvent

    from schedfence.domain.errors import UndecodableEvent
    mapper = PydanticMapper(transcoder=JSONBytes())
    record = StoredEvent(uuid.uuid4(), 1, "json:JSONDecoder", b"{}")
    with pytest.raises(UndecodableEvent, match="unknown event type 'json:JSONDecoder'"):
        mapper.to_domain_event(record)
