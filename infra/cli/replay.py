"""``schedfence replay``: a migration's forensic replay, one block per step.

It opens the store alone (``open_offline``): no simulator tables, no destination, so it runs on
a copy of a production store. Registered on the group by ``infra/cli/commands.py``.
"""
from __future__ import annotations

import json
from typing import Any

import click

from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import cli_state, json_option
from schedfence.infra.application.offline import open_offline

# Shown once in the header; repeating them on every created state is noise.
_HEADER_FIELDS = {"migration_id", "namespace", "schedule_id", "source_id", "workflow_id"}
_MAX = 60


@click.command()
@click.argument("namespace")
@click.argument("schedule_id")
@click.option("--at", "at", type=click.IntRange(min=1), default=None,
              help="Stop at this migration version (the state as of then).")
@click.option("--migration", "migration_id", default=None,
              help="Migration id (default: the key's open, else latest, migration).")
@json_option
def replay(namespace: str, schedule_id: str, at: int | None, migration_id: str | None,
           as_json: bool) -> None:
    """Replay a migration step by step from the stored events alone.

    Each step shows the event, the state change, the decision and its inputs, and the
    invariant checks at that step. Never contacts a destination. Exits 1 on a violation."""
    store = cli_state().store
    service = open_offline(store)
    try:
        doc = service.replay(namespace, schedule_id, at=at, migration_id=migration_id)
    finally:
        service.close()
    if as_json:
        out.emit_json(doc)
    else:
        out.emit_lines(replay_lines(doc))
    if not doc["ok"]:
        click.get_current_context().exit(1)


def value(v: Any) -> str:
    """A state value as one short token: true/false, - for none, compact JSON for dicts."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        text = json.dumps(v, separators=(",", ":"), default=str)
    elif isinstance(v, str):
        text = v if v and " " not in v else json.dumps(v)
    else:
        text = str(v)
    text = out.one_line(text)
    return text if len(text) <= _MAX else text[: _MAX - 3] + "..."


def state_line(step: dict[str, Any]) -> str:
    diff = step["diff"]
    if not diff:
        return "  state: unchanged"
    if all(d["before"] is None for d in diff) and len(diff) > 3:  # a creation
        shown = [f"{d['field']} {value(d['after'])}" for d in diff
                 if d["field"] not in _HEADER_FIELDS and d["after"] not in (None, "")]
        return "  state: created: " + ", ".join(shown)
    return "  state: " + ", ".join(f"{d['field']} {value(d['before'])} → {value(d['after'])}"
                                   for d in diff)


def checks_line(checks: list[dict[str, Any]]) -> str:
    if not checks:
        return "  checks: ok"
    return "  checks: " + "; ".join(
        f"{v['invariant']} VIOLATED: {out.one_line(v['message'])} (positions "
        f"{','.join(str(p) for p in v['positions'])})" for v in checks)


def decision_lines(d: dict[str, Any]) -> list[str]:
    steps = [f"{k} {d[k]}" for k in ("step", "next") if d.get(k)]  # next_step before/after
    nxt = f" ({'; '.join(steps)})" if steps else ""
    lines = [f"  decision: {out.one_line(d['summary'])}{nxt}"]
    # The per-event request id check only matters when it fails.
    shown = [c for c in d["comparisons"]
             if not (c["name"].startswith("event request id") and c["equal"])]
    if shown:
        lines.append("  compared: " + "; ".join(
            f"{c['name']}: {value(c['left'])} {'=' if c['equal'] else '≠'} "
            f"{value(c['right'])}" for c in shown))
    return lines


def step_lines(step: dict[str, Any]) -> list[str]:
    role = "source " if step["role"] == "source" else ""
    head = f"#{step['position']} {role}v{step['version']} {step['type']}"
    extra = [f"attempt {step['attempt']}" if step.get("attempt") else "",
             f"worker {step['worker']}" if step.get("worker") else "",
             f"actor {step['actor']}" if step.get("actor") else ""]
    if any(extra):
        head += "  " + " ".join(x for x in extra if x)
    lines = [head] + decision_lines(step["decision"]) + [state_line(step)]
    if step.get("error"):
        lines.append(f"  error: {out.one_line(step['error'])}")
    return lines + [checks_line(step["checks"])]


def replay_lines(doc: dict[str, Any]) -> list[str]:
    at = f" (as of version {doc['at']})" if doc["at"] is not None else ""
    lines = [f"replay {doc['namespace']}/{doc['schedule_id']} migration {doc['migration_id']} "
             f"request id {value(doc['request_id'])}, requested by "
             f"{value(doc.get('requested_by'))}: {len(doc['steps'])} steps, version "
             f"{doc['version']}{at}"]
    for step in doc["steps"]:
        lines += step_lines(step)
    st = doc["state"] or {}
    lines.append(f"state at v{doc['version']}: phase {st.get('phase')}, claim_armed "
                 f"{value(st.get('claim_armed'))}, receipt {value(st.get('receipt'))}, "
                 f"park_reason {value(st.get('park_reason'))}; next step: {doc['next_step']}"
                 + (f"; accepted against {doc['destination']}" if doc.get("destination")
                    else ""))
    if doc["at"] is None:
        lines.append(checks_line(doc["final_checks"]).replace("  checks:", "final checks:"))
    n = len(doc["violations"])
    lines.append("invariants: ok" if not n else f"invariants: {n} violation(s)")
    return lines
