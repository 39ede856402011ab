"""``schedfence owners``: the ownership audit (infra/application/owners.py). Exit 0: no drift
that fails; 1: drift found (or an error, as every command: one ``error:`` line)."""
from __future__ import annotations

import click

from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import destination_label, emit, json_option, service

ROW_HEADERS = ["SCHEDULE", "OWNER", "STORE SAYS", "MIGRATION", "DRIFT", "NEXT RUN"]


@click.command()
@click.option("--namespace", required=True, help="The namespace audited, on both sides.")
@click.option("--deep", is_flag=True, help="Describe every Temporal schedule (finds "
              "changed_at_destination: spec or action not what was handed over), and judge "
              "the namespace's action workflows exactly once (verify "
              "--against-destination).")
@click.option("--concurrency", type=click.IntRange(1, 64), default=16, show_default=True,
              help="Describes in flight at once.")
@click.option("--all", "all_rows", is_flag=True, help="Text: list every key, not only drift.")
@click.option("--actor", default="",
              help="Who runs the audit (default: SCHEDFENCE_ACTOR, else user@host).")
@json_option
@click.pass_context
def owners(ctx: click.Context, namespace: str, deep: bool, concurrency: int, all_rows: bool,
           actor: str, as_json: bool) -> None:
    """Who owns each schedule now, across the store and the Temporal namespace; recorded.

    One row per key either side knows: its owner now (source, temporal, none), the migration
    that decided it, and drift: missing_at_destination, two_owners, unexplained_at_destination,
    changed_at_destination (--deep; informational). Exits 1 when drift other than
    changed_at_destination is found; `oncall` then lists each with the command resolving it.
    --deep also runs the exactly-once oracle over the namespace's listing of action workflows
    (``exactly_once`` in the JSON; not recorded): a time doubled, lost or never owed exits 1."""
    from schedfence.infra.application.owners import AuditOptions, run_audit
    from schedfence.infra.application.owners_doc import audit_doc, row_cells, summary_line
    svc = service()
    state = run_audit(svc, namespace, AuditOptions(deep, actor, concurrency,
                                                   destination_label()))
    doc = audit_doc(state)
    shown = [r for r in state.owner_rows() if all_rows or r.kind not in ("none", "native")]
    lines = [summary_line(state), *(out.table(ROW_HEADERS, [row_cells(r) for r in shown])
                                    if shown else []),
             f"calls: list {state.calls['list']}, describe {state.calls['describe']}"]
    if doc["failing"]:
        lines.append("resolve: `schedfence oncall` lists each drift with its command")
    once_ok = True
    if deep:  # the same listing verify --against-destination judges
        from schedfence.infra.application.against import against_lines, verify_against
        doc["exactly_once"] = once = verify_against(svc, namespace)
        lines += against_lines(once)
        once_ok = once["ok"]
    emit(as_json, doc, lines)
    if doc["failing"] or not once_ok:
        ctx.exit(1)
