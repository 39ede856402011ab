"""``schedfence list``: one row per schedule key, a page at a time.

Answered from the operator projection's rows when every row it reads is at its aggregate's
latest version (infra/application/list_read.py: no event class, no SQLAlchemy), else from the
log as before; the same page either way. Kept apart from ``reads`` so that its process imports
only this (benchmarks/cli_startup.py), and its table is drawn without rich (cli/table.py)."""
from __future__ import annotations

import shlex
from typing import Any, Callable

import click

from schedfence.domain.ids import validate_id
from schedfence.infra.application.list_read import read_model_list
from schedfence.infra.cli.commands import cli_state, existing, json_option
from schedfence.infra.cli.emitting import emit_json, emit_lines
from schedfence.infra.cli.table import more_hint, rich_table

MAX_ROWS = 1000  # rows per page unless --limit says otherwise
MAX_LIMIT = 10_000


def limit_option(default: int) -> Any:
    return click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=default,
                        show_default=True, help="At most this many rows per page.")


after_option = click.option("--after", default=None, metavar="CURSOR",
                            help="The next page: the cursor the previous page printed "
                                 "(next_cursor), with the same filters.")
namespace_option = click.option("--namespace", default=None, help="Only this namespace.")


def emit_page(as_json: bool, doc: dict[str, Any], lines: Callable[[], list[str]]) -> None:
    """A page as JSON, or as a table (drawn only then)."""
    if as_json:
        emit_json(doc)
    else:
        emit_lines(lines())


def next_page(cursor: str | None, shown: int) -> list[str]:
    """The text output's last line while more match: the same command, one page on."""
    if cursor is None:
        return []
    ctx = click.get_current_context()
    words = [ctx.command.name or ""]
    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        if not isinstance(param, click.Option) or param.name in ("as_json", "after") \
                or value in (None, False, ()) or value == param.default:
            continue
        for one in (value if isinstance(value, tuple) else (value,)):
            words += [param.opts[0]] + ([] if param.is_flag else [str(one)])
    return more_hint(cursor, shown, "schedfence " + shlex.join(words))


def list_lines(rows: list[dict[str, Any]]) -> list[str]:
    headers = ["NAMESPACE", "SCHEDULE", "INC", "PAUSED", "CLOSED", "MIGRATION PENDING",
               "MIGRATION"]
    body = [[r["namespace"], r["schedule_id"], r["incarnation"], r["paused"], r["closed"],
             r["migration_pending"], r["migration_state"]] for r in rows]
    return rich_table(headers, body, "no schedules")


@click.command("list")
@namespace_option
@limit_option(MAX_ROWS)
@after_option
@json_option
def list_(namespace: str | None, limit: int, after: str | None, as_json: bool) -> None:
    """One row per schedule key (its current incarnation), in the order keys were created."""
    if namespace is not None:
        validate_id("namespace", namespace)
    doc = read_model_list(cli_state().store, namespace, limit, after)
    if doc is None:
        from schedfence.infra.application.views import schedule_list
        doc = schedule_list(existing(), namespace, limit, after)
    emit_page(as_json, doc, lambda: list_lines(doc["schedules"])
              + next_page(doc["next_cursor"], len(doc["schedules"])))
