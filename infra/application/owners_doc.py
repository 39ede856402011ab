"""The ownership audit's documents: an audit, paged (``owners --json``, ``GET /v1/owners``),
and its drift with the commands that resolve each (``oncall``), all read from the recorded
audit (infra/application/owners.py), never from Temporal."""
from __future__ import annotations

from typing import Any, Callable
from urllib.parse import urlsplit

from schedfence.domain.owners.audit import AuditState
from schedfence.domain.owners.classify import DRIFT, FAILING, OwnerRow, failing
from schedfence.domain.owners.resolve import advice, resolutions
from schedfence.domain.text import counted
from schedfence.projections.ownership import last_audits
from schedfence.projections.cursors import decode_cursor, encode_cursor
from schedfence.projections.queries import check_limit

CURSOR = "owners"


def audit_doc(state: AuditState, limit: int | None = None, after: str | None = None,
              drift_only: bool = False) -> dict[str, Any]:
    """The audit: its summary and its rows in key order (``limit`` a page: ``next_cursor``
    is set while more follow; ``drift_only``: the drift rows only)."""
    rows = state.owner_rows()
    if drift_only:
        rows = [r for r in rows if r.kind in DRIFT]
    if after is not None:
        start = decode_cursor(CURSOR, after, (str,))[0]
        rows = [r for r in rows if r.schedule_id > start]
    more = False
    if limit is not None:
        check_limit(limit)
        more, rows = len(rows) > limit, rows[:limit]
    return {"namespace": state.namespace, "at": state.at, "deep": state.deep,
            "destination": state.destination, "actor": state.actor, "counts": state.counts,
            "calls": state.calls, "failing": failing(state.counts.get("kind", {})),
            "rows": [r.to_dict() for r in rows],
            "next_cursor": encode_cursor(CURSOR, rows[-1].schedule_id) if more else None}


def temporal_address(destination: str) -> str:
    """HOST:PORT of a ``temporal://`` destination label ("" for another destination)."""
    if not destination.startswith("temporal://"):
        return ""
    return urlsplit(destination).netloc.rpartition("@")[2]


Handovers = Callable[[str], "dict[str, Any] | None"]  # migration id -> its handover


def drift_items(state: AuditState, handover: Handovers) -> list[dict[str, Any]]:
    """Each failing drift of the audit, with the commands that resolve it (the preferred
    first); ``changed_at_destination`` rows are listed without commands (informational)."""
    address = temporal_address(state.destination)
    items = []
    for row in state.owner_rows():
        if row.kind not in DRIFT:
            continue
        given = handover(row.migration_id) if row.kind == "missing_at_destination" and \
            row.migration_id else None
        items.append({"namespace": state.namespace, "audited_at": state.at,
                      **row.to_dict(), "failing": row.kind in FAILING,
                      "resolve": resolutions(row, state.namespace, address, given),
                      "advice": advice(row, state.namespace)})
    return items


def ownership_drift(app: Any, migration_state: Callable[[str], Any]) -> list[dict[str, Any]]:
    """``drift_items`` of every namespace's last audit; ``migration_state(id)`` gives a
    migration's state (its ``handover``)."""
    def handover(mid: str) -> dict[str, Any] | None:
        found = migration_state(mid)
        return found.handover if found is not None else None
    return [i for state in last_audits(app) for i in drift_items(state, handover)]


def summary_line(state: AuditState) -> str:
    kinds = state.counts.get("kind", {})
    owners = state.counts.get("owner", {})
    drift = ", ".join(f"{k} {kinds.get(k, 0)}" for k in DRIFT if kinds.get(k))
    return (f"{state.namespace} audited {state.at}: {counted(len(state.rows), 'key')}; owner "
            + ", ".join(f"{o} {n}" for o, n in owners.items())
            + f"; native {kinds.get('native', 0)}; drift: {drift or 'none'}")


def row_cells(row: OwnerRow) -> list[object]:
    return [row.schedule_id, row.owner, row.store, row.migration_id or "-", row.kind,
            row.next_run or "-"]
