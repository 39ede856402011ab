"""The recorder's guard: a lock or statement timeout is reported as ``StoreTimeout`` (naming
the timeout), and a write retried after a dropped connection that meets its own rows is the
unknown outcome it is, never another writer's conflict.

``FenceApplication.construct_recorder`` (eventstore.py) wraps its recorder with
``guard_recorder``; other errors are retried exactly as eventsourcing's ``@retry`` would.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError

from schedfence.infra.pacing import fixed, retry_call
from schedfence.infra.adapters.store.pg import StoreTimeout

STORE_RETRIES, STORE_RETRY_WAIT = 10, 0.2  # eventsourcing.postgres's own retry of its methods
T = TypeVar("T")


_READS = ("select_events", "select_notifications", "max_notification_id")


def guard_recorder(recorder: Any, timeout: Callable[[BaseException], StoreTimeout | None],
                   before_retry: Callable[[BaseException, int], None] | None = None) -> Any:
    """Make ``recorder`` report a lock or statement timeout as ``StoreTimeout`` (naming the
    timeout), at once for a read, after eventsourcing's retries for a writer's insert-lock wait.
    Other errors are retried exactly as eventsourcing's ``@retry`` would; ``before_retry`` runs
    before each retry (``pacing.retry_call``'s)."""
    for name in (*_READS, "insert_events"):
        method = getattr(type(recorder), name, None)
        if method is None:
            continue
        inner = getattr(method, "__wrapped__", None)  # eventsourcing's @retry, undone
        attempts = STORE_RETRIES if inner is not None else 1
        setattr(recorder, name, _guarded((inner or method).__get__(recorder), attempts,
                                         name == "insert_events", timeout, before_retry))
    return recorder


def _guarded(call: Callable[..., T], attempts: int, is_write: bool,
             timeout: Callable[[BaseException], StoreTimeout | None],
             before_retry: Callable[[BaseException, int], None] | None = None
             ) -> Callable[..., T]:
    @functools.wraps(call)
    def guarded(*args: Any, **kwargs: Any) -> T:
        lost = _LostWrite(is_write)
        try:
            return retry_call(lambda: lost.call(call, *args, **kwargs), attempts=attempts,
                              retry_on=(InterfaceError, OperationalError),
                              retry_if=lambda exc: lost.retries(exc, timeout(exc)),
                              pause=fixed(STORE_RETRY_WAIT), before_retry=before_retry)
        except (InterfaceError, OperationalError) as exc:
            timed_out = None if exc is lost.raised else timeout(exc)
            if timed_out is None:
                raise
            if lost.tries > 1:
                timed_out.message += f" (gave up after {lost.tries} attempts)"
                timed_out.args = (timed_out.message,)
            raise timed_out from None
    return guarded


class _LostWrite:
    """One guarded call's tries: the first failure of a write that may have committed, so
    that a retry meeting the same rows raises that failure (``raised``), never "someone else
    wrote"."""

    def __init__(self, is_write: bool) -> None:
        self.is_write, self.tries = is_write, 0
        self.failed: BaseException | None = None
        self.raised: BaseException | None = None

    def call(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self.tries += 1
        try:
            return call(*args, **kwargs)
        except IntegrityError:
            if self.failed is None:
                raise
            # The failed attempt may have committed before its connection broke: the
            # rows the retry met may be our own. Unknown, never "someone else wrote".
            self.failed.add_note("its retry met the same rows: the insert may have committed")
            self.raised = self.failed
            raise self.failed  # its cause (psycopg's error) names the failure

    def retries(self, exc: BaseException, timed_out: StoreTimeout | None) -> bool:
        """Whether ``exc`` is tried again: not a timeout, except a writer's insert-lock wait."""
        if exc is self.raised:
            return False
        if self.is_write and self.failed is None:
            self.failed = exc  # the first that may have committed
        lock_wait = timed_out is not None and "lock timeout" in timed_out.message
        return timed_out is None or (self.is_write and lock_wait)

