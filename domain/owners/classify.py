"""The ownership audit's one decision: for one key, what the store's history says
(``StoreSays``) beside what the Temporal namespace holds now (``AtDestination``), one row:
who runs it now, the migration that decided it, and the drift, if any. Pure: no I/O.

Owners: ``source`` (the store's scheduler), ``temporal`` (a Temporal Schedule), ``none``.
Kinds (docs/operators.md, "Ownership audit"):

- ``missing_at_destination``: handed over to Temporal, and Temporal has no schedule there
  (deleted by hand);
- ``two_owners``: the source runs it (open, unpaused) and so does a Temporal schedule
  (unpaused);
- ``unexplained_at_destination``: a Temporal schedule at a key whose history says the source
  owns it (one of the two paused) or it was closed;
- ``changed_at_destination``: handed over, and the schedule's spec or action is not what was
  handed over (only known from a describe, ``--deep``): informational;
- ``foreign_handover``: a Temporal schedule carrying this project's handover memo at a key
  the store never knew: another store handed it over, or this store was lost or restored
  from before the handover; nobody here can prove who owns it;
- ``native``: a Temporal schedule at a key the store never knew, with no handover memo: not
  drift;
- ``none``: as the store says (also while a migration is in flight, ``moving``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import ValidationError

from schedfence.domain.source.action import StartWorkflowAction
from schedfence.domain.source.spec import ScheduleSpec

Owner = Literal["source", "temporal", "none"]
OWNERS: tuple[str, ...] = get_args(Owner)
Kind = Literal["none", "native", "missing_at_destination", "two_owners",
               "unexplained_at_destination", "changed_at_destination", "foreign_handover"]
KINDS: tuple[str, ...] = get_args(Kind)
# Drift that fails an audit (exit 1); ``changed_at_destination`` only informs.
FAILING: tuple[str, ...] = ("missing_at_destination", "two_owners", "unexplained_at_destination",
                             "foreign_handover")
DRIFT: tuple[str, ...] = FAILING + ("changed_at_destination",)
# What the store's history says of a key: its source runs it, it was handed over to Temporal,
# it was closed (deleted), or a migration of it is in flight.
Stand = Literal["source", "temporal", "closed", "moving"]


@dataclass(frozen=True)
class StoreSays:
    """One key as its history leaves it. ``migration_id``: the migration that decided the
    stand (None: none did); ``handover``: what a completed rollback handed over (its ``spec``
    and ``action`` documents), for ``changed_at_destination``."""

    stand: Stand
    paused: bool = False
    migration_id: str | None = None
    handover: dict[str, Any] | None = None


@dataclass(frozen=True)
class AtDestination:
    """A Temporal schedule at the key, as listed or described. ``next_run``: its next action
    time (RFC 3339, None: none); ``program``: its ``spec`` and ``action`` documents, known
    only from a describe (None: not described); ``handed_over``: it carries this project's
    handover memo (a rollback of some store created it)."""

    paused: bool = False
    next_run: str | None = None
    program: dict[str, Any] | None = None
    handed_over: bool = False


@dataclass(frozen=True)
class OwnerRow:
    schedule_id: str
    owner: Owner
    store: str  # the store's stand, or "unknown" for a key it never knew
    migration_id: str | None
    kind: Kind
    next_run: str | None = None

    def to_list(self) -> list[str]:
        """The row as recorded (audit.py's ``ROW_FIELDS`` order; "" for None)."""
        return [self.schedule_id, self.owner, self.store, self.migration_id or "", self.kind,
                self.next_run or ""]

    @classmethod
    def of_list(cls, row: list[str]) -> OwnerRow:
        sid, owner, store, mid, kind, next_run = row
        return cls(sid, owner, store, mid or None, kind, next_run or None)  # type: ignore[arg-type]  # recorded from these Literals

    def to_dict(self) -> dict[str, Any]:
        return {"schedule_id": self.schedule_id, "owner": self.owner, "store": self.store,
                "migration_id": self.migration_id, "kind": self.kind,
                "next_run": self.next_run}


def store_says(key: dict[str, Any], source: dict[str, Any] | None) -> StoreSays | None:
    """A key's stand from its folded key state (``forward_migration_id``) and its current
    source's folded state (None: no incarnation yet). None: the store holds no schedule there."""
    if key.get("forward_migration_id"):
        return StoreSays("moving", migration_id=key["forward_migration_id"])
    if source is None:
        return None
    if source.get("fence_migration_id"):
        return StoreSays("moving", True, source["fence_migration_id"])
    if source.get("closed"):
        reason = source.get("close_reason")
        if reason == "migrated":
            return StoreSays("temporal", migration_id=source.get("completed_migration_id"))
        if reason == "takeover_abandoned":  # a forward given up: Temporal's stays its own
            return StoreSays("temporal", migration_id=source.get("last_migration_id"))
        return StoreSays("closed", migration_id=source.get("last_migration_id"))
    return StoreSays("source", bool(source.get("paused")),
                     source.get("completed_migration_id"))


def classify(schedule_id: str, store: StoreSays | None,
             dest: AtDestination | None) -> OwnerRow:
    """The row of one key (at least one of ``store`` and ``dest`` is known)."""
    if store is None:
        if dest is None:
            raise ValueError(f"{schedule_id}: neither the store nor Temporal knows it")
        return OwnerRow(schedule_id, "temporal", "unknown", None, unknown_key_kind(dest),
                        dest.next_run)
    mid = store.migration_id
    if store.stand == "moving":
        owner: Owner = "source" if dest is None else "temporal"
        return OwnerRow(schedule_id, owner, "moving", mid, "none", _next(owner, dest))
    if store.stand == "temporal":
        if dest is None:
            return OwnerRow(schedule_id, "none", "temporal", mid, "missing_at_destination")
        kind: Kind = "changed_at_destination" if changed(store.handover, dest.program) \
            else "none"
        return OwnerRow(schedule_id, "temporal", "temporal", mid, kind, dest.next_run)
    if dest is None:
        return OwnerRow(schedule_id, "source" if store.stand == "source" else "none",
                        store.stand, mid, "none")
    if store.stand == "source" and not store.paused and not dest.paused:
        return OwnerRow(schedule_id, "source", "source", mid, "two_owners", dest.next_run)
    runs: Owner = "temporal" if not dest.paused else \
        "source" if store.stand == "source" else "none"
    return OwnerRow(schedule_id, runs, store.stand, mid, "unexplained_at_destination",
                    dest.next_run)


def unknown_key_kind(dest: AtDestination) -> Kind:
    """A Temporal schedule at a key the store never knew: ``native`` (made on Temporal), or
    ``foreign_handover`` when it carries our handover memo (a store handed it over that is not
    this one, or this one as it was before it was lost or restored)."""
    return "foreign_handover" if dest.handed_over else "native"


def _next(owner: str, dest: AtDestination | None) -> str | None:
    return dest.next_run if owner == "temporal" and dest is not None else None


def changed(handover: dict[str, Any] | None, program: dict[str, Any] | None) -> bool:
    """Whether a described program's spec or action differs from what was handed over
    (False when either is unknown: nothing to compare)."""
    if handover is None or program is None:
        return False
    for name, model in (("spec", ScheduleSpec), ("action", StartWorkflowAction)):
        given, found = handover.get(name), program.get(name)
        if given is None or found is None:
            if given != found:
                return True
            continue
        try:
            if model.model_validate(given) != model.model_validate(found):
                return True
        except ValidationError:
            return True  # what Temporal holds is no program the source could hand over
    return False


def needs_describe(store: StoreSays | None, listed: AtDestination | None) -> bool:
    """Whether a listing's row claims drift, so a describe must confirm it (listings lag)."""
    if store is None:
        return listed is not None and listed.handed_over
    row = classify("", store, listed)
    return row.kind in FAILING


def counts(rows: list[OwnerRow]) -> dict[str, dict[str, int]]:
    """Rows by owner and by kind (every owner and kind, zeros included)."""
    by_owner, by_kind = dict.fromkeys(OWNERS, 0), dict.fromkeys(KINDS, 0)
    for row in rows:
        by_owner[row.owner] += 1
        by_kind[row.kind] += 1
    return {"owner": by_owner, "kind": by_kind}


def failing(by_kind: dict[str, int]) -> int:
    """How many rows hold drift that fails the audit."""
    return sum(by_kind.get(k, 0) for k in FAILING)
