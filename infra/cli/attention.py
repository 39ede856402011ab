"""What a ``worker`` or ``migrate`` run leaves for an operator, and where to look: one line
("1 parked, 2 blocked, not drained: see `schedfence oncall`") and, under ``--json``, the
``attention`` object with the same numbers."""
from __future__ import annotations

import shlex
from typing import Any

ONCALL = "schedfence oncall"


def attention(parked: int, blocked: int, drained: bool | None) -> dict[str, Any]:
    """``parked``: migrations waiting for an operator (parked or legacy); ``blocked``: those
    the drain could not move after its retries; ``drained``: None when no drain ran."""
    needs = bool(parked or blocked or drained is False)
    return {"parked": parked, "blocked": blocked, "drained": drained,
            "needs_operator": needs, "see": ONCALL if needs else None}


def attention_lines(doc: dict[str, Any]) -> list[str]:
    """The one line, or none when nothing is left for an operator."""
    if not doc["needs_operator"]:
        return []
    parts = [f"{doc[k]} {k}" for k in ("parked", "blocked") if doc[k]]
    if doc["drained"] is False:
        parts.append("not drained")
    also = f" (`{doc['job_status']}` says why each schedule is blocked)" \
        if doc.get("job_status") else ""
    return [f"{', '.join(parts)}: see `{ONCALL}` for what each needs and what to do{also}"]


def worker_attention(states: dict[str, int], report: Any) -> dict[str, Any]:
    """A worker's: the store's parked and legacy migrations, and its drain's report (None:
    a pool stopped without a drain)."""
    parked = states.get("parked", 0) + states.get("legacy_pending", 0)
    if report is None:
        return attention(parked, 0, None)
    return attention(parked, len(report.blocked), bool(report.drained))


def job_attention(doc: dict[str, Any]) -> dict[str, Any]:
    """A batch job's run: its parked migrations, its blocked schedules (refused with a
    reason that may clear: ``job status`` names each) and what its drain could not move
    (None: --no-wait, no drain)."""
    drain = doc.get("drain")
    counts = doc.get("counts", {})
    parked, blocked = counts.get("parked", 0), counts.get("blocked", 0)
    found = attention(parked, blocked + len(drain["blocked"]) if drain else blocked,
                      None if drain is None else bool(drain["drained"]))
    if found["needs_operator"] and blocked:
        found["job_status"] = f"schedfence job status --job-id {shlex.quote(doc['job_id'])}"
    return found
