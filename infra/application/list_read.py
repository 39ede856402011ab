"""``list`` from the read model: the page ``views.schedule_list`` builds (keys from the
projection, each key's current incarnation loaded from the log), built instead from the
operator projection's folded rows when every row it reads is at its aggregate's latest version
in the log, checked in the same read transaction, as ``status`` does (status_read.py). Then the
page is the log's as of that read: the same rows, in the same order, with the same cursor.

No event class, no SQLAlchemy, no eventsourcing: a few queries per page, the rows read in
chunks. Wherever the rows cannot answer (a row behind its aggregate or missing, a state with
other fields, a forward migration the rows do not fold, any error) it answers None and the
caller builds the page from the log as before: the same document, and the same errors."""
from __future__ import annotations

from typing import Any
from uuid import UUID

from schedfence.domain.ids import schedule_aggregate_id, schedule_key_id, validate_id
from schedfence.projections.cursors import encode_cursor, keys_after
from schedfence.projections.status_rows import KEY_CREATED, StatusRows

from schedfence.infra.application.status_read import STATE_FIELDS, Latest, Since, _rows, _status
from schedfence.infra.application.views import ScheduleView


def read_model_list(store: str, namespace: str | None, limit: int,
                    after: str | None) -> dict[str, Any] | None:
    """``schedule_list``'s page from the projection's rows, or None (then read the log)."""
    try:
        if namespace is not None:
            validate_id("namespace", namespace)
        after_position = None if after is None else keys_after(after)
        with _rows(store) as found:
            return None if found is None else _page(*found, namespace, limit, after_position)
    except Exception:  # noqa: BLE001 - the log's read names any problem, in its words
        return None


def _page(rows: StatusRows, latest: Latest, since: Since, namespace: str | None, limit: int,
          after_position: int | None) -> dict[str, Any] | None:
    if not rows.current_layout() or since(KEY_CREATED, rows.tracked_position()):
        return None  # the log holds a key the rows do not list yet
    created = rows.key_page(namespace, after_position, limit + 1)
    keys = [(ns, sid) for _, ns, sid in created[:limit]]
    key_ids = [str(schedule_key_id(ns, sid)) for ns, sid in keys]
    folded_keys = rows.folded_many(key_ids)
    if len(folded_keys) != len(keys):
        return None  # a key's creation indexed, its row not folded yet
    read: dict[UUID, int] = {UUID(k): folded_keys[k][0] for k in key_ids}
    current = {k: (ns, sid, folded_keys[kid][1]["incarnation"])
               for k, (kid, (ns, sid)) in enumerate(zip(key_ids, keys))}
    listed = [(ns, sid, n) for ns, sid, n in current.values() if n]  # keys with an incarnation
    ids = [str(schedule_aggregate_id(ns, sid, n)) for ns, sid, n in listed]
    schedules = rows.folded_many(ids)
    views = []
    for aid in ids:
        found = schedules.get(aid)
        if found is None or set(found[1]) != STATE_FIELDS:
            return None  # not folded yet, or by code whose state had other fields
        read[UUID(aid)] = found[0]
        views.append(ScheduleView.folded_dict(found[1], found[0]))
    states = _migration_states(rows, views, read)
    if states is None:
        return None
    older = [_older_state(rows, latest, v) for v in views if not v["migration_id"]]
    if latest(list(read)) != read or None in older:
        return None  # a row behind its aggregate: the projection has not applied it yet
    older_states = iter(older)
    for view in views:
        view["migration_state"] = states[view["migration_id"]] if view["migration_id"] \
            else next(older_states)[0]  # type: ignore[index]  # None in older: returned above
    more = len(created) > limit
    return {"schedules": views,
            "next_cursor": encode_cursor("schedules", created[limit - 1][0]) if more else None}


def _migration_states(rows: StatusRows, views: list[dict[str, Any]],
                      read: dict[UUID, int]) -> dict[str, str] | None:
    """Each listed incarnation's migration's state (None: one the rows do not hold)."""
    wanted = sorted({v["migration_id"] for v in views if v["migration_id"]})
    found = rows.migration_states(wanted)
    if len(found) != len(wanted):
        return None
    for mid, (version, _) in found.items():
        read[UUID(mid)] = version
    return {mid: state for mid, (_, state) in found.items()}


def _older_state(rows: StatusRows, latest: Latest,
                 view: dict[str, Any]) -> tuple[str | None] | None:
    """A listed incarnation with no migration shows its key's latest migration's state, as
    ``status`` does (status_read's own walk, checked against the log itself): wrapped in a
    tuple, or None where the rows cannot say."""
    if view["incarnation"] <= 1:
        return (None,)
    doc = _status(rows, latest, view["namespace"], view["schedule_id"])
    if doc is None:
        return None
    return (None if doc["migration"] is None else doc["migration"]["state"],)
