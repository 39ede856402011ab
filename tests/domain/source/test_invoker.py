"""The invoker decision, for every overlap policy: given buffered starts and running workflows,
then each start is started, kept waiting or dropped, exactly once."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedfence.domain.source.invoker import OVERLAPS, BufferedStart, invoke

T0 = datetime(2026, 12, 3, 7, 0, tzinfo=timezone.utc)


def starts(*policies: str) -> list[BufferedStart]:
    return [BufferedStart(T0 + timedelta(seconds=i), p) for i, p in enumerate(policies)]


@pytest.mark.parametrize("policy", OVERLAPS)
def test_with_nothing_running_the_first_start_runs(policy):
    out = invoke(starts(policy), running=[])
    assert [b.overlap for b in out.start] == [policy] and not (out.keep or out.dropped)


def test_skip_drops_a_start_while_one_runs():
    out = invoke(starts("skip", "skip"), running=["wf-1"])
    assert out.start == () and len(out.dropped) == 2 and out.keep == ()


def test_buffer_one_keeps_one_waiting_and_drops_the_rest():
    out = invoke(starts("buffer_one", "buffer_one", "buffer_one"), running=["wf-1"])
    assert len(out.keep) == 1 and out.keep[0].nominal == T0 and len(out.dropped) == 2


def test_buffer_all_keeps_every_start_in_order():
    buffered = starts("buffer_all", "buffer_all", "buffer_all")
    out = invoke(buffered, running=["wf-1"])
    assert list(out.keep) == buffered and out.start == ()
    # After the running one closed: the first runs, the others keep waiting behind it.
    then = invoke(out.keep, running=[])
    assert then.start == (buffered[0],) and list(then.keep) == buffered[1:]


@pytest.mark.parametrize("policy, field", [("cancel_other", "cancel"),
                                           ("terminate_other", "terminate")])
def test_cancel_and_terminate_other_ask_the_running_to_stop_and_wait(policy, field):
    out = invoke(starts(policy), running=["wf-1", "wf-2"])
    assert getattr(out, field) == ("wf-1", "wf-2") and len(out.keep) == 1 and out.start == ()


def test_allow_all_starts_everything_at_once():
    out = invoke(starts("allow_all", "allow_all"), running=["wf-1"])
    assert len(out.start) == 2 and out.keep == out.dropped == ()


@given(policies=st.lists(st.sampled_from(OVERLAPS), max_size=12),
       running=st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True))
def test_every_start_is_decided_once_and_overlap_rules_hold(policies, running):
    buffered = starts(*policies)
    out = invoke(buffered, running)
    decided = list(out.start) + list(out.keep) + list(out.dropped)
    assert sorted(decided, key=lambda b: b.nominal) == buffered  # a partition
    for part in (out.start, out.keep):
        assert list(part) == sorted(part, key=lambda b: b.nominal)  # order kept
    exclusive = [b for b in out.start if b.overlap != "allow_all"]
    assert len(exclusive) <= (0 if running else 1)  # never two at once unless allow_all
    if all(p == "skip" for p in policies):
        assert out.keep == ()
    if all(p == "buffer_one" for p in policies):
        assert len(out.keep) <= 1
    if out.cancel or out.terminate:
        assert any(b.overlap in ("cancel_other", "terminate_other") for b in out.keep)
        assert set(out.cancel) | set(out.terminate) <= set(running)
    assert all(b.overlap != "skip" for b in out.keep)
