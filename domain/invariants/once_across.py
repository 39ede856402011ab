"""I21 across two copies of one store (``verify --also``): the starts a stale copy's source made
count with this store's.

A copy taken before a fence (an old active after a failover, a backup restored and run) shares
this store's log up to where it was taken; from there each went on alone. An event is the same
in both when its aggregate, version and timestamp are: the copy's own starts are the
``ActionStartIssued`` events this store does not hold (less those it recorded as refused). On
each source incarnation this store knows, they are judged with this store's starts and planned
ones, by the same oracle (exactly_once_log.py), and each is named where it is:

- a slot this store's source or its handover also started (``twice``);
- a time after this store handed the incarnation to the destination by proof (the handover's
  cursor): the destination owns it and starts it itself (its own ticks are not in the log);
- a time the schedule never owed.

An incarnation only the copy knows is the copy's own check's (``check_histories``).
"""
from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable, Iterator

from schedfence.domain.invariants.exactly_once import check_exactly_once
from schedfence.domain.invariants.exactly_once_log import Life, OnceLedger, fold_ledger
from schedfence.domain.invariants.violation import Violation
from schedfence.domain.source.action import parse_nominal

Ident = tuple[str, int, str]


def _ident(e: Any) -> Ident:
    return (str(getattr(e, "originator_id", "")), int(getattr(e, "originator_version", 0)),
            str(getattr(e, "timestamp", "")))


def once_across(mine: Iterable[tuple[int, Any]],
                theirs: Iterable[tuple[int, Any]]) -> list[Violation]:
    """The other copy's own starts judged with this store's (see the module doc): one
    violation per incarnation, naming its first time at fault."""
    seen: set[Ident] = set()

    def marked(events: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
        for pos, e in events:
            seen.add(_ident(e))
            yield pos, e
    ours = fold_ledger(marked(mine))
    other = fold_ledger(theirs, fresh=lambda e: _ident(e) not in seen)
    handed = _handed_at(ours)
    found = []
    for aid, life in other.lives.items():
        base = ours.lives.get(aid)
        extra = life.slots()[0]
        if base is None or not extra or aid in ours.unread or aid in other.unread:
            continue
        v = _judged(base, extra, handed.get(aid))
        if v is not None:
            found.append(v)
    return found


def _handed_at(ledger: OnceLedger) -> dict[str, tuple[datetime, str]]:
    """Per incarnation a rollback took by proof: its handover's cursor and the migration."""
    out: dict[str, tuple[datetime, str]] = {}
    for mid, h in ledger.handed.items():
        doc = h.get("handover")
        if "accepted" in h and isinstance(doc, dict) and doc.get("cursor"):
            try:
                out[h["source_id"]] = (parse_nominal(doc["cursor"]), mid)
            except ValueError:
                continue
    return out


def _judged(base: Life, extra: list[tuple[datetime, str]],
            handed: tuple[datetime, str] | None) -> Violation | None:
    source, planned = base.slots()
    together = source + extra
    until = max(t for t, _ in together + planned)
    owed = base.owed(until)
    if owed is None:
        return None
    verdict = check_exactly_once(owed, together, planned)
    mine = {t for t, _ in extra}
    faults = [(t, "twice") for t in verdict.twice if t in mine] + \
        [(t, "unexpected") for t in verdict.unexpected if t in mine]
    if handed is not None:
        faults += [(t, "handed") for t in mine if t > handed[0]]
    if not faults:
        return None
    t, how = min(faults)
    origins = ", ".join(sorted({o for s, o in extra if s == t}))
    what = {"twice": "and by this store (started twice)",
            "unexpected": "though the schedule never owed it",
            "handed": f"after this store handed the schedule to the destination at "
                      f"{handed[0].isoformat() if handed else ''}: the destination starts "
                      "it (started twice)"}[how]
    times = sorted({s for s, _ in faults})
    return Violation("I21", handed[1] if handed and how == "handed" else "", (),
                     f"{base.key[0]}/{base.key[1]} incarnation {base.incarnation}: nominal time "
                     f"{t.isoformat()} ({origins}) started by the other store's source {what}; "
                     f"{len(times)} such time(s) in all")
