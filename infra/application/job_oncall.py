"""Batch jobs whose selection stopped being decided, for ``oncall`` (projections/job_oncall.py
words each): every job's state read from the log, as ``job list`` reads them."""
from __future__ import annotations

import time
from typing import Any

from schedfence.domain.job import Job
from schedfence.projections.job_oncall import job_item


def stuck_jobs(app: Any, stuck_after: float, now: float | None = None) -> list[dict[str, Any]]:
    """Jobs still selecting with no event for ``stuck_after`` seconds, oldest first."""
    now = time.time() if now is None else now
    items = []
    for note in app.notifications((Job.Defined.TOPIC,)):
        job = app.repository.get(note.originator_id)
        found = job_item(job.state, max(now - job.modified_on.timestamp(), 0.0), stuck_after)
        if found is not None:
            items.append(found)
    return sorted(items, key=lambda i: -i["idle_seconds"])
