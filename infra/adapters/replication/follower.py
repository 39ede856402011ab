"""Replication to a standby store: a follower that copies the notification log in order.

The follower reads the source's notification log after its tracked position and appends the
same stored events (originator id and version, topic, state bytes: copied verbatim, never
decoded or re-encoded) to the standby, with the new position in the same transaction
(``replica_store``). Hence exactly once and resumable after a crash at any point.

The active store is the *primary* in the code (``--from``, and "source" in messages and in the
report's fields, which stay as users read them).

What the standby's tracking row names is the source *log*, not its URL: ``replica-of:`` and a
digest of the source's first stored event. Before copying, the follower proves that the standby
is its own and that the source continues what was copied:

- a standby with events but no tracking row was written by someone else: refused;
- a tracking row for another log: refused;
- the source must hold the tracked position, and that event must be byte-identical to the
  standby's last event (otherwise the source lost events, e.g. a restored backup, or the
  standby was written after the copy): refused.

Source notification ids may have holes (on PostgreSQL a rolled-back insert consumes ids); the
position is the last *copied* source id, so holes are simply passed over.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import time
from dataclasses import asdict, dataclass, field
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from eventsourcing.persistence import IntegrityError, PersistenceError, StoredEvent, Tracking

from schedfence.domain.errors import DomainError, InvalidArgument
from schedfence.domain.text import error_line
from schedfence.infra.pacing import linear, retry_call
from schedfence.infra.adapters.replication import BATCH
from schedfence.infra.adapters.store.pg import StoreUnavailable
from schedfence.infra.adapters.replication.primary import primary_reader
from schedfence.domain.ports import CrashHook
from schedfence.infra.adapters.replication.standby import PREFIX, Standby, StandbyChanged, standby_recorder
from schedfence.infra.adapters.store.eventstore import (FenceApplication, StoreURL, event_table,
                                               holds_event_log, open_application,
                                               parse_store_url)

CONFLICT_RETRIES = 3  # re-validations after a conflict before giving up
OPEN_RETRIES = 3


class ReplicationRefused(DomainError):
    """The standby is not this source's follower, or the source does not continue it."""

    code = "failed_precondition"


@dataclass
class ReplicationReport:
    source: str  # redacted URLs
    standby: str
    source_log: str | None = None  # the tracking name: which log the standby copies
    copied: int = 0
    batches: int = 0
    from_position: int = 0  # source notification id copied last, before this run
    position: int = 0  # ... and now
    source_head: int = 0  # the source's last notification id when last looked at
    seconds: float = 0.0
    started: float = field(default_factory=time.monotonic, repr=False)

    @property
    def caught_up(self) -> bool:
        return self.position >= self.source_head

    @property
    def rate(self) -> float:
        return self.copied / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc.pop("started")
        doc.update(caught_up=self.caught_up, events_per_second=round(self.rate, 1),
                   seconds=round(self.seconds, 3))
        return doc


def log_name(first: Any) -> str:
    """The tracking name of a source log: a digest of its first stored event."""
    digest = hashlib.sha256()
    for part in (str(first.originator_id), str(first.originator_version), first.topic):
        digest.update(part.encode() + b"\0")
    digest.update(bytes(first.state))
    return f"{PREFIX}{digest.hexdigest()[:24]}"


def _stored(page: Sequence[Any]) -> tuple[list[StoredEvent], int]:
    """The page's stored events, verbatim, and its last source notification id."""
    return [StoredEvent(n.originator_id, n.originator_version, n.topic, n.state)
            for n in page], page[-1].id


def _same(a: Any, b: Any) -> bool:
    return (a.originator_id, a.originator_version, a.topic, bytes(a.state)) == \
        (b.originator_id, b.originator_version, b.topic, bytes(b.state))


class ReplicationFollower:
    """Copies ``primary``'s log (the active store) into ``standby``. One instance, one thread."""

    def __init__(self, primary: FenceApplication, standby: FenceApplication, *,
                 primary_label: str = "source", standby_label: str = "standby",
                 batch_size: int = BATCH, hook: CrashHook | None = None) -> None:
        if batch_size < 1:
            raise InvalidArgument("batch size must be at least 1")
        self.primary, self.standby = primary, standby
        self.labels = (primary_label, standby_label)
        self.batch_size = batch_size
        self.hook = hook or (lambda point: None)
        with self._on("standby"):
            self.recorder: Standby = standby_recorder(standby)
        self.reader = primary_reader(primary)
        self.name: str | None = None
        self.position = 0  # last source notification id copied
        self.tail = 0  # the standby's last notification id, as this follower left it

    @contextmanager
    def _on(self, side: str) -> Iterator[None]:
        """Persistence failures become one clear line naming the store without password."""
        try:
            yield
        except (PersistenceError, OSError) as exc:
            if isinstance(exc, IntegrityError):
                raise
            label = self.labels[0] if side == "source" else self.labels[1]
            raise StoreUnavailable(f"{side} store {label}: {error_line(exc)}") from None

    # -- proving the standby is ours and the source continues it -----------------------------
    def prepare(self) -> None:
        """Load the position and check the standby against the source (refusing if not)."""
        with self._on("standby"):
            tracked = self.recorder.tracked()
            tail = self.standby.recorder.max_notification_id() or 0
        with self._on("source"):
            first = self.primary.recorder.select_notifications(start=None, limit=1)
        primary_name = log_name(first[0]) if first else None
        if len(tracked) > 1:
            raise ReplicationRefused(f"the standby {self.labels[1]} tracks several sources "
                                     f"({', '.join(sorted(tracked))}); it must have one")
        if not tracked:
            if tail:
                raise ReplicationRefused(
                    f"the standby {self.labels[1]} already holds events (its log ends at "
                    f"#{tail}) that were not copied from {self.labels[0]}: a standby must be "
                    "written only by its follower; use an empty store")
            self.name, self.position, self.tail = primary_name, 0, 0
            return
        (name, position), = tracked.items()
        if name != primary_name:
            raise ReplicationRefused(
                f"the standby {self.labels[1]} copies another log ({name}), not "
                f"{self.labels[0]} ({primary_name or 'empty'})")
        self._check_continues(position, tail)
        self.name, self.position, self.tail = name, position, tail

    def _check_continues(self, position: int, tail: int) -> None:
        with self._on("source"):
            at = self.primary.recorder.select_notifications(start=position, limit=1)
            head = self.primary.recorder.max_notification_id() or 0
        if not at or at[0].id != position:
            raise ReplicationRefused(
                f"the source's log does not continue what was copied: the standby holds "
                f"source events up to #{position}, but {self.labels[0]} has no event "
                f"#{position} (its log ends at #{head}); was the source restored from an "
                "older backup?")
        with self._on("standby"):
            last = self.standby.recorder.select_notifications(start=tail, limit=1)
        if not last or not _same(last[0], at[0]):
            raise ReplicationRefused(
                f"the standby {self.labels[1]} holds events not copied from "
                f"{self.labels[0]}: its last event #{tail} is not source event #{position}; "
                "a standby must be written only by its follower")

    # -- copying -------------------------------------------------------------------------------
    def copy_batch(self, stop_at: int | None = None) -> int:
        """Copy the next whole source transactions (at most up to source id ``stop_at``) in
        one standby transaction; returns the number of events copied."""
        with self._on("source"):
            pages = self.reader.pages(self.position, self.batch_size, stop_at)
            first = next(pages, None)
            if first is not None and self.name is None:  # the source was empty at prepare
                self.name = log_name(first[0])
        if first is None:
            return 0
        self.hook("batch.before_insert")
        with self._on("standby"):  # a SQLite source's pages are read inside the transaction
            written = self.recorder.insert_unit(
                self._labelled(itertools.chain([first], pages)), self.name or "", self.tail,
                before_commit=lambda: self.hook("batch.before_commit"))
        self.position, self.tail = written.position, written.tail
        self.hook("batch.after_commit")
        return written.count

    def _labelled(self, pages: Iterator[Sequence[Any]]) -> Iterator[tuple[list, int]]:
        """The pages as stored events; a failure to read one names the source."""
        while True:
            with self._on("source"):
                page = next(pages, None)
            if page is None:
                return
            yield _stored(page)

    def _copy_batch_or_revalidate(self, stop_at: int | None) -> int:
        """A conflict may be our own commit whose reply was lost, or a second follower of the
        same source: validating again tells those (continue) from a foreign writer (refuse).
        An unavailable store is revalidated too, after a pause; the last one is raised."""
        def pause(exc: Exception, attempt: int) -> float:
            return 0.2 * attempt if isinstance(exc, StoreUnavailable) else 0.0
        try:
            return retry_call(lambda: self.copy_batch(stop_at), attempts=CONFLICT_RETRIES + 1,
                              retry_on=(StandbyChanged, IntegrityError, StoreUnavailable),
                              before_retry=lambda exc, attempt: self.prepare(), pause=pause)
        except (StandbyChanged, IntegrityError) as exc:
            raise ReplicationRefused(f"the standby {self.labels[1]} keeps changing "
                                     f"under this follower: {exc}") from None

    def run(self, report: ReplicationReport, *, stop_at: int | None = None,
            on_batch: Callable[[ReplicationReport], None] | None = None) -> ReplicationReport:
        """Copy until caught up with the source's head as seen now (or ``stop_at``)."""
        with self._on("source"):
            head = self.primary.recorder.max_notification_id() or 0
        target = head if stop_at is None else min(head, stop_at)
        report.source_head = head
        while self.position < target:
            copied = self._copy_batch_or_revalidate(stop_at)
            if not copied:
                break  # only holes left before the head
            report.copied += copied
            report.batches += 1
            report.position = self.position
            # A batch may reach past the head read above (events written meanwhile).
            report.source_head = max(report.source_head, self.position)
            report.seconds = time.monotonic() - report.started
            if on_batch is not None:
                on_batch(report)
        report.position, report.source_log = self.position, self.name
        report.seconds = time.monotonic() - report.started
        return report


# -- opening both sides --------------------------------------------------------------------
def _same_store(a: StoreURL, b: StoreURL) -> bool:
    if a.pg is not None and b.pg is not None:
        return (a.pg.hosts, a.pg.dbname, a.pg.schema) == (b.pg.hosts, b.pg.dbname, b.pg.schema)
    if a.kind == b.kind == "sqlite-file":
        return os.path.realpath(a.path) == os.path.realpath(b.path)
    return False


def _require_primary_log(url: StoreURL) -> None:
    """Reading must not create: a source that has no event log is a wrong URL."""
    if holds_event_log(url):
        return
    if url.pg is None:
        raise InvalidArgument(f"source store {url.redacted} does not exist")
    raise InvalidArgument(f"source store {url.redacted} holds no event log "
                          f"(no table {url.pg.schema}.{event_table()})")


def _open(url: StoreURL, role: str) -> FenceApplication:
    # Opening re-runs eventsourcing's DDL; two processes opening one PostgreSQL store at once
    # can collide in the catalog. Opening again is harmless.
    return retry_call(lambda: _open_once(url, role), attempts=OPEN_RETRIES,
                      retry_on=StoreUnavailable,
                      retry_if=lambda exc: "concurrently" in exc.message, pause=linear(0.1))


def _open_once(url: StoreURL, role: str) -> FenceApplication:
    try:
        return open_application(url)
    except DomainError:
        raise
    except Exception as exc:  # e.g. a file that is not a SQLite database
        raise InvalidArgument(f"cannot open the {role} store {url.redacted}: "
                              f"{error_line(exc)}") from None


def parse_pair(primary: str, standby: str) -> tuple[StoreURL, StoreURL]:
    src, dst = parse_store_url(primary), parse_store_url(standby)
    for url, role in ((src, "source"), (dst, "standby")):
        if url.kind == "sqlite-memory":
            raise InvalidArgument(f"the {role} store {url.redacted} is in memory: it cannot "
                                  "outlive this process, so it cannot take part in failover")
    if _same_store(src, dst):
        raise InvalidArgument(f"source and standby are the same store ({src.redacted})")
    return src, dst


@contextmanager
def open_follower(primary: str, standby: str, *, batch_size: int = BATCH,
                  hook: CrashHook | None = None
                  ) -> Iterator[tuple[ReplicationFollower, ReplicationReport]]:
    """A prepared follower from ``primary`` to ``standby`` (URLs), closed afterwards."""
    src, dst = parse_pair(primary, standby)
    _require_primary_log(src)
    apps: list[FenceApplication] = []
    try:
        apps.append(_open(src, "source"))
        apps.append(_open(dst, "standby"))
        follower = ReplicationFollower(apps[0], apps[1], primary_label=src.redacted,
                                       standby_label=dst.redacted, batch_size=batch_size, hook=hook)
        follower.prepare()
        report = ReplicationReport(src.redacted, dst.redacted, follower.name,
                                   from_position=follower.position, position=follower.position)
        yield follower, report
    finally:
        for app in apps:
            app.close()


def replicate(primary: str, standby: str, *, stop_at: int | None = None,
              batch_size: int = BATCH, hook: CrashHook | None = None,
              on_batch: Callable[[ReplicationReport], None] | None = None) -> ReplicationReport:
    """Copy everything available now (or up to source id ``stop_at``) and return."""
    with open_follower(primary, standby, batch_size=batch_size, hook=hook) as (follower, report):
        return follower.run(report, stop_at=stop_at, on_batch=on_batch)


def follow(primary: str, standby: str, *, poll_interval: float = 1.0,
           batch_size: int = BATCH, should_stop: Callable[[], bool] = lambda: False,
           on_batch: Callable[[ReplicationReport], None] | None = None,
           on_error: Callable[[str], None] | None = None) -> ReplicationReport:
    """Keep copying until ``should_stop()`` (or KeyboardInterrupt in the caller).

    A store that cannot be reached is reported through ``on_error`` and retried on the next
    poll; a refusal ends the follower (it needs an operator)."""
    with open_follower(primary, standby, batch_size=batch_size) as (follower, report):
        while not should_stop():
            try:
                follower.run(report, on_batch=on_batch)
            except StoreUnavailable as exc:
                if on_error is None:
                    raise
                on_error(exc.message)
            time.sleep(poll_interval)
        return report


def open_copy(store: str) -> FenceApplication:
    """Another copy of a store, opened to read (``verify --also``): it must hold a log."""
    url = parse_store_url(store)
    _require_primary_log(url)
    return _open(url, "other")
