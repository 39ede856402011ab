"""Following the log: the projector applied again whenever the log grows, until stopped.

How the follower learns that the log grew:

- ``subscribe``: the recorder's own subscription (eventsourcing's ``recorder.subscribe``). On
  PostgreSQL every insert issues ``NOTIFY`` in its own transaction (no database function or
  trigger is needed), and the subscription ``LISTEN``s on that channel in a thread of its own,
  reading the new notifications when one arrives. The follower uses it only as a wake-up and a
  position hint: every event is still applied by ``Projector.catch_up``, the same tracked
  batches (exactly once; a gap or an undecodable event stops it) as a one-off catch-up. The
  subscription's LISTEN starts a moment after its first read, so an event committed in that
  moment wakes nobody: a check every ``interval`` (long: 30 s by default) catches that too.
- ``poll``: a check every ``interval`` (SQLite has no subscription).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from schedfence.domain.errors import InvalidArgument

if TYPE_CHECKING:  # the runner (SQLAlchemy) is imported when a follower first runs: the
    # CLI's options read this module's defaults for `projection follow --help`
    from .batch import Batch
    from .runner import Projector

MODES = ("auto", "subscribe", "poll")
POLL_INTERVAL = 1.0  # seconds between checks when polling
SAFETY_INTERVAL = 30.0  # seconds between checks when a subscription wakes the follower


@dataclass(frozen=True)
class Applied:
    """One committed batch: the position it reached, how many events, and the lag: seconds
    from the newest event's time (when it was recorded) to the batch's commit."""

    position: int
    events: int
    lag_seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"position": self.position, "events": self.events,
                "lag_seconds": self.lag_seconds}


class SubscriptionWaker:
    """Iterates ``recorder.subscribe(gt=...)`` in a thread: each notification past the hint
    raises the hint and sets ``wake``. ``error``: what ended the subscription, if anything."""

    def __init__(self, recorder: Any, gt: int, wake: threading.Event) -> None:
        self.hint, self._wake = gt, wake
        self.error: BaseException | None = None
        self._subscription = recorder.subscribe(gt=gt)  # NotImplementedError: none here
        self._thread = threading.Thread(target=self._run, name="projection-subscription",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with self._subscription as notifications:
                for note in notifications:
                    if note.id > self.hint:
                        self.hint = note.id
                        self._wake.set()
        except BaseException as exc:  # noqa: BLE001  (the follower raises it)
            self.error = exc
        else:
            self.error = None
        self._wake.set()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        self._subscription.stop()
        self._thread.join(timeout=10)


class ProjectionFollower:
    """Applies ``recorder``'s log through the projector until ``stop`` is set (``stop_now``).

    ``projector``: the projector, or a function making it (called once the mode is settled,
    so a refused mode creates no tables)."""

    def __init__(self, projector: Projector | Callable[[], Projector], recorder: Any, *,
                 mode: str = "auto",
                 interval: float | None = None,
                 on_batch: Callable[[Applied], None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if mode not in MODES:
            raise InvalidArgument(f"follow mode must be one of {', '.join(MODES)}")
        self._projector, self.recorder, self.mode = projector, recorder, mode
        self._interval = interval
        self.on_batch = on_batch or (lambda applied: None)
        self.clock = clock
        self.stop, self.wake = threading.Event(), threading.Event()
        self.applied_through = 0
        self.waker: SubscriptionWaker | None = None

    @property
    def projector(self) -> Projector:
        from .runner import Projector
        if not isinstance(self._projector, Projector):
            self._projector = self._projector()
        return self._projector

    @property
    def interval(self) -> float:
        if self._interval is not None:
            return self._interval
        return SAFETY_INTERVAL if self.waker is not None else POLL_INTERVAL

    def stop_now(self) -> None:
        """Ask ``run`` to return after the batch in hand (safe from another thread)."""
        self.stop.set()
        self.wake.set()

    def run(self, started: Callable[[], None] | None = None) -> int:
        """Catch up, then follow until stopped; returns how many events it applied. A gap or
        an undecodable event raises the projector's error (everything before it is applied).
        ``started`` is called once the mode is settled (``waker``), before the catch-up."""
        self.waker = self._open_waker()  # a refusal comes before anything is applied
        try:
            if started is not None:
                started()
            self.applied_through = self.projector.position
            applied = self._apply()
            while not self.stop.is_set():
                woken = self.wake.wait(self.interval)
                self.wake.clear()  # before reading: a later wake-up is never lost
                if self.stop.is_set():
                    break
                if self.waker is not None and not self.waker.alive:
                    raise self.waker.error or RuntimeError("the log subscription ended")
                if woken and self.waker is not None and self.waker.hint <= self.applied_through:
                    continue  # notifications of events a batch already applied
                applied += self._apply()
        finally:
            if self.waker is not None:
                self.waker.close()
        return applied

    def _open_waker(self) -> SubscriptionWaker | None:
        if self.mode == "poll":
            return None
        try:
            # From the log's tip: the first catch-up applies what lies before it.
            return SubscriptionWaker(self.recorder, self.recorder.max_notification_id() or 0,
                                     self.wake)
        except NotImplementedError:
            if self.mode == "subscribe":
                raise InvalidArgument("this store has no subscription to the log (SQLite): "
                                      "follow with --mode poll") from None
            return None

    def _apply(self) -> int:
        return self.projector.catch_up(on_batch=self._batch_done)

    def _batch_done(self, batch: Batch) -> None:
        self.applied_through = batch.position
        lag = max(0.0, self.clock() - batch.mono_us / 1e6)
        self.on_batch(Applied(batch.position, batch.applied, round(lag, 6)))
