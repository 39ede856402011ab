"""The open forward migrations a worker moves (infra/engines/drive.py ``OpenForwards``), read
from the log incrementally: each call reads only the notifications appended since the last
one, a migration that ended since drops out and one requested since appears, and a log that
no longer holds what was read (a failover that lost its tail) is read again whole."""
from __future__ import annotations

import threading
from uuid import UUID

import pytest

from schedfence.domain.forward.aggregate import forward_aggregate_id
from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.spec import make_spec
from schedfence.infra.engines.drive import OpenForwards

from tests.helpers import World, world  # noqa: F401

NS = "ns"


def on_temporal(w: World, sid: str) -> None:
    """A schedule that ran on the source, handed over to the Temporal side."""
    w.service.create_schedule(NS, sid, spec=make_spec(intervals=[(3600, 1800)]),
                              action=make_action(workflow_type="W", task_queue="q",
                                                 workflow_id=f"act-{sid}"),
                              policies=make_policies(overlap="allow_all"))
    w.service.rollback(NS, sid, f"R-{sid}")
    w.service.run_until_idle(retry_for=0)


def mid(sid: str) -> UUID:
    return forward_aggregate_id(NS, sid, f"F-{sid}")


def count_reads(w: World, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many notifications each read by a forward migration's topics returned."""
    reads: list[int] = []
    select = w.service.app.recorder.select_notifications

    def counted(*args, **kwargs):
        found = select(*args, **kwargs)
        if set(kwargs.get("topics") or ()) & set(OpenForwards.TOPICS):
            reads.append(len(found))
        return found

    monkeypatch.setattr(w.service.app.recorder, "select_notifications", counted)
    return reads


def test_each_call_reads_only_what_was_appended_since(world, monkeypatch):
    sids = ["a", "b", "c", "d"]
    for sid in sids:
        on_temporal(world, sid)
    for sid in sids[:3]:
        world.service.forward(NS, sid, f"F-{sid}")
    reads = count_reads(world, monkeypatch)
    assert world.service.open_forward_ids() == [mid("a"), mid("b"), mid("c")]
    assert sum(reads) == 3  # the three requests
    reads.clear()
    assert world.service.open_forward_ids() == [mid("a"), mid("b"), mid("c")]
    assert sum(reads) == 0, "nothing appended since: nothing read"
    world.service.abort_forward(NS, "b", "F-b", reason="not now", actor="oncall")
    world.service.forward(NS, "d", "F-d")
    world.service.create_schedule(NS, "other")  # not a forward topic: never read
    assert world.service.open_forward_ids() == [mid("a"), mid("c"), mid("d")]
    assert sum(reads) == 2, "the abort and the new request, nothing before them"
    # The workers read the same kept set: a drive ends the rest, and they drop out.
    world.service.run_until_idle(retry_for=0)
    assert world.service.open_forward_ids() == []
    assert {world.service.forward_state(NS, s, f"F-{s}").phase for s in "acd"} == {"completed"}
    assert world.service.forward_state(NS, "b", "F-b").phase == "aborted"


def test_a_log_that_lost_what_was_read_is_read_again_whole(world):
    """The event at the position reached is not the one read there (a failover lost the
    tail the reader saw, and ids were drawn again): the open set is rebuilt from the log."""
    for sid in ("a", "b"):
        on_temporal(world, sid)
    for sid in ("a", "b"):
        world.service.forward(NS, sid, f"F-{sid}")
    reader = OpenForwards(world.service.app)
    assert reader() == [mid("a"), mid("b")]
    position, _ = reader._reached
    reader._reached = (position, (mid("gone"), 1))  # what a lost tail held at that id
    reader._open[mid("gone")] = None
    assert reader() == [mid("a"), mid("b")]
    reader._reached = (position + 1000, (mid("gone"), 1))  # past the log's end
    assert reader() == [mid("a"), mid("b")]


def test_threads_calling_at_once_read_each_notification_once(world, monkeypatch):
    """A pool's threads share the service's one reader: whichever reads first reads what is
    new, the others wait for it and read nothing again; the drive's reader is that one."""
    for sid in ("a", "b", "c"):
        on_temporal(world, sid)
    for sid in ("a", "b", "c"):
        world.service.forward(NS, sid, f"F-{sid}")
    reads = count_reads(world, monkeypatch)
    start, found = threading.Barrier(4), []

    def call() -> None:
        start.wait()
        found.append(world.service.open_forward_ids())

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert found == [[mid("a"), mid("b"), mid("c")]] * 4
    assert sum(reads) == 3
    assert world.service._work_parts().forward_ids() == found[0] and sum(reads) == 3
