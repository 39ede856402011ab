"""Steps and checks shared by the failure-mode tests (test_failure_modes.py and
test_failure_modes_f6_f11.py): the event paths a migration takes, an accepted rollback,
and what a kept or a migrated source looks like."""
from __future__ import annotations

from schedfence.domain.source.schedule import MIGRATION_NOTE

from tests.helpers import NS, SID, World

CREATED_PATH = ["RequestIdAssigned", "StartClaimConsumed", "DestinationStartIssued",
                "DestinationAnswered", "OwnershipAccepted", "SourceClosed"]
CLAIM = ["RequestIdAssigned", "StartClaimConsumed", "DestinationStartIssued"]
FOREIGN_PARK = CLAIM + ["DestinationAnswered", "ChainVerified", "MigrationParked"]


def accepted(w: World, request_id: str | None = "R1", notes: str = "pre", paused: bool = False):
    w.service.create_schedule(NS, SID, paused=paused, notes=notes)
    return w.service.rollback(NS, SID, request_id)


def assert_source_kept(w: World) -> None:
    """Parked: the source is neither closed nor released; its schedule still exists."""
    view = w.service.schedule(NS, SID)
    assert (view.closed, view.migration_pending, view.paused, view.notes) == (
        False, True, True, MIGRATION_NOTE)
    assert [s.schedule_id for s in w.service.list_schedules()] == [SID]


def assert_closed_by_migration(w: World) -> None:
    view = w.service.schedule(NS, SID)
    assert (view.closed, view.close_reason, view.migration_pending) == (True, "migrated", False)
    assert w.service.migration(NS, SID).state == "completed"


def verdicts(w: World) -> list[str]:
    return [e.data["verdict"] for e in w.migration_entries() if e.type.endswith("ChainVerified")]
