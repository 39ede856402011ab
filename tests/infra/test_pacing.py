"""infra/pacing.py: the one retry loop, the doubling backoff and the token bucket that the
store, the follower, the simulator, the worker, batch jobs and the HTTP API share."""
from __future__ import annotations

import pytest

from schedfence.infra.pacing import (TokenBucket, doubling, fixed, linear, no_pause,
                                     retry_call)


class Flaky:
    def __init__(self, *answers: object) -> None:
        self.answers, self.calls = list(answers), 0

    def __call__(self) -> object:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_a_retried_error_is_tried_again_until_an_answer() -> None:
    slept: list[float] = []
    call = Flaky(KeyError("a"), KeyError("b"), "done")
    assert retry_call(call, attempts=3, retry_on=KeyError, pause=linear(0.5),
                      sleep=slept.append) == "done"
    assert call.calls == 3 and slept == [0.5, 1.0]


def test_the_last_tries_error_is_raised_unchanged() -> None:
    last = KeyError("third")
    call = Flaky(KeyError("first"), KeyError("second"), last)
    with pytest.raises(KeyError) as raised:
        retry_call(call, attempts=3, retry_on=KeyError, sleep=lambda s: None)
    assert raised.value is last and call.calls == 3


def test_exhausted_replaces_the_last_tries_error_only() -> None:
    gave_up = RuntimeError("kept changing")
    call = Flaky(KeyError("first"), KeyError("second"))
    with pytest.raises(RuntimeError) as raised:
        retry_call(call, attempts=2, retry_on=KeyError, exhausted=gave_up)
    assert raised.value is gave_up and raised.value.__suppress_context__
    assert call.calls == 2
    call = Flaky(ValueError("not ours"), "never")
    with pytest.raises(ValueError):
        retry_call(call, attempts=2, retry_on=KeyError, exhausted=gave_up)
    assert call.calls == 1


def test_other_errors_and_refused_ones_are_raised_at_once() -> None:
    call = Flaky(ValueError("not ours"), "never")
    with pytest.raises(ValueError):
        retry_call(call, attempts=5, retry_on=KeyError)
    assert call.calls == 1
    call = Flaky(KeyError("fatal"), "never")
    with pytest.raises(KeyError):
        retry_call(call, attempts=5, retry_on=KeyError,
                   retry_if=lambda exc: "fatal" not in str(exc))
    assert call.calls == 1


def test_before_retry_runs_first_then_the_pause_chosen_per_error() -> None:
    seen: list[tuple[str, object]] = []
    call = Flaky(KeyError("k"), IndexError("i"), "done")

    def pause(exc: Exception, attempt: int) -> float:
        return 0.25 * attempt if isinstance(exc, IndexError) else 0.0

    assert retry_call(call, attempts=3, retry_on=(KeyError, IndexError),
                      before_retry=lambda exc, n: seen.append(("before", n)), pause=pause,
                      sleep=lambda s: seen.append(("sleep", s))) == "done"
    assert seen == [("before", 1), ("before", 2), ("sleep", 0.5)]  # no sleep of 0


def test_one_attempt_is_one_call_and_none_is_refused() -> None:
    call = Flaky(KeyError("once"))
    with pytest.raises(KeyError):
        retry_call(call, attempts=1, retry_on=KeyError)
    assert call.calls == 1
    with pytest.raises(ValueError):
        retry_call(lambda: None, attempts=0, retry_on=KeyError)


def test_the_pauses() -> None:
    error = KeyError("x")
    assert [no_pause(error, n) for n in (1, 2)] == [0.0, 0.0]
    assert [fixed(0.2)(error, n) for n in (1, 5)] == [0.2, 0.2]
    assert [linear(0.1)(error, n) for n in (1, 2, 3)] == pytest.approx([0.1, 0.2, 0.3])
    assert [doubling(0.1, 1.0, n) for n in range(1, 7)] == \
        pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert doubling(0.5, 60.0, 0) == 0.5  # no failure yet counts as the first


def test_a_bucket_answers_the_wait_without_taking() -> None:
    bucket = TokenBucket(2.0, capacity=3.0, now=0.0)
    assert [bucket.try_take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]  # the burst
    assert bucket.try_take(0.0) == pytest.approx(0.5)  # nothing taken: still empty
    assert bucket.try_take(0.25) == pytest.approx(0.25)
    assert bucket.try_take(0.5) == 0.0
    assert bucket.level(100.0) == 3.0  # refills to its capacity, never beyond


def test_take_sleeps_until_a_token_is_held() -> None:
    now = {"t": 0.0}
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now["t"] += seconds

    bucket = TokenBucket(4.0, clock=lambda: now["t"], sleep=sleep)
    for _ in range(5):
        bucket.take()
    assert slept == pytest.approx([0.25] * 4) and bucket.level(now["t"]) == 0.0


def test_a_bucket_needs_a_rate() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0.0)
