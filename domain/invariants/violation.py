"""One finding of the invariant checker (domain/invariants/checker.py and its ledgers)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Violation:
    invariant: str
    migration_id: str
    positions: tuple[int, ...]
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"invariant": self.invariant, "migration_id": self.migration_id,
                "positions": list(self.positions), "message": self.message}
