"""What the overview pages show, built from the application service's reads alone: the summary
counts, the schedules table (paged, filtered, with who runs each schedule now), the jobs, and
links into Temporal's Web UI. Nothing here calls Temporal or writes.

The owner column comes from ``owners_now`` alone: the store's history
(``projections.key_table.owner_of``) overlaid by each namespace's last ownership audit where it
still describes the key (``with_audits``: the audit's owner, Temporal's own next run, the
drift); the table, its filter and the counts all show it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import quote, urlencode, urlsplit

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.text import validate_id
from schedfence.projections.key_table import (NO_MIGRATION, OWNERS, STATES, Key, KeyRow,
                                              Owner, TablePage, TableQuery, owner_counts,
                                              owner_of, table_page, with_audits)
from schedfence.domain.direction import DIRECTIONS

from schedfence.infra.application import jobs
from schedfence.infra.application.service import MigrationService

MAX_UNFINISHED = 500  # a job's unfinished schedules listed on its page


@dataclass(frozen=True)
class TemporalUI:
    """Links into Temporal's Web UI at ``base`` (None: no links)."""

    base: str | None = None

    @classmethod
    def at(cls, base: str | None) -> TemporalUI:
        """``base`` checked: an http(s) URL with a host, no query or fragment."""
        if not base:
            return cls(None)
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query \
                or parts.fragment:
            raise InvalidArgument(f"Temporal Web UI URL {base[:100]!r} must be http(s)://HOST"
                                  "[:PORT][/PATH], e.g. http://localhost:8233")
        return cls(base.rstrip("/"))

    def _at(self, namespace: str, *path: str) -> str | None:
        if self.base is None:
            return None
        return "/".join([self.base, "namespaces", quote(namespace, safe="")] +
                        [quote(p, safe="") for p in path])

    def schedule(self, namespace: str, schedule_id: str) -> str | None:
        return self._at(namespace, "schedules", schedule_id)

    def workflow(self, namespace: str, workflow_id: str) -> str | None:
        return self._at(namespace, "workflows", workflow_id)

    def scheduled_by(self, namespace: str, schedule_id: str) -> str | None:
        """The workflows a Temporal Schedule started (its ``TemporalScheduledById``)."""
        at = self._at(namespace, "workflows")
        return None if at is None else at + "?" + urlencode(
            {"query": f'TemporalScheduledById="{schedule_id}"'})


def _int(params: Mapping[str, str], name: str, default: int) -> int:
    raw = params.get(name) or ""
    if not raw:
        return default
    if not raw.isdigit() or len(raw) > 9:
        raise InvalidArgument(f"{name} {raw[:20]!r} is not a whole number")
    return int(raw)


def table_query(params: Mapping[str, str]) -> TableQuery:
    """The table's filters and page from the query string (refused: InvalidArgument)."""
    return TableQuery(state=params.get("state") or None,
                      direction=params.get("direction") or None,
                      key=params.get("key") or None, owner=params.get("owner") or None,
                      page=_int(params, "page", 1),
                      per_page=_int(params, "per_page", 100)).check()


@dataclass(frozen=True)
class Overview:
    counts: dict[str, dict[str, int]]  # direction -> state -> migrations
    owners: dict[str, int]  # owner -> schedules
    schedules: int
    table: TablePage
    query: TableQuery
    choices: dict[str, tuple[str, ...]]  # each filter's values

    def page_url(self, page: int) -> str:
        q = self.query
        params = {"state": q.state, "direction": q.direction, "key": q.key, "owner": q.owner,
                  "per_page": q.per_page if q.per_page != 100 else None, "page": page}
        shown = urlencode({k: v for k, v in params.items() if v not in (None, "")})
        return "/ui/?" + shown


def owners_now(service: MigrationService, rows: list[KeyRow]) -> dict[Key, Owner]:
    """The owner column: the store's history (``owner_of``), overlaid by the last ownership
    audit of each namespace where it still describes the key (``with_audits``)."""
    audits = [a for ns in sorted({row.namespace for row in rows})
              if (a := service.last_audit(ns)) is not None]
    return with_audits(owner_of(rows), rows, audits)


def schedules(service: MigrationService, q: TableQuery) -> Overview:
    rows = service.views.key_rows()
    owners = owners_now(service, rows)  # the one source of the owner column
    return Overview(service.views.migration_counts(), owner_counts(owners), len(rows),
                    table_page(rows, owners, q), q,
                    {"state": STATES, "direction": DIRECTIONS, "owner": OWNERS})


def one_key(service: MigrationService, namespace: str,
            schedule_id: str) -> tuple[KeyRow, Owner] | None:
    """The key's row and owner, as the schedules table shows them (None: no such key)."""
    rows = service.views.key_rows((namespace, schedule_id))
    return (rows[0], owners_now(service, rows)[rows[0].key]) if rows else None


def state_of(row: KeyRow) -> str:
    """The latest migration's state as the page names it: ``parked (reason)``, ``none``."""
    if row.state is None:
        return NO_MIGRATION
    return f"{row.state} ({row.park_reason})" if row.park_reason and row.state == "parked" \
        else row.state


# -- jobs -------------------------------------------------------------------------------------
def job_list(service: MigrationService) -> list[dict[str, Any]]:
    return jobs.list_jobs(service)


def job(service: MigrationService, job_id: str) -> dict[str, Any]:
    """A job's report, with its progress: how many of its decided schedules are finished."""
    doc = jobs.job_report(service, validate_id("job id", job_id))
    counts = doc["counts"]
    doc["finished"] = sum(counts.get(k, 0) for k in ("completed", "aborted"))
    doc["unfinished_total"] = len(doc["unfinished"])
    doc["unfinished"] = doc["unfinished"][:MAX_UNFINISHED]
    return doc
