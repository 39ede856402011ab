"""Replication to a standby (infra/adapters/replication/follower.py): the log is copied in order, byte for byte,
exactly once, resumably; a standby that is not the source's follower, or a source that does
not continue the copy, is refused with nothing written. PostgreSQL → PostgreSQL in another
database is the main case; the SQLite combinations run once each."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from schedfence.infra.adapters.replication.follower import ReplicationRefused, replicate
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.adapters.store.eventstore import open_application, parse_store_url
from tests import pgtools
from tests.replica_helpers import (boundaries, bulk_schedules, databases, events, log,
                                   populate, raw_position, tracked)

ROOT = Path(__file__).resolve().parents[4]


class Crash(Exception):
    """The follower process dying at a named point."""


@pytest.fixture(scope="module")
def dbs() -> Iterator[list[str]]:
    yield from databases("sf_rep_active", "sf_rep_standby")


@pytest.fixture
def source(dbs: list[str]) -> str:
    return pgtools.new_schema_url(dbs[0])


@pytest.fixture
def standby(dbs: list[str]) -> str:
    return pgtools.new_schema_url(dbs[1])


def crash_at(point: str, nth: int):
    seen = {"n": 0}

    def hook(at: str) -> None:
        if at == point:
            seen["n"] += 1
            if seen["n"] == nth:
                raise Crash(f"{point} #{nth}")
    return hook


def assert_exact_copy(source: str, standby: str) -> None:
    src, dst = log(source), log(standby)
    assert [row[1:] for row in dst] == [row[1:] for row in src]  # same events, same order
    # (standby ids may skip numbers: on PostgreSQL a rolled-back batch consumes ids)
    assert [row[0] for row in dst] == sorted({row[0] for row in dst})
    (position,) = tracked(standby).values()
    assert position == src[-1][0]


# -- copying ------------------------------------------------------------------------------------
def test_copy_is_byte_identical_in_order_and_a_rerun_copies_nothing(source: str,
                                                                   standby: str) -> None:
    populate(source, 6)
    positions: list[int] = []
    report = replicate(source, standby, batch_size=7,
                       on_batch=lambda r: positions.append(r.position))
    total = len(log(source))
    assert (report.copied, report.from_position, report.position) == (total, 0, total)
    assert report.caught_up and report.batches == len(positions) > 1
    # Batches end at transaction boundaries (a worker's batch appends many events at once).
    assert positions == sorted(set(positions)) and positions[-1] == total
    assert_exact_copy(source, standby)

    again = replicate(source, standby)
    assert (again.copied, again.from_position, again.position) == (0, total, total)
    populate(source, 2, prefix="later")  # new events on the active: only those are copied
    third = replicate(source, standby)
    assert third.copied == len(log(source)) - total
    assert_exact_copy(source, standby)


def test_every_copy_ends_at_a_source_transaction_boundary(source: str, standby: str) -> None:
    """A rollback appends the source's fence and the migration in one save: a standby must
    never hold one without the other, wherever a batch (or a crash) ends."""
    populate(source, 5)
    bulk_schedules(source, 40, per_save=20)  # 60-event transactions, larger than a batch
    ends = boundaries(source)
    for size in (1, 2, 3, 5, 7):
        standby_url = standby + str(size)
        positions: list[int] = []
        replicate(source, standby_url, batch_size=size,
                  on_batch=lambda r: positions.append(r.position))
        assert set(positions) <= ends and positions == sorted(set(positions)), size
        assert_exact_copy(source, standby_url)
    partial = standby + "p"
    inside = sorted(ends)[3] + 1  # a position inside a rollback's save
    report = replicate(source, partial, stop_at=inside)
    assert report.position == sorted(ends)[3] and not report.caught_up


def test_holes_in_the_source_ids_are_passed_over(source: str, standby: str) -> None:
    populate(source, 2, complete=False)
    target = parse_store_url(source).pg
    with target.connect() as conn:  # what rolled-back inserts leave behind: unused ids
        conn.execute(f'SELECT nextval(pg_get_serial_sequence(\'"{target.schema}".'
                     f'"schedfence_events"\', \'notification_id\')) FROM generate_series(1,5)')
    populate(source, 2, prefix="after")
    ids = [row[0] for row in log(source)]
    assert ids != list(range(1, len(ids) + 1))  # the source does have holes
    replicate(source, standby, batch_size=3)
    assert_exact_copy(source, standby)


def test_a_crash_between_batches_resumes_without_duplicates_or_holes(source: str,
                                                                     standby: str) -> None:
    populate(source, 4)
    with pytest.raises(Crash):
        replicate(source, standby, batch_size=5, hook=crash_at("batch.after_commit", 3))
    (position,) = tracked(standby).values()
    assert position in boundaries(source) and 0 < position < len(log(source))
    assert events(standby) == [row[1:] for row in log(source) if row[0] <= position]
    with pytest.raises(Crash):  # dies again, before its first insert
        replicate(source, standby, batch_size=5, hook=crash_at("batch.before_insert", 1))
    assert list(tracked(standby).values()) == [position]
    already = len(log(standby))
    report = replicate(source, standby, batch_size=5)
    assert report.from_position == position
    assert report.copied == len(log(source)) - already
    assert_exact_copy(source, standby)


def test_a_crash_inside_a_batch_rolls_back_its_events_and_position_together(
        source: str, standby: str) -> None:
    populate(source, 3)
    positions: list[int] = []
    with pytest.raises(Crash):
        replicate(source, standby, batch_size=4, hook=crash_at("batch.before_commit", 2),
                  on_batch=lambda r: positions.append(r.position))
    assert list(tracked(standby).values()) == positions == [positions[0]]
    assert events(standby) == [row[1:] for row in log(source) if row[0] <= positions[0]]
    replicate(source, standby, batch_size=4)
    assert_exact_copy(source, standby)


def test_a_killed_follower_process_resumes_exactly_once(source: str, standby: str) -> None:
    bulk_schedules(source, 4000, per_save=100)  # 12,000 events in 40 transactions
    proc = subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", "replicate", "--from", source,
                             "--to", standby, "--batch-size", "40"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not raw_position(standby) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    position = list(tracked(standby).values())[0]
    assert 0 < position < 12_000, "killed mid-copy"
    assert len(log(standby)) == position  # every committed batch came with its position
    report = replicate(source, standby)
    assert report.from_position == position
    assert_exact_copy(source, standby)


def test_two_followers_of_one_source_still_copy_exactly_once(source: str,
                                                             standby: str) -> None:
    bulk_schedules(source, 400)
    tracked(standby)  # the standby's tables exist (concurrent *first* opens race on DDL)
    outcomes: list[object] = []

    def run() -> None:
        try:
            outcomes.append(replicate(source, standby, batch_size=25).copied)
        except Exception as exc:  # noqa: BLE001 - checked below
            outcomes.append(exc)
    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Each either finished or was refused after losing the race repeatedly; never worse.
    assert all(isinstance(o, (int, ReplicationRefused)) for o in outcomes), outcomes
    assert sum(o for o in outcomes if isinstance(o, int)) <= 1200
    replicate(source, standby)
    assert_exact_copy(source, standby)


# -- refusals (nothing is written) ---------------------------------------------------------
def test_refuses_a_standby_that_holds_events_of_its_own(source: str, standby: str) -> None:
    populate(source, 1)
    populate(standby, 1, prefix="own")
    before = log(standby)
    with pytest.raises(ReplicationRefused, match="not copied from .*written only by its"):
        replicate(source, standby)
    assert log(standby) == before and tracked(standby) == {}


def test_refuses_once_the_standby_was_written_after_the_copy(source: str,
                                                              standby: str) -> None:
    populate(source, 1)
    replicate(source, standby)
    with open_service(standby, SimulatedDestination()) as promoted:
        promoted.promote("oncall", "failover")
        promoted.create_schedule("ns", "written-on-standby")
    populate(source, 1, prefix="more")
    before = log(standby)
    with pytest.raises(ReplicationRefused, match="is not source event"):
        replicate(source, standby)
    assert log(standby) == before


def test_a_writer_appearing_mid_copy_stops_the_follower(source: str, standby: str) -> None:
    populate(source, 3)

    def intrude(point: str) -> None:
        if point == "batch.after_commit" and not intrude.done:  # type: ignore[attr-defined]  # set below
            intrude.done = True  # type: ignore[attr-defined]  # a flag on the function: it runs once
            with open_service(standby, SimulatedDestination()) as other:
                other.promote("intruder", "a promotion while the follower still copies")
    intrude.done = False  # type: ignore[attr-defined]  # a flag on the function: it runs once
    with pytest.raises(ReplicationRefused, match="written only by its follower"):
        replicate(source, standby, batch_size=5, hook=intrude)
    (position,) = tracked(standby).values()
    copied = [row[1:] for row in log(source) if row[0] <= position]
    assert events(standby)[:len(copied)] == copied
    assert len(events(standby)) == len(copied) + 2  # and the promotion's 2 events only


def test_refuses_a_source_that_does_not_continue_the_copy(dbs: list[str], source: str,
                                                         standby: str) -> None:
    populate(source, 3)
    older = pgtools.new_schema_url(dbs[0])
    replicate(source, older, stop_at=12)  # an older backup of the same log
    replicate(source, standby)
    before = log(standby)
    with pytest.raises(ReplicationRefused, match=r"does not continue .* no event #\d+"):
        replicate(older, standby)
    other = pgtools.new_schema_url(dbs[0])
    populate(other, 1)
    with pytest.raises(ReplicationRefused, match="copies another log"):
        replicate(other, standby)
    assert log(standby) == before


# -- other store kinds, and the standby as a store ----------------------------------------------
@pytest.mark.parametrize("kinds", ["sqlite-pg", "pg-sqlite", "sqlite-sqlite"])
def test_sqlite_works_on_either_side(kinds: str, tmp_path: Path, source: str,
                                     standby: str) -> None:
    src = f"sqlite:///{tmp_path}/active.db" if kinds.startswith("sqlite") else source
    dst = f"sqlite:///{tmp_path}/standby.db" if kinds.endswith("sqlite") else standby
    populate(src, 3)
    replicate(src, dst, batch_size=4)
    assert events(dst) == events(src)
    copied = len(events(src))
    populate(src, 1, prefix="more")
    assert replicate(src, dst).copied == len(events(src)) - copied
    assert events(dst) == events(src)
    with open_service(dst, SimulatedDestination()) as svc:
        assert svc.verify() == []


def test_the_standby_serves_every_view_from_its_own_log(source: str, standby: str) -> None:
    populate(source, 3)
    with open_service(source, SimulatedDestination()) as svc:
        svc.create_schedule("ns", "still-pending")
        svc.rollback("ns", "still-pending")
    replicate(source, standby)
    with open_service(standby, SimulatedDestination()) as svc:
        assert svc.verify() == []
        assert {v.schedule_id for v in svc.list_schedules()} == \
            {"s000", "s001", "s002", "still-pending"}
        assert svc.stats()["by_state"]["completed"] == 3
        assert [row.state for row in svc.migrations_by_state("pending")] == ["pending"]
        assert svc.audit(schedule="ns/s001").entries
        assert svc.open_migration_ids()  # the due-work index, built on the standby
