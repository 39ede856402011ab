"""The schedules a scheduler saw in its last passes (``SeenSchedules``), kept between them."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from uuid import UUID

from schedfence.domain.source.schedule import Schedule

SEEN = 50_000  # schedules kept between passes (SeenSchedules)


class SeenSchedules:
    """The schedules a scheduler saved or loaded in its last passes, as committed then (at
    most ``size``, the least recently used dropped): the next pass brings each up to date from
    the events stored after it (``load_many``'s ``known``) instead of folding its whole history
    again, which grows with every action. Stale is safe: every save is checked against the
    stored version. A batch that fails is forgotten (``forget``), since its schedules may hold
    unsaved facts; everything, when a pass fails. ``healthy``: whether the last pass that
    stepped anything stepped some schedule without failing (step_failures.py)."""

    def __init__(self, size: int = SEEN) -> None:
        self.size, self._seen = size, OrderedDict[UUID, Schedule]()
        self._watched: dict[UUID, datetime] = {}  # the last look that watched its runs
        self._in_use = threading.Lock()
        self.healthy = False

    @contextmanager
    def borrowed(self) -> Iterator[SeenSchedules]:
        """These, to one pass at a time: a pass run beside it (another thread of the same
        service, e.g. two HTTP requests) gets an empty set of its own, so no schedule object
        is ever in two passes' hands."""
        if not self._in_use.acquire(blocking=False):
            yield SeenSchedules(self.size)
            return
        try:
            yield self
        finally:
            self._in_use.release()

    def known(self, ids: list[UUID]) -> dict[UUID, Schedule]:
        return {i: self._seen[i] for i in ids if i in self._seen}

    def keep(self, sources: list[Schedule]) -> None:
        for source in sources:
            self._seen[source.id] = source
            self._seen.move_to_end(source.id)
        while len(self._seen) > self.size:
            self._watched.pop(self._seen.popitem(last=False)[0], None)

    def watched(self, schedule_id: UUID) -> datetime | None:
        """When a look of this scheduler last asked for the schedule's runs' statuses (None:
        not known; ``scheduling.watch_now`` then watches)."""
        return self._watched.get(schedule_id)

    def mark_watched(self, schedule_ids: list[UUID], at: datetime) -> None:
        self._watched.update((i, at) for i in schedule_ids)

    def forget(self, ids: list[str]) -> None:
        for aid in ids:
            self._seen.pop(UUID(aid), None)
            self._watched.pop(UUID(aid), None)

    def clear(self) -> None:
        self._seen.clear()
        self._watched.clear()
