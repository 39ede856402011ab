"""What resolves each drift of an audit (docs/operators.md, "Ownership audit"): complete
commands, run as printed (the store and destination from SCHEDFENCE_STORE and
SCHEDFENCE_DESTINATION; the ``temporal`` CLI at the audited server's address).

- ``missing_at_destination``: nobody runs the schedule. Re-create it as a source with what was
  handed over (``schedfence schedule create``): the key takes a new incarnation.
- ``two_owners``: the source runs it; delete the Temporal schedule made beside it.
- ``unexplained_at_destination``: delete the Temporal schedule; or, where the key's source is
  closed, take it in with a forward migration (``schedfence forward``), so the source runs it.
- ``foreign_handover``: a schedule this project handed over, at a key this store never knew.
  First find the store that made it (``advice``): its audit shows the key ``temporal``, and
  that store owns it. Only if no store holds it (this one was lost, or restored from before
  the handover), take it in here explicitly with a forward migration. Never delete it: the
  store that handed it over counts on it.
- ``changed_at_destination``: informational; nothing to resolve.
Pure: builds strings only.
"""
from __future__ import annotations

import base64
import json
import shlex
from typing import Any

from schedfence.domain.owners.classify import OwnerRow


def _q(*words: str) -> str:
    return " ".join(shlex.quote(w) for w in words)


def temporal_delete(namespace: str, schedule_id: str, address: str) -> str:
    where = f"--address {shlex.quote(address)} " if address else ""
    return f"temporal schedule delete {where}{_q('--namespace', namespace, '--schedule-id', schedule_id)}"


def resolutions(row: OwnerRow, namespace: str, address: str,
                handover: dict[str, Any] | None = None) -> list[str]:
    """The commands that resolve ``row``'s drift, the preferred first (none: nothing to do).
    ``address``: the Temporal server's HOST:PORT ("" for the simulator); ``handover``: what
    the deciding rollback handed over (for ``missing_at_destination``)."""
    sid = row.schedule_id
    if row.kind == "missing_at_destination":
        return [_q("schedfence", "schedule", "create", namespace, sid,
                   *program_args(handover or {}))]
    if row.kind == "two_owners":
        return [temporal_delete(namespace, sid, address)]
    if row.kind == "foreign_handover":
        return [_q("schedfence", "forward", namespace, sid)]
    if row.kind == "unexplained_at_destination":
        found = [temporal_delete(namespace, sid, address)]
        if row.store == "closed":
            found.append(_q("schedfence", "forward", namespace, sid))
        return found
    return []


def advice(row: OwnerRow, namespace: str) -> str | None:
    """What to check before running a resolution (None: the commands say it all)."""
    if row.kind != "foreign_handover":
        return None
    return (f"{namespace}/{row.schedule_id} carries a schedule-fence handover memo, but this "
            "store never knew the key: another store handed it over, or this store was lost "
            "or restored from before the handover. Find the store that made it (`schedfence "
            f"owners --namespace {namespace}` there shows it `temporal`); it owns the schedule "
            "and nothing is to be done here. Only if no store holds it, take it in here with "
            "the forward migration below; never delete it")


def program_args(handover: dict[str, Any]) -> list[str]:
    """``schedule create`` options giving a schedule the handed-over spec, action and policies
    (memo, search attributes, timeouts and retry policy are not options: ``schedule describe``
    after the create shows what it runs)."""
    args: list[str] = []
    spec, action, policies = (handover.get(k) or {} for k in ("spec", "action", "policies"))
    for i in spec.get("intervals", ()):
        every, offset = i["every"], i.get("offset", 0)
        args += ["--interval", f"{every}/{offset}" if offset else str(every)]
    for cron in spec.get("cron_expressions", ()):
        args += ["--cron", cron]
    for option, name in (("--start", "start_at"), ("--end", "end_at")):
        if spec.get(name):
            args += [option, str(spec[name]).replace("+00:00", "Z")]
    if spec and spec.get("time_zone", "UTC") != "UTC":
        args += ["--tz", spec["time_zone"]]
    if spec.get("jitter"):
        args += ["--jitter", str(spec["jitter"])]
    if action:
        args += ["--workflow-type", action["workflow_type"], "--task-queue",
                 action["task_queue"], "--workflow-id", action["workflow_id"]]
        value = _json_input(action.get("inputs") or [])
        if value is not None:
            args += ["--input", value]
    if policies and action:
        if policies.get("overlap", "skip") != "skip":
            args += ["--overlap", policies["overlap"]]
        if policies.get("pause_on_failure"):
            args.append("--pause-on-failure")
    return args


def _json_input(inputs: list[dict[str, Any]]) -> str | None:
    """One ``json/plain`` argument as ``--input`` JSON (None: none, or not expressible)."""
    if len(inputs) != 1:
        return None
    meta = inputs[0].get("metadata", {})
    if base64.b64decode(meta.get("encoding", "")) != b"json/plain":
        return None
    return json.dumps(json.loads(base64.b64decode(inputs[0].get("data", ""))),
                      separators=(",", ":"))
