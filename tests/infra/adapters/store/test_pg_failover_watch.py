"""The failover watch's decisions (infra/adapters/store/pg_failover.py), server by server: what a
process carries on after, what it refuses, and what lifts a refusal. The servers are scripted
cursors; test_pg_multihost.py runs the same on a real primary and promoted standby."""
from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest

from schedfence.domain.errors import StandbyNotPromoted
from schedfence.domain.failover import STORE_EPOCH_ID
from schedfence.infra.adapters.store.pg_failover import FailoverWatch


class Server:
    """A scripted server: its timeline, whether it waits for a synchronous standby, and the
    store epoch's version; ``None`` timeline: a standby."""

    def __init__(self, timeline: str | None, sync: bool, epoch: int) -> None:
        self.timeline, self.sync, self.epoch = timeline, sync, epoch
        self.rows: list[dict[str, Any]] = []

    def execute(self, query: Any, params: Any = None) -> None:
        text = query.as_string(None) if hasattr(query, "as_string") else str(query)
        if "pg_is_in_recovery" in text:
            self.rows = [{"timeline": self.timeline, "sync": self.sync, "has_log": True}]
        elif "max(originator_version)" in text:
            self.rows = [{"version": self.epoch or None}]

    def fetchone(self) -> dict[str, Any]:
        return self.rows.pop(0)


def append(watch: FailoverWatch, server: Server, *ids: Any) -> None:
    watch.check_append(server, list(ids) or [uuid4()])


def connect(watch: FailoverWatch, server: Server) -> None:
    found = watch.read(server)  # what on_connect reads (there, with a bounded lock wait)
    assert found is not None
    watch._met(found)


def test_the_same_timeline_and_a_synchronous_primary_s_standby_carry_on() -> None:
    watch = FailoverWatch("s", "events")
    connect(watch, Server("00000001", True, 0))
    append(watch, Server("00000001", True, 0))
    connect(watch, Server("00000002", False, 0))  # the synchronous standby, promoted
    append(watch, Server("00000002", False, 0))
    assert watch.fenced is None and watch.primary is not None
    assert watch.primary.timeline == "00000002"


def test_an_asynchronous_primary_s_standby_is_refused_until_the_epoch_rises() -> None:
    watch = FailoverWatch("s", "events")
    connect(watch, Server("00000001", False, 2))
    new = Server("00000002", False, 2)
    connect(watch, new)
    with pytest.raises(StandbyNotPromoted, match=r"timeline 1 -> 2.*schedfence promote"):
        append(watch, new)
    append(watch, new, STORE_EPOCH_ID)  # promote's own append goes through
    new.epoch = 3  # and once it committed, everything does
    append(watch, new)
    assert watch.fenced is None


def test_a_standby_met_on_the_way_changes_nothing() -> None:
    watch = FailoverWatch("s", "events")
    connect(watch, Server("00000001", False, 0))
    watch.on_connect(type("Conn", (), {"cursor": lambda self: Server(None, False, 0)})())
    assert watch.fenced is None and watch.primary is not None
    assert watch.primary.timeline == "00000001"


def test_a_primary_whose_epoch_was_never_read_needs_a_promote_after_the_refusal() -> None:
    watch = FailoverWatch("s", "events")
    connect(watch, Server("00000001", False, 0))
    watch.primary = type(watch.primary)("00000001", False, -1)  # its epoch: not read
    new = Server("00000002", False, 5)
    connect(watch, new)
    with pytest.raises(StandbyNotPromoted):
        append(watch, new)  # epoch 5 was there already: not proof of a promote
    with pytest.raises(StandbyNotPromoted):
        append(watch, new)
    new.epoch = 6
    append(watch, new)
