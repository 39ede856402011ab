"""``schedfence forward``: take a Temporal Schedule back into the source (domain/forward/aggregate.py),
and its operator commands ``forward-status``, ``forward-abort`` and ``forward-take-over``."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

import click

from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import destination_label, emit, json_option, service


def _view(state: Any) -> dict[str, Any]:
    doc = asdict(state)
    doc.pop("handover", None)  # the whole schedule: `forward-status --json` shows the rest
    return {"migration_id": state.migration_id, **doc}


def _lines(doc: dict[str, Any]) -> list[str]:
    keys = ("phase", "request_id", "request_id_origin", "fence_issues", "pre_paused",
            "pre_notes", "incarnation", "park_reason", "park_detail")
    return out.kv_block(f"forward migration {doc['migration_id']}",
                        [(k.replace("_", " "), doc.get(k)) for k in keys])


@click.command()
@click.argument("namespace")
@click.argument("schedule_id")
@click.option("--request-id", default=None,
              help="Idempotency id (derived from the schedule's conflict token if omitted).")
@click.option("--actor", default="", help="Who asks (default: SCHEDFENCE_ACTOR, else user@host).")
@click.option("--no-wait", is_flag=True, help="Record the request only; a worker finishes it.")
@json_option
def forward(namespace: str, schedule_id: str, request_id: str | None, actor: str,
            no_wait: bool, as_json: bool) -> None:
    """Take a Temporal Schedule back into the source, fenced: the Temporal schedule is paused
    and marked, read, the source created dormant, the Temporal schedule deleted, and only
    then the source runs it. Idempotent per request id."""
    svc = service()
    result = svc.forward(namespace, schedule_id, request_id, actor).to_dict()
    result["destination"] = destination_label()
    if not no_wait:
        # This migration's own wait: it ends once the migration does, whoever drove it.
        result["state"] = svc.finish_forward(namespace, schedule_id, result["request_id"],
                                             svc.retry_for).phase
    emit(as_json, result, out.kv_block(f"forward {result['outcome']}", [
        (k.replace("_", " "), v) for k, v in result.items() if k != "outcome"]))


@click.command("forward-status")
@click.argument("namespace")
@click.argument("schedule_id")
@click.argument("request_id")
@json_option
def forward_status(namespace: str, schedule_id: str, request_id: str, as_json: bool) -> None:
    """One forward migration: its phase, the pre-fence pause and notes, a park's reason."""
    state = service().forward_state(namespace, schedule_id, request_id)
    doc = dict(_view(state), handover=state.handover)
    emit(as_json, doc, _lines(doc))


@click.command("forward-abort")
@click.argument("namespace")
@click.argument("schedule_id")
@click.argument("request_id")
@click.option("--reason", required=True, help="Why the migration is cancelled.")
@click.option("--actor", required=True, help="The operator cancelling it.")
@json_option
def forward_abort(namespace: str, schedule_id: str, request_id: str, reason: str, actor: str,
                  as_json: bool) -> None:
    """End a forward migration without a handover: the Temporal schedule gets its pre-fence
    pause and notes back; a dormant source closes without acting."""
    doc = _view(service().abort_forward(namespace, schedule_id, request_id, reason, actor))
    emit(as_json, doc, _lines(doc))


@click.command("forward-take-over")
@click.argument("namespace")
@click.argument("schedule_id")
@click.argument("request_id")
@click.option("--actor", required=True, help="The operator confirming the delete.")
@json_option
def forward_take_over(namespace: str, schedule_id: str, request_id: str, actor: str,
                      as_json: bool) -> None:
    """Confirm a delete that raced the handoff (parked deleted_elsewhere): the source runs
    the schedule."""
    doc = _view(service().take_over_forward(namespace, schedule_id, request_id, actor))
    emit(as_json, doc, _lines(doc))


COMMANDS = (forward, forward_status, forward_abort, forward_take_over)
