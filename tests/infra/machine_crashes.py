"""The state machine's crashes (tests/infra/test_state_machine.py): every boundary a crash can
be armed at, and the hook that raises there once."""
from __future__ import annotations

BOUNDARIES = tuple(f"{label}.{when}" for label in
                   ("rollback", "claim", "answer", "chain", "close", "rearm", "abort")
                   for when in ("before_append", "after_append")) + tuple(
    f"{call}.{when}" for call in ("start", "describe", "settle", "settle_deleted")
    for when in ("before_call", "after_call")) + (
    "settle.before_append", "before_tick_save", "after_tick_save", "after_start_call") + tuple(
    f"forward.{step}.{when}" for step in ("fence", "create", "delete", "complete")
    for when in ("before_append", "after_append"))


class SimulatedCrash(Exception):
    pass


class ArmedCrash:
    """Raises once at the armed boundary; disarmed after the next service call either way."""

    def __init__(self) -> None:
        self.point: str | None = None

    def __call__(self, point: str) -> None:
        if point == self.point:
            self.point = None
            raise SimulatedCrash(point)
