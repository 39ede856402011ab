"""Domain errors: each carries a stable code that the CLI and API show to callers."""
from __future__ import annotations


class DomainError(Exception):
    code = "error"
    retryable = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(DomainError):
    code = "invalid_argument"


class NotFound(DomainError):
    code = "not_found"


class Closed(DomainError):
    code = "closed"


class SentinelBlocked(DomainError):
    code = "sentinel_blocked"
    retryable = True


class PhaseBlocked(DomainError):
    code = "phase_blocked"
    retryable = True


class AlreadyExists(DomainError):
    code = "already_exists"


class MigrationPending(DomainError):
    code = "migration_pending"
    retryable = True


class Unavailable(DomainError):
    """The destination could not be asked (admin gate); nothing was written."""

    code = "unavailable"
    retryable = True


class RecoveryRefused(DomainError):
    """An operator action the protocol forbids in the migration's current state."""

    code = "failed_precondition"


class ConflictTokenMismatch(DomainError):
    """An update named a conflict token the schedule has moved past (someone changed it)."""

    code = "failed_precondition"


class StandbyNotPromoted(DomainError):
    """A replication standby may not act until it is promoted (domain/failover.py)."""

    code = "failed_precondition"


class UndecodableEvent(DomainError):
    """A stored event this code cannot read (unknown type, or a payload that does not fit)."""

    code = "undecodable_event"
