"""A running job's progress, as ``migrate`` shows it (infra/cli/jobs.py draws it with the CLI's
one progress bar, ``output.progress``): schedules decided of the selection, and of the
migrations requested, how many were driven to an end (completed, parked or aborted) and how
many completed, and the round asking blocked schedules again, if one is under way.
``settled`` is what the bar and its ETA count: every schedule whose part in the job is over
(skipped, blocked, or its migration ended); without ``wait`` nothing is driven here, so it is
the schedules decided. A blocked schedule a round requests is unsettled again until driven.

Only a run that shows progress pays for it: after each drive it loads the migrations still
open, once each, until they end.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from schedfence.domain import job as j

Progress = Callable[[dict[str, Any]], None]
ENDED = ("completed", "parked", "aborted")


class JobProgress:
    def __init__(self, report: Progress, total: int | None, wait: bool,
                 find: Callable[[str, str], Any]) -> None:
        """``find(schedule_id, request_id)``: that requested migration (None: not found)."""
        self.report, self.total, self.wait, self.find = report, total, wait, find
        self.started = time.monotonic()
        self.open: dict[str, str] = {}  # schedule id -> request id, requested, not yet ended
        self.ended = dict.fromkeys(ENDED, 0)
        self.counts: dict[str, int] = {}
        self.round = 0  # the round asking blocked schedules again (0: the pages)

    def decided(self, counts: dict[str, int], page: list[dict[str, str]], asked: int,
                round: int = 0) -> None:
        """The job's counts so far with ``page`` (decided, not yet recorded) on top; in a
        round (``round`` > 0) that asks blocked schedules again, in place of their blocked
        decisions."""
        self.round = round
        self.counts = dict(counts)
        if round:
            self.counts["blocked"] = self.counts.get("blocked", 0) - len(page)
        for x in page:
            self.counts[x["decision"]] = self.counts.get(x["decision"], 0) + 1
            if x["decision"] == "requested":
                self.open[x["schedule_id"]] = x["request_id"]
        self._send(asked)

    def driven(self, asked: int) -> None:
        """After a drive: the open migrations that ended since."""
        for sid, rid in list(self.open.items()):
            mig = self.find(sid, rid)
            phase = mig.state.phase if mig is not None else None
            if phase in ENDED:
                self.ended[phase] += 1
                del self.open[sid]
        self._send(asked)

    def _send(self, asked: int) -> None:
        decided = sum(self.counts.values())
        refused = decided - self.counts.get("requested", 0)
        driven = sum(self.ended.values())
        self.report({"decided": decided, "total": self.total, "counts": self.counts,
                     "requested": self.counts.get("requested", 0), "driven": driven,
                     "completed": self.ended["completed"], "round": self.round,
                     "settled": refused + driven if self.wait else decided,
                     "rate": asked / max(time.monotonic() - self.started, 1e-9)})


def request_ids(job: j.JobState) -> dict[str, str]:
    """The requested schedules of a job's recorded pages, and their request ids."""
    return {sid: d["request_id"] for sid, d in job.decided.items()
            if d["decision"] == "requested"}
