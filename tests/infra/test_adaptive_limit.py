"""``AdaptiveLimit`` (infra/pacing.py): a worker's start calls in flight, lowered when the
destination answers slowly (issue 45, item 7). A model of a server whose answer time grows with
the calls in flight: without the limit, a wave of 50 calls runs past the deadline (each an
unknown outcome, then a claim-grace wait); with it, the waves settle below the point where
answers get slow, and none runs out its deadline after the first slow wave."""
from __future__ import annotations

import threading

from schedfence.infra.pacing import AdaptiveLimit

DEADLINE = 15.0


def answer_time(in_flight: int) -> float:
    """A server that answers in 1 s alone and 0.5 s slower per call beside it."""
    return 1.0 + 0.5 * (in_flight - 1)


def run_waves(limit: AdaptiveLimit, calls: int) -> tuple[int, list[int]]:
    """``calls`` start calls in waves of what the limit lets through; each wave's calls take
    ``answer_time(wave)``; returns (calls past the deadline, the wave sizes)."""
    timed_out, waves, left = 0, [], calls
    while left:
        wave = limit.acquire(min(left, 50))  # a batch is at most 50 (BATCH_SIZE)
        seconds = answer_time(wave)
        for _ in range(wave):
            limit.observe(min(seconds, DEADLINE), failed=seconds > DEADLINE)
        timed_out += wave if seconds > DEADLINE else 0
        limit.release(wave)
        waves.append(wave)
        left -= wave
    return timed_out, waves


def test_a_fixed_wave_of_fifty_runs_past_the_deadline() -> None:
    fixed = AdaptiveLimit(50)  # no deadline known: never adapts (the simulator)
    timed_out, waves = run_waves(fixed, 200)
    assert waves == [50, 50, 50, 50] and timed_out == 200


def test_the_limit_stays_below_the_slow_point_and_nothing_times_out() -> None:
    adaptive = AdaptiveLimit(50, initial=4, slow_after=DEADLINE / 2)
    timed_out, waves = run_waves(adaptive, 500)
    assert timed_out == 0, waves
    # answers past half the deadline (8 in flight: 4.5 s; 14: 7.5 s) bring it down; it
    # settles where a wave is answered within half the deadline, far above one at a time
    assert adaptive.decreases >= 1 and max(waves) <= 2 * 14, waves
    assert sum(waves[-10:]) / 10 >= 6, waves


def test_answers_in_time_raise_it_to_the_maximum() -> None:
    adaptive = AdaptiveLimit(50, initial=4, slow_after=7.5)
    for _ in range(200):
        adaptive.observe(0.1)
    assert adaptive.limit == 50 and adaptive.decreases == 0


def test_one_slow_wave_is_one_decrease() -> None:
    adaptive = AdaptiveLimit(50, initial=40, slow_after=7.5)
    adaptive.observe(1.0)  # ends nothing: still in its slow start
    for _ in range(30):
        adaptive.observe(9.0)
    assert adaptive.limit == 20 and adaptive.decreases == 1  # not halved 30 times
    assert adaptive.slow == 30


def test_threads_sharing_it_have_at_most_limit_in_flight() -> None:
    adaptive = AdaptiveLimit(6, initial=6, slow_after=7.5)
    most, lock, stop = [0], threading.Lock(), threading.Event()

    def thread() -> None:
        for _ in range(50):
            taken = adaptive.acquire(4, stop)
            with lock:
                most[0] = max(most[0], adaptive.in_flight)
            adaptive.release(taken)
    threads = [threading.Thread(target=thread) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert 0 < most[0] <= 6 and adaptive.in_flight == 0


def test_a_stop_ends_the_wait_for_a_slot() -> None:
    adaptive = AdaptiveLimit(2, initial=2, slow_after=1.0)
    assert adaptive.acquire(5) == 2
    stop = threading.Event()
    stop.set()
    assert adaptive.acquire(1, stop, poll=0.01) == 0
