"""A store and its simulated Temporal side holding one key of each ownership kind (shared by
the owners CLI and HTTP tests)."""
from __future__ import annotations

from schedfence.domain.source.action import make_action
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import open_service

NS = "ns"
EVERY_MINUTE = {"intervals": [{"every": 60, "offset": 0}]}
# key -> the kind its row must have
KINDS = {"handed": "none", "gone": "missing_at_destination", "both": "two_owners",
         "closed": "unexplained_at_destination", "paused": "unexplained_at_destination",
         "plain": "none", "native": "native"}


def action(sid: str):
    return make_action(workflow_type="Report", task_queue="q", workflow_id=f"act-{sid}",
                       input={"key": sid})


def make_world(store: str) -> None:
    """Every kind: handed over (none), handed over then deleted by hand (missing), a running
    source beside a schedule made by hand (two owners), a closed and a paused source each with
    one made by hand (unexplained), a plain source, a schedule the store never knew."""
    with open_service(store, "sim") as svc:
        for sid in ("handed", "gone", "both", "closed", "paused", "plain"):
            svc.create_schedule(NS, sid, spec=make_spec(intervals=[(60, 0)]), action=action(sid))
        for sid in ("handed", "gone"):
            svc.rollback(NS, sid, f"R-{sid}")
        svc.run_until_idle(retry_for=0)
        svc.update_schedule(NS, "paused", paused=True)
        sim = svc.destination
        sim.delete_schedule(NS, "gone")
        svc.update_schedule(NS, "closed", delete=True)
        for sid in ("both", "closed", "paused", "native"):
            sim.create_by_hand(NS, sid, spec=EVERY_MINUTE,
                               action=action(f"hand-{sid}").model_dump(mode="json"))
