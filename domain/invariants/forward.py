"""The checker's rules for forward migrations (domain/forward/aggregate.py), over the same event log:

- I19, no ping-pong: a migration of a key begins only once the key's migration the other way
  has closed its old owner. A forward migration is never requested while a rollback holds the
  key's source, nor a second one while one is open; a rollback never fences a source while a
  forward migration of its key is open.
- I20, the source takes over only with proof: it is created (dormant) only after the fence
  applied on the Temporal side, and released only after the Temporal schedule's delete was
  issued (or an operator confirmed a delete that raced the handoff); each source-side event
  lands with its migration's, in one append; the cursor it resumes after is the one the
  recorded boundary proves (domain/forward/boundary.py).
"""
from __future__ import annotations

from typing import Any, Callable

from schedfence.domain.forward.aggregate import ForwardMigration as F
from schedfence.domain.forward.aggregate import ForwardState, evolve_forward
from schedfence.domain.forward.boundary import boundary_cursor
from schedfence.domain.source.schedule import Schedule as S

Flag = Callable[[str, str, list[int], str], None]
_PAIRS = (("SourceCreated", "CreatedByMigration"), ("ForwardCompleted", "OwnershipTaken"),
          ("ForwardAborted+source", "TakeoverAbandoned"))


class ForwardLedger:
    def __init__(self, flag: Flag) -> None:
        self.flag = flag
        self.states: dict[str, ForwardState] = {}
        self.open_by_key: dict[tuple[str, str], str] = {}
        self.rollback_open: dict[tuple[str, str], str] = {}
        self.at: dict[tuple[str, str], int] = {}  # (migration id, step) -> position

    def forward_event(self, pos: int, e: Any) -> None:
        mid = str(e.originator_id)
        before = self.states.get(mid)
        try:
            st = self.states[mid] = evolve_forward(before, e)
        except Exception as exc:  # the reducer must be total over stored histories
            self.flag("I0", mid, [pos], f"forward reducer refused {type(e).__name__}: {exc}")
            return
        key = (st.namespace, st.schedule_id)
        if isinstance(e, F.ForwardRequested):
            self._requested(pos, mid, key)
        elif isinstance(e, F.TemporalFenced):
            self._cursor_proven(pos, mid, before, e)
        elif isinstance(e, F.SourceCreated):
            if before is None or before.phase != "fenced":
                self.flag("I20", mid, [pos], "source created before the fence applied on the "
                          "Temporal side")
            self.at[(mid, "SourceCreated")] = pos
        elif isinstance(e, F.ForwardCompleted):
            raced = before is not None and before.phase == "parked" and \
                before.park_reason == "deleted_elsewhere"
            if before is None or not (before.phase == "delete_issued" or raced):
                self.flag("I20", mid, [pos], "completed before the Temporal schedule's delete "
                          "was issued")
            self.at[(mid, "ForwardCompleted")] = pos
        elif isinstance(e, F.ForwardAborted) and st.source_id is not None:
            self.at[(mid, "ForwardAborted+source")] = pos
        if not st.is_open and st.phase != "parked" and self.open_by_key.get(key) == mid:
            del self.open_by_key[key]

    def _cursor_proven(self, pos: int, mid: str, before: ForwardState | None, e: Any) -> None:
        """The cursor handed over is the one the recorded boundary proves (v2 events): the
        last time the server was seen to have started, never when it applied the pause."""
        if e.boundary is None or before is None or not e.handover.get("spec"):
            return
        proven = boundary_cursor(e.boundary, bool(before.pre_paused))
        if e.handover.get("cursor") != proven:
            self.flag("I20", mid, [pos], f"handed over cursor {e.handover.get('cursor')}, but "
                      f"what the server was seen to start proves {proven}")

    def _requested(self, pos: int, mid: str, key: tuple[str, str]) -> None:
        if key in self.rollback_open:
            self.flag("I19", mid, [pos], f"forward migration of {key[0]}/{key[1]} requested "
                      f"while rollback {self.rollback_open[key]} held its source")
        if key in self.open_by_key:
            self.flag("I19", mid, [pos], f"second forward migration of {key[0]}/{key[1]} "
                      f"while {self.open_by_key[key]} was open")
        self.open_by_key[key] = mid

    def source_event(self, pos: int, key: tuple[str, str], e: Any) -> None:
        if isinstance(e, S.FencedForMigration):
            if key in self.open_by_key:
                self.flag("I19", e.migration_id, [pos], f"rollback fenced {key[0]}/{key[1]} "
                          f"while forward migration {self.open_by_key[key]} was open")
            self.rollback_open[key] = e.migration_id
        elif isinstance(e, (S.ClosedByMigration, S.FenceReleased)):
            self.rollback_open.pop(key, None)
        elif isinstance(e, S.CreatedByMigration):
            self.at[(e.migration_id, "CreatedByMigration")] = pos
        elif isinstance(e, S.OwnershipTaken):
            self.at[(e.migration_id, "OwnershipTaken")] = pos
        elif isinstance(e, S.TakeoverAbandoned):
            self.at[(e.migration_id, "TakeoverAbandoned")] = pos

    def finish(self) -> None:
        for mid in self.states:
            for ours, theirs in _PAIRS:
                a, b = self.at.get((mid, ours)), self.at.get((mid, theirs))
                if (a is None) != (b is None):
                    self.flag("I20", mid, [p for p in (a, b) if p is not None],
                              f"{ours} and {theirs} not recorded together")
