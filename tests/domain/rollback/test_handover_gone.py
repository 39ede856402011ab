"""A handover whose Temporal Schedule was deleted before the settle (domain/rollback/handover_gone.py):
the settle's owed times, only those before the delete."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from schedfence.domain.source.action import nominal_text
from schedfence.domain.rollback.handover import (GAP_MARGIN, SECOND, boundary_gap, carried_slots,
                                        pin_owed)
from schedfence.domain.rollback.handover_gone import gone_request_id, owed_before_delete
from tests.domain.rollback.handover_givens import handover

T0 = datetime(2026, 12, 5, 10, 0, tzinfo=timezone.utc)
MS = timedelta(milliseconds=1)


def test_unpinned_the_boundary_gap_is_owed_when_the_delete_came_after_it():
    h, created = handover(T0 - 10 * SECOND), T0 + 300 * MS
    gap_end = T0 - GAP_MARGIN
    owed = owed_before_delete(h, gap_end, created, None, T0 + 5 * SECOND)
    assert owed.spec == (T0 - SECOND, T0) == tuple(boundary_gap(h, gap_end, created))
    assert owed.carried == ()


def test_nothing_at_or_after_the_delete_is_owed():
    h = handover(T0 - 10 * SECOND)
    gap_end, created = T0 - GAP_MARGIN, T0 + 300 * MS
    assert owed_before_delete(h, gap_end, created, None, T0).spec == (T0 - SECOND,)
    assert owed_before_delete(h, gap_end, created, None, T0 - SECOND).spec == ()
    assert owed_before_delete(h, gap_end, created, None, T0 + MS).spec == (T0 - SECOND, T0)


def test_a_paused_handover_owes_nothing():
    h = handover(T0 - 10 * SECOND, paused=True)
    assert owed_before_delete(h, T0 - GAP_MARGIN, T0, None, T0 + 9 * SECOND).times == []


def test_pinned_owes_every_time_before_the_pin_the_late_ones_and_the_carried_patch():
    buffered = ({"nominal": nominal_text(T0 - 20 * SECOND), "origin": "auto",
                 "overlap": "skip"},)
    h = handover(T0 - 10 * SECOND, limit=50, buffered=buffered)
    pin, created = T0 + 4 * SECOND, T0 + 5 * SECOND + 200 * MS  # a slow create: late times
    owed = owed_before_delete(h, T0 - 3 * SECOND, created, pin, T0 + 60 * SECOND)
    late = boundary_gap(h, pin - SECOND, created)
    assert late == [pin, pin + SECOND]
    assert list(owed.spec) == pin_owed(h, pin) + late
    assert owed.carried == tuple(t for t, _ in carried_slots(h)) == (T0 - 20 * SECOND,)
    cut = owed_before_delete(h, T0 - 3 * SECOND, created, pin, T0 - 5 * SECOND)
    assert cut.spec == tuple(T0 + i * SECOND for i in range(-9, -5))  # -9 .. -6
    assert cut.carried == (T0 - 20 * SECOND,)


@settings(max_examples=60, deadline=None)
@given(behind=st.integers(0, 30), margin_ms=st.integers(0, 3000),
       delete_ms=st.integers(-15_000, 15_000), limit=st.one_of(st.none(), st.integers(0, 40)),
       pinned=st.booleans())
def test_owed_is_the_settles_own_times_cut_at_the_delete(behind, margin_ms, delete_ms,
                                                         limit, pinned):
    """Whatever the timing: exactly the settle's owed times strictly before the delete."""
    h = handover(T0 - behind * SECOND, limit=limit if pinned else None)
    created = T0 + timedelta(milliseconds=margin_ms)
    pin = T0 + 4 * SECOND if pinned and limit is not None else None
    deleted = created + timedelta(milliseconds=delete_ms)
    got = owed_before_delete(h, T0 - GAP_MARGIN, created, pin, deleted)
    full = boundary_gap(h, T0 - GAP_MARGIN, created) if pin is None else \
        pin_owed(h, pin) + boundary_gap(h, pin - SECOND, created)
    assert list(got.spec) == [t for t in full if t < deleted]
    assert all(t < deleted for t in got.times) and len(set(got.times)) == len(got.times)


def test_the_plain_starts_request_id_is_per_migration_and_time():
    a, b = nominal_text(T0), nominal_text(T0 + SECOND)
    assert gone_request_id("r1", a) == gone_request_id("r1", a)
    assert len({gone_request_id("r1", a), gone_request_id("r1", b),
                gone_request_id("r2", a)}) == 3


def test_a_delete_may_cut_the_creates_patch_whose_gap_is_then_owed_too():
    """Unpinned, ``cut_patch`` (the Temporal settle): the gap backfill's times before the
    delete are owed as well (the server's scheduler runs the patch in its first workflow
    tasks, which a delete cuts; the settle leaves alone each id that has a run)."""
    h, created = handover(T0 - 10 * SECOND), T0 + 300 * MS
    gap_end = T0 - GAP_MARGIN
    whole = owed_before_delete(h, gap_end, created, None, T0 + 5 * SECOND, cut_patch=True)
    assert whole.times == [T0 - 9 * SECOND + i * SECOND for i in range(14)]  # and its own
    cut = owed_before_delete(h, gap_end, created, None, T0 - 4 * SECOND, cut_patch=True)
    assert cut.spec == tuple(T0 - 9 * SECOND + i * SECOND for i in range(5))
    assert owed_before_delete(h, gap_end, created, None, T0 + 5 * SECOND).spec == (
        T0 - SECOND, T0)  # without it (the simulator, whose create is never cut): the boundary
