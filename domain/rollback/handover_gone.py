"""A handover whose Temporal Schedule was deleted between the receipt and the settle.

The settle (infra/adapters/destination/temporal_schedule.py) starts the times at the handover's
boundary once the migration holds the receipt. If the schedule's user deletes it first, at
``deleted``, nothing will ever ask the server for them, yet they came before the delete: a
never-migrated schedule deleted at that instant would have started them. ``owed_before_delete``
names them, from what the closed scheduler workflow still shows (its create instant, its close
and the memo the create wrote): the same times the settle would have asked for
(``boundary_gap``; for a pinned handover ``pin_owed``, the late times and the carried patch),
but only those before the delete, since a schedule deleted at ``deleted`` starts nothing at or
after it. The worker starts each as a plain workflow at its action workflow id, under
``gone_request_id`` (docs/protocol.md, "A Temporal Schedule deleted by its user").
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from uuid import uuid5

from schedfence.domain.rollback.handover import (SECOND, Handover, _gap, boundary_gap,
                                                 carried_slots, pin_owed)
from schedfence.domain.source.spec import times_between, times_within
from schedfence.domain.ids import SCHEDFENCE_NAMESPACE


@dataclass(frozen=True)
class GoneOwed:
    """What a deleted destination still owes: the spec's boundary times (``spec``, started
    as the settle's ``auto`` times) and the carried patch's times (``carried``: a pinned
    handover's backfills in progress, buffered starts and trigger, which its settle would
    have sent), each before the delete, in order, each time once."""

    spec: tuple[datetime, ...] = ()
    carried: tuple[datetime, ...] = ()

    @property
    def times(self) -> list[datetime]:
        return sorted({*self.spec, *self.carried})


def owed_before_delete(h: Handover, gap_end: datetime, created: datetime,
                       pin: datetime | None, deleted: datetime,
                       cut_patch: bool = False) -> GoneOwed:
    """The times the settle of ``h`` owed (see the module doc) that fall before ``deleted``:
    ``gap_end`` and ``pin`` as the create's memo recorded them, ``created`` the instant the
    server's scheduler began. Unpinned: ``boundary_gap`` (the create's patch carried the
    rest). Pinned: every owed time before the pin, the late times from the pin to the create
    instant, and the carried patch, all of which the settle would have sent. ``cut_patch``
    (unpinned): the delete may have cut the create's patch, which the server's scheduler
    runs in its first workflow tasks before its own times, so its gap backfill's times, the
    carried patch and the spec's own times from the create to the delete are owed too (the
    caller leaves alone each whose id has a run: the server's)."""
    if h.action is None or h.spec is None or h.cursor is None:
        return GoneOwed()
    if pin is None:
        spec = boundary_gap(h, gap_end, created)
        carried: list[datetime] = []
        gap = _gap(h, gap_end)[0]
        if cut_patch:
            spec += [] if gap is None else times_within(h.spec, gap.start, gap.end)
            spec += [] if h.paused else times_between(h.spec, created, deleted)
            carried = [t for t, _ in carried_slots(h)]
    else:
        spec = pin_owed(h, pin) + boundary_gap(h, pin - SECOND, created)
        carried = [t for t, _ in carried_slots(h)]
    before = sorted({t for t in spec if t < deleted})
    return GoneOwed(tuple(before),
                    tuple(sorted({t for t in carried if t < deleted} - set(before))))


def gone_request_id(request_id: str, nominal: str) -> str:
    """The request id of the plain start of ``nominal`` (RFC 3339 UTC) for the migration whose
    request id is ``request_id``: the same on every retry, so the destination deduplicates a
    start repeated after a crash or an unknown outcome."""
    return str(uuid5(SCHEDFENCE_NAMESPACE, json.dumps(["gone", request_id, nominal])))
