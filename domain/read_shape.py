"""The read shape: a migration as every reader shows it (one set of names for the projection's
row, the service's view, the CLI and the JSON documents)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only annotated: a reader of stored rows (status) loads no event classes
    from schedfence.domain.rollback.aggregate import MigrationState


@dataclass(frozen=True)
class ReadShape:
    """A migration as every reader shows it: the projection's row, the service's view, the CLI
    and the JSON documents all extend this (one set of names). The reducer's own names differ
    where they read better in the rules: ``phase`` is ``state``, ``origin`` is
    ``request_id_origin``, ``receipt`` is ``destination_first_run_id``."""

    migration_id: str
    namespace: str
    schedule_id: str
    incarnation: int
    state: str
    request_id: str | None
    request_id_origin: str
    park_reason: str | None
    park_detail: str
    destination_first_run_id: str | None
    claim_armed: bool
    starts_issued: int
    attempts: int
    last_worker: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: every field of the reader's shape, the read shape's first."""
        return asdict(self)


READ_FIELDS = tuple(f.name for f in fields(ReadShape))
# Where the reducer's name differs: read shape name -> MigrationState field.
STATE_NAMES = {"state": "phase", "request_id_origin": "origin",
               "destination_first_run_id": "receipt"}


def read_shape(state: MigrationState) -> dict[str, Any]:
    """The read shape's fields of a migration state, by the read shape's names."""
    return {name: getattr(state, STATE_NAMES.get(name, name)) for name in READ_FIELDS}
