"""A batch job (domain/job.py) whose selection stopped being decided: what ``oncall`` says of
it. A job's runner is the ``migrate`` command itself (no worker moves a job), so a job still
``selecting`` with no event for the threshold had its runner stop (a crash, a Ctrl-C, a lost
terminal) or is paging very slowly: rerunning the same command resumes it from its cursor and
asks no schedule twice. Its migrations, once requested, are the workers' and show as any
other. Only the wording lives here; nothing is recorded."""
from __future__ import annotations

import shlex
from typing import Any

from schedfence.domain.job import JobState


def rerun_command(st: JobState) -> str:
    """The ``migrate`` command that resumes the job (its own selection, as defined)."""
    words = ["schedfence", "migrate", "--namespace", st.namespace, "--to", st.direction,
             "--job-id", st.job_id]
    for sid in st.schedule_ids or ():
        words += ["--schedule-id", sid]
    if st.match is not None:
        words += ["--match", st.match]
    return " ".join(shlex.quote(w) for w in words)


def job_item(st: JobState, idle_seconds: float, stuck_after: float) -> dict[str, Any] | None:
    """The on-call item of a job still selecting after ``stuck_after`` seconds without an
    event (None: it needs nobody)."""
    if st.phase != "selecting" or idle_seconds < stuck_after:
        return None
    cancel = " ".join(shlex.quote(w) for w in (
        "schedfence", "job", "cancel", "--job-id", st.job_id, "--actor", "YOU", "--reason",
        "WHY"))
    return {"category": "stuck", "job_id": st.job_id, "namespace": st.namespace,
            "direction": st.direction, "pages": st.pages, "decided": len(st.decided),
            "idle_seconds": round(idle_seconds, 3),
            "actions": [f"job {st.job_id} has decided {len(st.decided)} schedule(s) in "
                        f"{st.pages} page(s) and made no progress for {idle_seconds:.0f}s: "
                        "its `migrate` run stopped (or pages very slowly)",
                        f"resume it (from its cursor; no schedule is asked twice): "
                        f"{rerun_command(st)}",
                        f"or stop its new requests: {cancel}"]}
