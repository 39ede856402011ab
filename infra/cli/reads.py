"""``schedfence history | verify | audit | migrations``: read what a store
holds. Each opens the store as it is (nothing is created, no destination is needed).

``audit`` and ``migrations`` (and ``list``, in listing.py) answer a page at a time (projections/queries.py, the one
definition the HTTP API pages with too): ``--limit`` rows; while more match, the JSON carries
``next_cursor`` and the text ends with the command for the next page (``--after CURSOR``)."""
from __future__ import annotations

from typing import Any

import click

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import validate_id
from schedfence.projections.records import EPOCH, MICROSECOND
from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import emit, existing, json_option, service
from schedfence.infra.application.views import history_doc
from schedfence.infra.cli.listing import MAX_ROWS, after_option as _after_option
from schedfence.infra.cli.listing import emit_page as _emit_page, limit_option as _limit_option
from schedfence.infra.cli.listing import namespace_option as _namespace_option, next_page


# -- read views --------------------------------------------------------------------------------
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


@click.command("audit")
@click.option("--schedule", default=None, metavar="NS/ID",
              help="Events of a schedule key (all incarnations and their migrations).")
@_namespace_option
@click.option("--type", "event_types", multiple=True, metavar="TYPE",
              help="Only events of this type (MigrationAborted, or its topic); repeat for "
                   "any of several.")
@click.option("--exclude-type", "exclude_types", multiple=True, metavar="TYPE",
              help="Drop events of this type (class name or topic); repeatable.")
@click.option("--job", "job_id", default=None, metavar="ID",
              help="Events of the migrations batch job ID requested (rollback jobs).")
@click.option("--request-id", default=None, help="Events carrying this request id.")
@click.option("--migration", "migration_id", default=None, help="Events of one migration.")
@click.option("--actor", default=None, help="Who asked (user@host, an operator, a token's "
              "name) or a worker id.")
@click.option("--since", default=None, metavar="T",
              help="ISO 8601 (naive = UTC) or a duration ago: 90s, 15m, 2h, 7d.")
@click.option("--until", default=None, metavar="T", help="Same formats as --since.")
@click.option("--newest-first", is_flag=True, help="Newest events first.")
@_limit_option(100)
@_after_option
@json_option
def audit(schedule: str | None, namespace: str | None, event_types: tuple[str, ...],
          exclude_types: tuple[str, ...], job_id: str | None, request_id: str | None, migration_id: str | None, actor: str | None,
          since: str | None, until: str | None, newest_first: bool, limit: int,
          after: str | None, as_json: bool) -> None:
    """Who did what, when, and why: events from the audit index, in log order, each with
    the reason its event gives (an operator's --reason, a park's).

    Filters combine (AND); --type repeated matches any of its values."""
    for label, value in (("request id", request_id), ("actor", actor),
                         ("namespace", namespace), ("job id", job_id)):
        if value is not None:
            validate_id(label, value)  # a filter value the store can compare at all
    page = existing().audit(schedule=schedule, request_id=request_id,
                            migration_id=migration_id, actor=actor,
                            since=_moment(since, "since"), until=_moment(until, "until"),
                            newest_first=newest_first, limit=limit, namespace=namespace,
                            event_types=event_types, after=after,
                            exclude_types=exclude_types, job_id=job_id)
    _emit_page(as_json, page.to_dict(), lambda: out.audit_lines(page)
               + next_page(page.next_cursor, len(page.entries)))


def _moment(text: str | None, name: str) -> Any:
    """``--since``/``--until`` as a time the projection's integer microseconds can hold."""
    if text is None:
        return None
    from schedfence.projections import queries as q  # SQLAlchemy: not on `status`'s path
    try:
        return EPOCH + q.parse_time(text, name) * MICROSECOND
    except (OverflowError, ValueError):
        raise InvalidArgument(f"{name} is out of range (years 1 to 9999)") from None


@click.command("migrations")
@click.option("--state", default=None, help="Only this state (pending, claimed, receipted, "
              "completed, parked, legacy_pending, aborted).")
@_limit_option(MAX_ROWS)
@_after_option
@json_option
def migrations(state: str | None, limit: int, after: str | None, as_json: bool) -> None:
    """Migrations by state, most recently changed first (all states: grouped by state)."""
    page = existing().views.migrations_page(state, limit, after)
    _emit_page(as_json, page.to_dict(), lambda: out.migrations_table(page.rows)
               + next_page(page.next_cursor, len(page.rows)))


@click.command()
@click.option("--also", default=None, metavar="STORE_URL",
              help="Another copy of this store (the old active after a failover): check "
                   "both, one destination chain per migration across them, and the copy's "
                   "own action starts with this store's (exactly once together).")
@click.option("--against-destination", is_flag=True,
              help="Judge the destination's own listing of action workflows "
                   "(<workflow id>-<nominal time>) against what the log owed: names the "
                   "first time started twice, never started, or never owed (--destination "
                   "needed).")
@click.option("--namespace", default=None, help="With --against-destination: only this "
              "namespace.")
@click.option("--schedule", "schedule_id", default=None, metavar="ID",
              help="With --against-destination and --namespace: only this schedule.")
@click.option("--lag", type=click.FloatRange(0, 86400), default=30.0, show_default=True,
              help="With --against-destination: seconds before now not judged yet.")
@json_option
@click.pass_context
def verify(ctx: click.Context, also: str | None, against_destination: bool,
           namespace: str | None, schedule_id: str | None, lag: float,
           as_json: bool) -> None:
    """Check the log against the protocol invariants.

    Exits 1 if any invariant is violated."""
    if against_destination:
        from schedfence.infra.application.against import against_lines, verify_against
        doc = verify_against(service(), namespace, schedule_id, also, lag)
        emit(as_json, doc, against_lines(doc))
        if not doc["ok"]:
            ctx.exit(1)
        return
    if namespace is not None or schedule_id is not None:
        raise InvalidArgument("--namespace and --schedule go with --against-destination")
    svc = existing()
    with out.progress("checking invariants", "events", svc.event_count()) as update:
        doc = out.verdict(svc, also, progress=update)
        update(doc["events"])  # the bar ends at every event checked
    emit(as_json, doc, out.verdict_lines(doc))
    if not doc["ok"]:
        ctx.exit(1)
