"""The simulator's record of action starts as a server's listing shows them (``ActionListing``):
every run a start created at an id, deleted ones too (the simulator keeps them), and each
schedule it runs (a ``temporal-sys-scheduler:<id>`` chain whose head carries a handover) as
the action workflow ids of the starts it made by now (``head_starts``: its handover's patch,
its settled boundary and its own spec times until it was paused or deleted), for every chain
ever created at that id.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Callable, Sequence

from schedfence.domain.source.action import action_workflow_id, parse_nominal
from schedfence.domain.rollback.handover import Handover, destination_starts


def wanted(workflow_id: str, prefixes: Sequence[str] | None) -> bool:
    return prefixes is None or any(workflow_id.startswith(p + "-") for p in prefixes)


def head_starts(head: dict, now: datetime, pause_lag: timedelta) -> list[datetime]:
    """The nominal times a simulated schedule (the chain ``head``) started by ``now``."""
    sched = head.get("sched", {})
    if not head["input"].get("handover"):
        return []  # a pause-and-notes schedule never acts
    stops = [parse_nominal(t) for t in (sched.get("paused_at"), sched.get("deleted_at"))
             if t] + [now]
    if sched.get("paused_at"):
        stops.append(parse_nominal(sched["paused_at"]) - pause_lag)
    plain = set(head.get("settled_plain", ()))  # settle_deleted's: listed as their runs
    return destination_starts(Handover.model_validate(head["input"]["handover"]),
                              parse_nominal(head["created_at"]),
                              [parse_nominal(t) for t in head.get("settled", [])
                               if t not in plain], min(stops))


class SimListing:
    """Mixed into ``SimulatedDestination`` (``_state``, ``clock``, ``pause_lag``)."""

    _state: Any
    clock: Callable[[], datetime]
    pause_lag: timedelta

    def action_starts(self, namespace: str,
                      prefixes: Sequence[str] | None = None) -> list[str]:
        now = self.clock()
        out: list[str] = []
        with self._state.session() as tx:
            ids = [w for ns, w in tx.workflow_ids() if ns == namespace]
            for wid in ids:
                runs = tx.runs(namespace, wid)
                heads = [r for r in runs if "created_at" in r]
                for head in heads:
                    doc = head["input"].get("handover") or {}
                    if not doc.get("action"):
                        continue
                    h = Handover.model_validate(doc)
                    assert h.action is not None
                    out += [w for t in head_starts(head, now, self.pause_lag)
                            if wanted(w := action_workflow_id(h.action, t), prefixes)]
                if not heads and wanted(wid, prefixes):
                    out += [wid for r in runs if r["by_start"]]
        return sorted(out)
