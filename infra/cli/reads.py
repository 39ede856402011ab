"""``schedfence status | list | history | verify``: read what a store holds. Each opens the
store as it is (nothing is created, no destination is needed)."""
from __future__ import annotations

from typing import Any

import click

from schedfence.domain.errors import NotFound

from schedfence.infra.cli import output as out
from schedfence.infra.cli.base import emit, existing, json_option


# -- read views --------------------------------------------------------------------------------
@click.command()
@click.argument("namespace")
@click.argument("schedule_id")
@json_option
def status(namespace: str, schedule_id: str, as_json: bool) -> None:
    """Show a schedule and its latest migration."""
    service = existing()
    view = service.schedule(namespace, schedule_id).to_dict()
    try:
        mig: dict[str, Any] | None = service.migration(namespace, schedule_id).to_dict()
    except NotFound:
        mig = None
    emit(as_json, {"schedule": view, "migration": mig},
          out.schedule_lines(view) + out.migration_lines(mig))


@click.command("list")
@json_option
def list_(as_json: bool) -> None:
    """One row per schedule key (its current incarnation)."""
    service = existing()
    rows = []
    for view in service.list_schedules():
        row = view.to_dict()
        try:
            row["migration_state"] = service.migration(view.namespace, view.schedule_id).state
        except NotFound:
            row["migration_state"] = None
        rows.append(row)
    emit(as_json, {"schedules": rows}, out.list_lines(rows))


@click.command()
@click.argument("namespace")
@click.argument("schedule_id")
@click.option("--narrate", is_flag=True,
              help="One sentence per event (what happened, who did it) instead of its fields.")
@json_option
def history(namespace: str, schedule_id: str, narrate: bool, as_json: bool) -> None:
    """Events of a schedule and its migrations, in order (JSON: each with its summary)."""
    entries = []
    for entry in existing().history(namespace, schedule_id):
        doc = entry.to_dict()
        doc["short_type"] = out.short_type(entry.type)
        line = out.narrate(doc["short_type"], entry.data)
        doc["summary"] = None if line is None else line.text
        entries.append(doc)
    emit(as_json, {"namespace": namespace, "schedule_id": schedule_id, "events": entries},
          out.history_lines(entries, narrate))


@click.command()
@click.option("--also", default=None, metavar="STORE_URL",
              help="Another copy of this store (the old active after a failover): check "
                   "both, and one destination chain per migration across them.")
@json_option
@click.pass_context
def verify(ctx: click.Context, also: str | None, as_json: bool) -> None:
    """Check the log against the protocol invariants.

    Exits 1 if any invariant is violated."""
    doc = out.verdict(existing(), also)
    emit(as_json, doc, out.verdict_lines(doc))
    if not doc["ok"]:
        ctx.exit(1)
