"""``schedfence verify --against-destination``: the exactly-once oracle over what the server
itself holds (domain/invariants/exactly_once_log.py, ``listing_verdicts``).

The log says what each schedule key owed (its incarnations, programs, pauses, backfills,
triggers, a delete, the end a settle recorded for a destination deleted by hand); the
destination's ``ActionListing`` says what was started: every run at an action workflow id
``<workflow id>-<nominal time, RFC 3339 UTC, seconds, Z>``, the source's starts and the
destination schedule's alike. Each key is judged up to the instant it can be: ``lag`` before
the listing (a time just due may not have started, or not be listed, yet), and for a live
incarnation the source still runs, no later than its cursor. Times a listing can no longer
show (older than the namespace's retention) are not judged missing. The first time started
twice, never started, or started though never owed is named per key.

With ``also`` (another copy of the store), the copy's own starts are judged with this store's
as ``verify --also`` does (domain/invariants/once_across.py).
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.invariants.exactly_once import Verdict
from schedfence.domain.invariants.exactly_once_log import fold_ledger, listing_verdicts
from schedfence.domain.ports import (ActionListing, DestinationUnavailable, RetentionReader,
                                     command_error)
from schedfence.domain.text import validate_id

SHOWN = 20  # times listed per kind of fault and key (the counts say how many in all)
DEFAULT_LAG = 30.0  # seconds before the listing's instant that are not judged yet
HOW = {"twice": "started twice", "missing": "owed but never started",
       "unexpected": "started but never owed"}


def _now(dest: Any) -> datetime:
    clock = getattr(dest, "clock", None)  # the simulator's clock; a server's is the wall's
    return clock() if callable(clock) else datetime.now(timezone.utc)


def _floor(dest: Any, namespace: str, now: datetime) -> datetime | None:
    if not isinstance(dest, RetentionReader):
        return None
    return now - timedelta(seconds=dest.retention_seconds(namespace))


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def verify_against(service: Any, namespace: str | None = None, schedule_id: str | None = None,
                   also: str | None = None, lag: float = DEFAULT_LAG) -> dict[str, Any]:
    """The oracle's verdict per key against the destination's listing (see the module doc),
    as a JSON-ready document; ``ok`` False names the first time at fault."""
    for label, value in (("namespace", namespace), ("schedule id", schedule_id)):
        if value is not None:
            validate_id(label, value)
    if schedule_id is not None and namespace is None:
        raise InvalidArgument("--schedule needs --namespace")
    dest = service.destination
    if not isinstance(dest, ActionListing):
        raise InvalidArgument("the destination cannot list its action workflows (choose sim "
                              "or temporal://HOST:PORT/NAMESPACE)")
    from schedfence.infra.application.log_reads import _decoded
    ledger = fold_ledger(_decoded(service.app))

    def chosen(key: tuple[str, str]) -> bool:
        return (namespace is None or key[0] == namespace) and \
            (schedule_id is None or key[1] == schedule_id)
    lives = [lf for aid, lf in ledger.lives.items() if chosen(lf.key) and lf.prefix]
    now = _now(dest)
    until = now - timedelta(seconds=lag)
    verdicts: dict[tuple[str, str], tuple[Verdict, datetime]] = {}
    listed = 0
    try:
        for ns in sorted({lf.key[0] for lf in lives}):
            prefixes = sorted({lf.prefix for lf in lives if lf.key[0] == ns and lf.prefix})
            ids = dest.action_starts(ns, prefixes)
            listed += len(ids)
            floor = _floor(dest, ns, now)
            for key, (v, cut) in listing_verdicts(
                    ledger, ids, until, keys=lambda k: k[0] == ns and chosen(k)).items():
                missing = tuple(t for t in v.missing if floor is None or t >= floor)
                verdicts[key] = (Verdict(v.twice, missing, v.unexpected), cut)
    except DestinationUnavailable as exc:
        raise command_error(exc, "the listing of action workflows") from exc
    return _doc(verdicts, listed, until, namespace, schedule_id, _across(service, also))


def _across(service: Any, also: str | None) -> list[dict[str, Any]]:
    if also is None:
        return []
    from schedfence.domain.invariants.once_across import once_across
    from schedfence.infra.adapters.replication.follower import open_copy
    from schedfence.infra.application.log_reads import _decoded
    other = open_copy(also)
    try:
        return [v.to_dict() for v in once_across(_decoded(service.app), _decoded(other))]
    finally:
        other.close()


def _doc(verdicts: dict[tuple[str, str], tuple[Verdict, datetime]], listed: int,
         until: datetime, namespace: str | None, schedule_id: str | None,
         across: list[dict[str, Any]]) -> dict[str, Any]:
    bad = []
    for (ns, sid), (v, cut) in sorted(verdicts.items()):
        first = v.first
        if first is None:
            continue
        how, t = first
        bad.append({"namespace": ns, "schedule_id": sid, "how": how, "time": _iso(t),
                    "judged_until": _iso(cut),
                    **{k: [_iso(x) for x in getattr(v, k)[:SHOWN]]
                       for k in ("twice", "missing", "unexpected")},
                    "counts": {k: len(getattr(v, k)) for k in ("twice", "missing",
                                                               "unexpected")}})
    bad.sort(key=lambda b: (b["time"], b["namespace"], b["schedule_id"]))
    return {"ok": not bad and not across, "until": _iso(until), "namespace": namespace,
            "schedule_id": schedule_id, "schedules": len(verdicts), "listed": listed,
            "first": bad[0] if bad else None, "violations": bad, "across": across}


def against_lines(doc: dict[str, Any]) -> list[str]:
    """One line: OK, or the first time at fault; then one line per other fault."""
    scope = f"{doc['schedules']} schedule(s) judged up to {doc['until']}, " \
            f"{doc['listed']} start(s) listed"
    if doc["ok"]:
        return [f"against destination: OK ({scope})"]
    lines = []
    for i, b in enumerate(doc["violations"]):
        more = sum(b["counts"].values()) - 1
        text = f"{b['namespace']}/{b['schedule_id']}: nominal time {b['time']} " \
               f"{HOW[b['how']]}" + (f" (and {more} more)" if more else "")
        lines.append(f"against destination: {len(doc['violations'])} schedule(s) not "
                     f"exactly once ({scope}); first: {text}" if i == 0 else f"  {text}")
    lines += [("against destination: " if not lines else "  ") + "across the stores: " +
              v["message"] for v in doc["across"]]
    return lines
