"""The engines' side of the destination gate (domain/destination_id.py): a migration this
process may not act on is skipped, logged once per reason and kept for the drain's report."""
from __future__ import annotations

from logging import Logger
from uuid import UUID

from schedfence.domain.errors import DomainError
from schedfence.domain.process import AttemptResult

# The step a stall names when the gate could not read which destination serves (a Temporal
# cluster's id unanswered): what oncall shows as the failing step.
IDENTIFY = "destination identity"


def refused(refusals: dict[UUID, str], migration_id: UUID, exc: DomainError, log: Logger,
            worker_id: str) -> AttemptResult:
    """Record the refusal's one line (``code: message``) and answer ``refused``: never
    retried hot (the due index backs it off like any other non-progress)."""
    line = f"{exc.code}: {exc.message}"
    if refusals.get(migration_id) != line:
        log.warning("worker %s: %s", worker_id, line)
    refusals[migration_id] = line
    return "refused"
