"""Destination call latency, by call and outcome: process-local (unlike the counters, which the
projection keeps), measured where the workers make their calls (infra/engines).

One histogram per destination object, so two services in one process (tests, an embedding
application) never mix their numbers, and nothing is registered in prometheus_client's global
registry: ``render_metrics`` collects it into the service's own registry.
"""
from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Callable, TypeVar


from schedfence.domain.ports import (AlreadyStarted, DestinationError, DestinationNotFound,
                                     DestinationNotReached, DestinationUnavailable,
                                     InvalidStartRequest)

T = TypeVar("T")
NAME = "schedfence_destination_call_duration_seconds"
# The adapters give every call a 5 s deadline: buckets from a local simulator to past it.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Most specific first: each outcome names what the caller learnt from the call.
OUTCOMES: tuple[tuple[type[BaseException], str], ...] = (
    (DestinationNotReached, "not_reached"),  # provably never arrived
    (DestinationUnavailable, "unavailable"),  # outcome unknown
    (AlreadyStarted, "already_started"),
    (DestinationNotFound, "not_found"),
    (InvalidStartRequest, "rejected"),
    (DestinationError, "error"),
)


def outcome_of(exc: BaseException | None) -> str:
    if exc is None:
        return "ok"
    return next((name for kind, name in OUTCOMES if isinstance(exc, kind)), "exception")


class CallLatency:
    """Seconds per destination call, labelled ``call`` (the port method) and ``outcome``."""

    def __init__(self) -> None:
        from prometheus_client import Histogram  # off the start-up of commands that call nothing
        self.histogram = Histogram(NAME, "Destination calls made by this process's workers, "
                                   "by port method and outcome.", ("call", "outcome"),
                                   registry=None, buckets=BUCKETS)

    def time(self, call: str, fn: Callable[[], T]) -> T:
        started, error = time.perf_counter(), None
        try:
            return fn()
        except BaseException as exc:
            error = exc
            raise
        finally:
            self.histogram.labels(call, outcome_of(error)).observe(
                time.perf_counter() - started)


_lock = threading.Lock()
_by_destination: weakref.WeakKeyDictionary[Any, CallLatency] = weakref.WeakKeyDictionary()


def latency_of(destination: Any) -> CallLatency:
    """The histogram of ``destination``'s calls (one per destination object, made on first
    use; a destination that cannot be weakly referenced gets a fresh one each time)."""
    with _lock:
        try:
            found = _by_destination.get(destination)
            if found is None:
                found = _by_destination[destination] = CallLatency()
            return found
        except TypeError:
            return CallLatency()
