"""The recorded ownership audits (domain/owners/audit.py), read from the log alone: never
from Temporal. ``app`` is the store's application (its recorder, mapper and notifications).

Each namespace's audits are one aggregate whose state is its last event's, so the last audit
is one read of that event, however many audits came before."""
from __future__ import annotations

from typing import Any, cast

from schedfence.domain.ids import validate_id
from schedfence.domain.owners.audit import AuditState, OwnershipAudits, audits_aggregate_id


def load_audits(app: Any, namespace: str) -> OwnershipAudits | None:
    """The namespace's audits aggregate, from its last event (None: never audited)."""
    stored = app.read_retrying(lambda: app.recorder.select_events(
        audits_aggregate_id(namespace), desc=True, limit=1))
    return OwnershipAudits.from_last(app.mapper.to_domain_event(stored[0])) if stored else None


def last_audit(app: Any, namespace: str) -> AuditState | None:
    """The last recorded audit of ``namespace`` (None: never audited)."""
    validate_id("namespace", namespace)
    found = load_audits(app, namespace)
    return found.state if found is not None and found.state.at is not None else None


def audited_namespaces(app: Any) -> list[str]:
    """Every namespace audited at least once, sorted."""
    return sorted({cast(OwnershipAudits.Created, app.mapper.to_domain_event(n)).namespace
                   for n in app.notifications((OwnershipAudits.Created.TOPIC,))})


def last_audits(app: Any) -> list[AuditState]:
    """The last audit of every audited namespace, by namespace."""
    return [s for s in (last_audit(app, ns) for ns in audited_namespaces(app)) if s]
