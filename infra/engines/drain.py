"""Draining: attempt every open migration until nothing more can progress (``run_until_idle``).

"Idle" means nothing left that could progress without an operator or a lasting outage: every
open migration is completed, parked, legacy, or still could not progress after being retried
for ``retry_for`` seconds (a transient ``unavailable``, a lost start answer whose chain a second
look proves ours). A migration that backs off is retried after a short, growing wait (0.1 s
doubling up to 1 s) instead of ending the drain, so one lost response never leaves a
migration ``claimed`` behind a call that returned.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator
from uuid import UUID

from schedfence.domain.errors import DomainError

from schedfence.infra.pacing import doubling

RETRY_FOR = 5.0  # seconds one migration that cannot progress is retried within one drain
FIRST_WAIT, MAX_WAIT = 0.1, 1.0

# progress(settled, seen): migrations this drain has seen, and how many of them are no longer
# open (done, parked, legacy) or were given up (blocked). Called once per pass and at the end.
Progress = Callable[[int, int], None]
_REPORTING: ContextVar[Progress | None] = ContextVar("drain_progress", default=None)


@contextmanager
def reporting(progress: Progress) -> Iterator[None]:
    """Every drain run in this block (in this thread) reports to ``progress``, for callers
    that reach ``drain`` through ``run_until_idle`` (the CLI's bar)."""
    token = _REPORTING.set(progress)
    try:
        yield
    finally:
        _REPORTING.reset(token)


class DrainReport(int):
    """The number of attempts (an ``int``, as ``run_until_idle`` always returned), and what
    the drain left open: ``blocked`` (could not progress after its retries) and ``exhausted``
    (``max_attempts`` ran out while work remained)."""

    blocked: tuple[str, ...]
    exhausted: bool
    refused: tuple[str, ...]  # why blocked ones were refused (the destination gate), a line each

    def __new__(cls, attempts: int, blocked: tuple[str, ...] = (),
                exhausted: bool = False, refused: tuple[str, ...] = ()) -> "DrainReport":
        report = super().__new__(cls, attempts)
        report.blocked, report.exhausted, report.refused = blocked, exhausted, refused
        return report

    @property
    def attempts(self) -> int:
        return int(self)

    @property
    def drained(self) -> bool:
        return not self.blocked and not self.exhausted

    def to_dict(self) -> dict[str, Any]:
        return {"attempts": int(self), "drained": self.drained,
                "blocked": list(self.blocked), "exhausted": self.exhausted,
                "refused": list(self.refused)}


class NotDrained(DomainError):
    """``worker --until-idle`` ended with work open that it could not finish."""

    code = "not_drained"

    @classmethod
    def of(cls, report: DrainReport) -> "NotDrained":
        parts = list(report.refused)  # each: "destination_mismatch: migration NS/ID ..."
        if len(report.blocked) > len(report.refused):
            shown = ", ".join(report.blocked[:5]) + (" ..." if len(report.blocked) > 5 else "")
            parts.append(f"{len(report.blocked) - len(report.refused)} migration(s) could "
                         "not progress after "
                         f"their retries (destination unavailable, or a start still in "
                         f"flight): {shown}")
        if report.exhausted:
            parts.append(f"--max-attempts ran out after {int(report)} attempts with work "
                         "still due")
        return cls("; ".join(parts) + "; run the worker again, or see `schedfence oncall`")


@dataclass
class _Waiting:
    since: float
    tries: int = 0
    due_at: float = field(default=0.0)
    kind: str = "backoff"  # or "wait": a claim grace being waited out


def drain(attempt: Callable[[UUID], str], open_ids: Callable[[], list[UUID]],
          max_attempts: int | None = None, retry_for: float = RETRY_FOR,
          clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep,
          progress: Progress | None = None, wait_for: float = 0.0) -> DrainReport:
    """``wait_for``: how much longer than ``retry_for`` a migration that answers ``wait`` (a
    start that may still land, within the claim grace) is retried: once the grace has passed
    its reconcile decides (a run, or no run at all inside retention: F16), so a rerun right
    after a crash drains instead of giving up on the batch the crash cut."""
    report = _Reporter(progress or _REPORTING.get())
    try:
        return _drain(attempt, open_ids, max_attempts, (retry_for, wait_for), clock, sleep,
                      report)
    finally:
        report.end()


class _Reporter:
    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.seen: set[UUID] = set()

    def pass_starts(self, ids: list[UUID], blocked: set[UUID]) -> None:
        if self.progress is not None:
            self.seen.update(ids)
            self.progress(len(self.seen) - len(set(ids) - blocked), len(self.seen))

    def end(self) -> None:
        if self.progress is not None:
            self.progress(len(self.seen), len(self.seen))


def _drain(attempt: Callable[[UUID], str], open_ids: Callable[[], list[UUID]],
           max_attempts: int | None, limits: tuple[float, float], clock: Callable[[], float],
           sleep: Callable[[float], None], report: _Reporter) -> DrainReport:
    attempts = 0
    waiting: dict[UUID, _Waiting] = {}
    blocked: set[UUID] = set()
    while True:
        progressed = False
        ids = open_ids()
        report.pass_starts(ids, blocked)
        _forget_ended(waiting, blocked, ids)
        for mid in ids:
            w = waiting.get(mid)
            if mid in blocked or (w is not None and w.due_at > clock()):
                continue
            if max_attempts is not None and attempts >= max_attempts:
                return DrainReport(attempts, _ids(blocked | set(waiting)), exhausted=True)
            attempts += 1
            result = attempt(mid)
            if result == "refused":  # not this process's destination: never retried here
                blocked.add(mid)
                waiting.pop(mid, None)
                continue
            if result not in ("backoff", "wait"):
                progressed |= result == "progress"
                waiting.pop(mid, None)
                continue
            if w is None or w.kind != result:  # a wait that ends starts its own retries
                w = _Waiting(since=clock(), kind=result)
            w.tries += 1
            w.due_at = clock() + doubling(FIRST_WAIT, MAX_WAIT, w.tries)
            if w.due_at - w.since > limits[0] + (limits[1] if result == "wait" else 0.0):
                blocked.add(mid)
                waiting.pop(mid, None)
            else:
                waiting[mid] = w
        if progressed:
            continue
        if not waiting:
            return DrainReport(attempts, _ids(blocked))
        sleep(max(0.0, min(w.due_at for w in waiting.values()) - clock()))


def _forget_ended(waiting: dict[UUID, _Waiting], blocked: set[UUID], ids: list[UUID]) -> None:
    """A migration no longer open ended, whichever process drove it (a worker beside this
    drain finished the one whose claim it waited out): nothing is left to wait for."""
    still = set(ids)
    for mid in [m for m in waiting if m not in still]:
        del waiting[mid]
    blocked.intersection_update(still)


def _ids(mids: set[UUID]) -> tuple[str, ...]:
    return tuple(sorted(str(m) for m in mids))
