"""``schedfence status NAMESPACE SCHEDULE_ID``: a schedule and its latest migration.

Answered from the operator projection's rows when each row it reads is at its aggregate's
latest version (infra/application/status_read.py: no event class, no SQLAlchemy), else from the
log as every other read; the same document either way, and the same errors (the log's read
names them). Kept apart from ``reads`` so that its process imports only this (benchmarks/cli_startup.py)."""
from __future__ import annotations

import click

from schedfence.infra.application.status_read import read_model_status
from schedfence.infra.cli.blocks import migration_lines, schedule_lines
from schedfence.infra.cli.commands import cli_state, emit, existing, json_option


@click.command()
@click.argument("namespace")
@click.argument("schedule_id")
@json_option
def status(namespace: str, schedule_id: str, as_json: bool) -> None:
    """Show a schedule and its latest migration."""
    doc = read_model_status(cli_state().store, namespace, schedule_id)
    if doc is None:
        from schedfence.infra.application.views import status_doc
        doc = status_doc(existing(), namespace, schedule_id)
    emit(as_json, doc, schedule_lines(doc["schedule"]) + migration_lines(doc["migration"]))
