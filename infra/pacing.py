"""Pacing: how long to wait before trying again, and how often a request may be made.

- ``retry_call``: the one retry loop of the package (the event store's conflict, connection
  and read retries, the replication follower's revalidation and opening, the races of the
  simulator's and the side tables' creation, the worker's backoff row). Each caller names
  what it retries (``retry_on``, ``retry_if``), how often (``attempts``), what it does
  between two tries (``before_retry``) and how long it pauses (``pause``: none, ``fixed``,
  ``linear``); the error of the last try is raised as it was, so each caller keeps its own
  message for giving up.
- ``doubling``: the growing wait of a migration that backs off (the worker's due-work backoff
  table, the drain's retries).
- ``TokenBucket``: the rate limit of a batch job's requests (``take`` sleeps) and of the HTTP
  API's callers (``try_take`` answers how long to wait).
- ``AdaptiveLimit``: how many start calls a worker's batches have in flight, lowered when the
  destination answers slowly (AIMD), so a slow server is met with fewer calls, not with
  deadlines run out (whose outcome is unknown: the migration waits out the claim grace).

Our own rather than tenacity's: the loops are a few lines each, several decide per error and
keep their own give-up messages, and none needs an async, a statistics or a stop-by-time
policy; a dozen lines here cost less than a new dependency. This module imports nothing of
the package, so every layer (the store included) may use it.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, TypeVar

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)
# (the error of the try that failed, that try's number from 1) -> seconds to pause
Pause = Callable[[BaseException, int], float]


def no_pause(error: BaseException, attempt: int) -> float:
    return 0.0


def fixed(seconds: float) -> Pause:
    """The same pause after every failed try."""
    def pause(error: BaseException, attempt: int) -> float:
        return seconds
    return pause


def linear(step: float) -> Pause:
    """``step`` seconds after the first failed try, twice that after the second, ..."""
    def pause(error: BaseException, attempt: int) -> float:
        return step * attempt
    return pause


def doubling(first: float, cap: float, failures: int) -> float:
    """``first`` seconds after one failure, doubling per further failure, at most ``cap``."""
    return min(cap, first * 2 ** max(failures - 1, 0))


def _always(error: BaseException) -> bool:
    return True


def retry_call(call: Callable[[], T], *, attempts: int,
               retry_on: type[E] | tuple[type[E], ...],
               retry_if: Callable[[E], bool] = _always,
               pause: Callable[[E, int], float] = no_pause,
               before_retry: Callable[[E, int], None] | None = None,
               sleep: Callable[[float], None] | None = None,
               exhausted: BaseException | None = None) -> T:
    """``call()``, tried up to ``attempts`` times. After a try fails with an error of
    ``retry_on`` for which ``retry_if`` holds, and it was not the last try:
    ``before_retry(error, n)`` runs, then a sleep of ``pause(error, n)`` seconds (none for 0),
    then the next try (``n``: the failed try's number, from 1). Any other error, or the last
    try's, is raised unchanged; ``exhausted``, when given, is raised instead of the last try's
    error of ``retry_on`` (from None). ``sleep``: ``time.sleep`` unless a test gives its own."""
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except retry_on as error:
            if attempt == attempts and exhausted is not None:
                raise exhausted from None
            if attempt == attempts or not retry_if(error):
                raise
            if before_retry is not None:
                before_retry(error, attempt)
            seconds = pause(error, attempt)
            if seconds > 0:
                (sleep or time.sleep)(seconds)
    raise AssertionError("unreachable")  # pragma: no cover


class TokenBucket:
    """At most ``rate`` takes a second on average, in bursts of at most ``capacity``; it
    starts full. ``clock`` and ``sleep`` are injectable for tests."""

    __slots__ = ("rate", "capacity", "tokens", "at", "clock", "sleep")

    def __init__(self, rate: float, capacity: float = 1.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 now: float | None = None) -> None:
        if rate <= 0:
            raise ValueError("a token bucket's rate must be more than 0")
        self.rate, self.capacity, self.clock, self.sleep = rate, capacity, clock, sleep
        self.tokens = capacity
        self.at = clock() if now is None else now

    def level(self, now: float) -> float:
        """The tokens held at ``now`` (refilled since the last take, at most ``capacity``)."""
        return min(self.capacity, self.tokens + (now - self.at) * self.rate)

    def try_take(self, now: float | None = None) -> float:
        """Take a token if one is held: 0; else take none and answer the seconds until one
        would be held."""
        now = self.clock() if now is None else now
        self.tokens, self.at = self.level(now), now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate

    def take(self) -> None:
        """Take a token, sleeping first until one is held."""
        wait = self.try_take()
        if wait:
            self.sleep(wait)
            self.at, self.tokens = self.clock(), 0.0  # the token refilled during the sleep


class AdaptiveLimit:
    """How many destination calls may be in flight at once, adapted to how fast they are
    answered (AIMD): a call answered slower than ``slow_after`` seconds, or failed, halves the
    limit (at most once per as many answers as the limit was, so one slow wave is one
    decrease); answers in
    time raise it, by one per answer until the first decrease (a slow start from ``initial``),
    by one per ``limit`` answers after it; always from ``minimum`` to ``maximum``.

    ``acquire(wanted)`` reserves up to ``wanted`` slots of the limit (waiting while none is
    free, or until ``stop`` is set: then 0) and ``release(n)`` gives them back, so threads
    sharing one limit have at most ``limit`` calls in flight between them. ``slow_after``
    None: never adapts (``maximum`` slots, for a destination with no deadline)."""

    def __init__(self, maximum: int, *, minimum: int = 1, initial: int | None = None,
                 slow_after: float | None = None) -> None:
        if not 1 <= minimum <= maximum:
            raise ValueError("an adaptive limit needs 1 <= minimum <= maximum")
        self.minimum, self.maximum, self.slow_after = minimum, maximum, slow_after
        start = maximum if slow_after is None else (initial or minimum)
        self.limit = max(minimum, min(maximum, start))
        self.in_flight = 0
        self.decreases = self.slow = 0  # counters, for a job's figures and the tests
        self._since_decrease = self._grown = self._window = 0
        self._slow_started = False  # a first decrease ends the slow start
        self._cond = threading.Condition()

    def acquire(self, wanted: int, stop: Any = None, poll: float = 0.5) -> int:
        if self.slow_after is None:
            return wanted  # not adapting: no count kept either
        with self._cond:
            while self.in_flight >= self.limit:
                if stop is not None and stop.is_set():
                    return 0
                self._cond.wait(poll)
            taken = max(0, min(wanted, self.limit - self.in_flight))
            self.in_flight += taken
            return taken

    def release(self, taken: int) -> None:
        if self.slow_after is None:
            return
        with self._cond:
            self.in_flight = max(0, self.in_flight - taken)
            self._cond.notify_all()

    def observe(self, seconds: float, failed: bool = False) -> None:
        """One call's answer: how long it took, and whether it failed (no answer)."""
        if self.slow_after is None:
            return
        with self._cond:
            self._since_decrease += 1
            if failed or seconds > self.slow_after:
                self.slow += 1
                if self._since_decrease >= self._window:  # not again for the same wave
                    self._window = self.limit
                    self.limit = max(self.minimum, self.limit // 2)
                    self.decreases += 1
                    self._since_decrease = self._grown = 0
                    self._slow_started = True
                return
            self._grown += 1
            if not self._slow_started or self._grown >= self.limit:
                self.limit = min(self.maximum, self.limit + 1)
                self._grown = 0
            self._cond.notify_all()
