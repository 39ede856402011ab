"""The replay corpus: recorded event histories, and today's fold of them (Temporal's TestReplays).

A history file keeps every stored event exactly as the mapper stored it (topic, originator id
and version, log position, and the JSON state, whose bytes are ``JSONBytes.encode(state)``), so
an event written at an old schema version stays at that version. Beside them it keeps what the
code that recorded it derived: the folded state of the event's aggregate after every step, the
``next_step`` decision for migration states, and the invariant verdicts at each step.
``check`` re-decodes every event through the real mapper (so upcasting runs), re-folds with
today's reducers and checker, and lists every difference: a schema or reducer change that
breaks an old history shows up here.

``histories/`` holds histories recorded by today's code; ``histories/older_release/`` holds
histories recorded by the release before the create-id, failover-epoch and re-create rules
(issue 9). Their events stay exactly as that release stored them (old schema versions, upcast
on read); their expectations were re-derived once (``regenerate --refold``) when the checker
learnt to flag what those releases let through: chain-head receipts proved by an id that may
have been attached (I13), a source re-created over a running destination chain without
looking (I1), and a lost-tail second chain seen across two stores (I4, ``check_histories``).
"""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterable
from uuid import UUID

from eventsourcing.persistence import Notification

from schedfence.domain.rollback.decide import next_step
from schedfence.domain.forward.aggregate import ForwardMigration
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.model import upcast
from schedfence.domain.source.schedule import Schedule
from schedfence.infra.adapters.store.codec import JSONBytes, PydanticMapper
from schedfence.infra.application.replay.replayer import Folder, as_dict

FORMAT = 1
HISTORIES = Path(__file__).parent / "histories"
MAX_BYTES = 200_000
_CODEC = JSONBytes()
_AGGREGATES: dict[str, type] = {"schedule": Schedule, "migration": Migration,
                                "forward": ForwardMigration}


def record(notifications: Iterable[Any]) -> list[dict[str, Any]]:
    """Stored notifications → corpus events; refuses any whose bytes would not round-trip."""
    events = []
    for n in notifications:
        state = _CODEC.decode(n.state)
        if _CODEC.encode(state) != n.state:
            raise ValueError(f"event at position {n.id} is not canonical JSON; cannot record "
                             "it exactly")
        events.append({"position": n.id, "topic": n.topic, "originator_id": str(n.originator_id),
                       "originator_version": n.originator_version, "state": state})
    return events


def decode(events: list[dict[str, Any]]) -> list[tuple[int, Any]]:
    """Corpus events → (position, domain event), through the real mapper (upcasts run)."""
    mapper = PydanticMapper(transcoder=_CODEC)
    return [(e["position"], mapper.to_domain_event(Notification(
        id=e["position"], originator_id=UUID(e["originator_id"]),
        originator_version=e["originator_version"], topic=e["topic"],
        state=_CODEC.encode(e["state"])))) for e in events]


def fold_expectations(pairs: list[tuple[int, Any]]) -> dict[str, Any]:
    """What today's code derives from a history: per-step states, decisions and verdicts."""
    folder, steps = Folder(), []
    for position, event in pairs:
        f = folder.add(position, event)
        steps.append({
            "position": position, "aggregate": f.kind, "type": type(event).__name__,
            "state": as_dict(f.after),
            "next_step": next_step(f.after) if f.kind == "migration" and f.after else None,
            "error": f.error, "violations": [v.to_dict() for v in f.violations]})
    return {"steps": steps, "final_violations": [v.to_dict() for v in folder.finish()]}


def build(name: str, meta: dict[str, Any], notifications: Iterable[Any]) -> dict[str, Any]:
    events = record(notifications)
    return {"format": FORMAT, "name": name, **meta, "events": events,
            "expected": fold_expectations(decode(events))}


def dumps(doc: dict[str, Any]) -> str:
    # One event or step per line: small files, readable diffs when a history is regenerated.
    def lines(items: list[Any]) -> str:
        return "[\n" + ",\n".join("  " + json.dumps(i, sort_keys=True) for i in items) + "\n ]"
    head = {k: v for k, v in doc.items() if k not in ("events", "expected")}
    exp = doc["expected"]
    return ("{\n" + "".join(f" {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items())
            + f' "events": {lines(doc["events"])},\n'
            + f' "expected": {{"final_violations": {json.dumps(exp["final_violations"])},\n'
            + f' "steps": {lines(exp["steps"])}}}\n}}\n')


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def files() -> list[Path]:
    return sorted(HISTORIES.glob("*.json")) + sorted(HISTORIES.glob("older_release/*.json"))


def key(path: Path) -> str:
    """A history's name in the corpus: its path under ``histories/``."""
    return path.relative_to(HISTORIES).as_posix()


def refold(doc: dict[str, Any]) -> dict[str, Any]:
    """The same events with today's expectations (a deliberate, reviewed change)."""
    return {**doc, "expected": fold_expectations(decode(doc["events"]))}


ABSENT = (None, 0, False, "", [], {})


def recorded_state(aggregate: str, recorded: Any) -> Any:
    """A recorded state brought up to today's state schema by its aggregate's own snapshot
    hooks (``upcast_vN_vN+1``, as a snapshot's state is). A recording keeps no state version:
    each hook leaves a state already at its version as it is (the action kept whole, v2, is
    told from v1 by its fields)."""
    cls = _AGGREGATES.get(aggregate)
    if cls is None or not isinstance(recorded, dict):
        return recorded
    state = copy.deepcopy(recorded)
    upcast(cls, state, 1)
    return state


def same_state_grown(got: Any, recorded: Any) -> bool:
    """The state folds as recorded; a field a later schema added (not in the recording) must
    hold its "absent" value, which is what an upcast of the old events gives it."""
    if not (isinstance(got, dict) and isinstance(recorded, dict)):
        return got == recorded
    return all(k in got and got[k] == v for k, v in recorded.items()) and \
        all(got[k] in ABSENT for k in got.keys() - recorded.keys())


def check(doc: dict[str, Any], limit: int = 10) -> list[str]:
    """Every difference between the recorded expectations and today's fold (empty: same)."""
    try:
        actual = fold_expectations(decode(doc["events"]))
    except Exception as exc:  # a history today's code cannot even read is a broken history
        return [f"cannot decode: {type(exc).__name__}: {exc}"]
    want = doc["expected"]
    problems = []
    if len(actual["steps"]) != len(want["steps"]):
        problems.append(f"{len(actual['steps'])} steps folded, {len(want['steps'])} recorded")
    for got, exp in zip(actual["steps"], want["steps"]):
        exp = dict(exp, state=recorded_state(exp["aggregate"], exp["state"]))
        for key in ("aggregate", "type", "state", "next_step", "error", "violations"):
            if key == "state" and same_state_grown(got[key], exp[key]):
                continue
            if got[key] != exp[key]:
                problems.append(f"position {exp['position']} {exp['type']}: {key} differs: "
                                f"recorded {exp[key]!r}, today {got[key]!r}")
    if actual["final_violations"] != want["final_violations"]:
        problems.append(f"final violations differ: recorded {want['final_violations']!r}, "
                        f"today {actual['final_violations']!r}")
    return problems[:limit]
