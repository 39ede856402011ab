"""The source scheduler's invoker: what to do with buffered starts, by overlap policy.

A pure decision over (buffered starts in order, the schedule's running workflows, whether a
cancel or terminate it asked for is still pending). The names and meanings are Temporal's
``ScheduleOverlapPolicy``:

- ``skip``: while a workflow of the schedule runs, the start is dropped;
- ``buffer_one``: it waits for the running one to close; at most one waits, later ones drop;
- ``buffer_all``: every start waits, and they run one after another;
- ``cancel_other`` / ``terminate_other``: the running ones are asked to cancel (terminate),
  and the start waits until they have closed;
- ``allow_all``: it starts at once, whatever runs.

Starts that wait stay buffered in order; a dropped start is recorded with its reason, so every
nominal time ends as started or skipped with a reason (the checker's rule).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Sequence

Overlap = Literal["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other",
                  "allow_all"]
OVERLAPS: tuple[Overlap, ...] = ("skip", "buffer_one", "buffer_all", "cancel_other",
                                 "terminate_other", "allow_all")


@dataclass(frozen=True)
class BufferedStart:
    nominal: datetime
    overlap: Overlap = "skip"
    origin: str = "auto"  # "auto" (the spec), "trigger", or a backfill's id


@dataclass(frozen=True)
class Invocation:
    start: tuple[BufferedStart, ...] = ()  # start now, in this order
    keep: tuple[BufferedStart, ...] = ()  # still buffered, in order
    dropped: tuple[BufferedStart, ...] = ()  # skipped with reason "overlap"
    cancel: tuple[str, ...] = ()  # running workflow ids to ask to cancel
    terminate: tuple[str, ...] = ()  # ... to terminate


def invoke(buffer: Sequence[BufferedStart], running: Sequence[str]) -> Invocation:
    """Decide every buffered start against what runs: start, keep waiting, or drop."""
    start: list[BufferedStart] = []
    keep: list[BufferedStart] = []
    dropped: list[BufferedStart] = []
    cancel: list[str] = []
    terminate: list[str] = []
    busy = bool(running)  # a workflow of the schedule runs (or one starts in this decision)
    for b in buffer:
        if b.overlap == "allow_all":
            start.append(b)
            busy = True
        elif keep:  # one already waits: everything after it waits too, or drops
            _wait_or_drop(b, keep, dropped)
        elif not busy:
            start.append(b)
            busy = True
        elif b.overlap == "skip":
            dropped.append(b)
        else:
            if b.overlap in ("cancel_other", "terminate_other"):
                stop = cancel if b.overlap == "cancel_other" else terminate
                stop.extend(w for w in running if w not in stop)
            keep.append(b)
    return Invocation(tuple(start), tuple(keep), tuple(dropped), tuple(cancel), tuple(terminate))


def _wait_or_drop(b: BufferedStart, keep: list[BufferedStart],
                  dropped: list[BufferedStart]) -> None:
    if b.overlap in ("skip", "buffer_one"):
        dropped.append(b)  # buffer_one: one already waits
    else:
        keep.append(b)
