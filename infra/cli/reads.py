"""``schedfence status | list | history | verify``: read what a store holds. Each opens the
store as it is (nothing is created, no destination is needed)."""
from __future__ import annotations

import click

from schedfence.infra.cli import output as out
from schedfence.infra.narration import history_doc, list_doc, status_doc
from schedfence.infra.cli.base import emit, existing, json_option


# -- read views --------------------------------------------------------------------------------
@click.command()
@click.argument("namespace")
@click.argument("schedule_id")
@json_option
def status(namespace: str, schedule_id: str, as_json: bool) -> None:
    """Show a schedule and its latest migration."""
    doc = status_doc(existing(), namespace, schedule_id)
    emit(as_json, doc, out.schedule_lines(doc["schedule"]) + out.migration_lines(doc["migration"]))


@click.command("list")
@json_option
def list_(as_json: bool) -> None:
    """One row per schedule key (its current incarnation)."""
    doc = list_doc(existing())
    emit(as_json, doc, out.list_lines(doc["schedules"]))


@click.command()
@click.argument("namespace")
@click.argument("schedule_id")
@click.option("--narrate", is_flag=True,
              help="One sentence per event (what happened, who did it) instead of its fields.")
@json_option
def history(namespace: str, schedule_id: str, narrate: bool, as_json: bool) -> None:
    """Events of a schedule and its migrations, in order (JSON: each with its summary)."""
    doc = history_doc(existing(), namespace, schedule_id)
    emit(as_json, doc, out.history_lines(doc["events"], narrate))


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
