"""``schedfence recover rearm|abort|adopt|resolve``: operator recovery of a stuck migration.

Each command records one operator event (with --actor and --reason, both required) or is refused
with ``error: failed_precondition: ...`` and writes nothing. The decisions are in
domain/rollback/recover.py; this module only parses options and prints the migration afterwards.
"""
from __future__ import annotations

from typing import Any, Callable

import click

from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import json_option, service


@click.group()
def recover() -> None:
    """Operator recovery of a parked, stuck or legacy migration.

    rearm: re-arm the start claim (only if no start can have committed);
    abort: cancel and restore the source (only if no start can have committed);
    adopt: give a legacy (identity-less) migration a durable id; it stays parked;
    resolve: end a parked migration after a manual check (source_kept | destination_owns);
    bind: bind a migration whose destination is unknown (an older release's) to the one
    this process serves (--destination), after checking it is the one it was accepted on."""


def _common(fn: Callable[..., Any]) -> Callable[..., Any]:
    for decorator in reversed((
            click.argument("namespace"), click.argument("schedule_id"),
            click.option("--actor", required=True, help="The operator (recorded)."),
            click.option("--reason", required=True, help="Why (recorded)."),
            json_option)):
        fn = decorator(fn)
    return fn


def _run(kind: str, namespace: str, schedule_id: str, as_json: bool, **options: Any) -> None:
    view = service().recover(kind, namespace, schedule_id, **options).to_dict()
    if as_json:
        out.emit_json(view)
    else:
        out.emit_lines([f"recover {kind}: done"] + out.migration_lines(view))


@recover.command("rearm")
@_common
@click.option("--confirm-no-destination-run", is_flag=True,
              help="For an adopted legacy migration: you checked that no destination run of "
                   "this schedule exists (rechecked live and recorded).")
def rearm(namespace: str, schedule_id: str, actor: str, reason: str, as_json: bool,
          confirm_no_destination_run: bool) -> None:
    """Re-arm the start claim.

    Refused unless every start's answer proves nothing committed (and, for an adopted legacy
    migration, unless confirmed and the destination shows no live or scheduler run)."""
    _run("rearm", namespace, schedule_id, as_json, actor=actor, reason=reason,
         confirm_no_destination_run=confirm_no_destination_run)


@recover.command("abort")
@_common
def abort(namespace: str, schedule_id: str, actor: str, reason: str, as_json: bool) -> None:
    """Cancel the migration and restore the source (refused once a start may have committed)."""
    _run("abort", namespace, schedule_id, as_json, actor=actor, reason=reason)


@recover.command("adopt")
@_common
@click.option("--request-id", default=None,
              help="The new durable id (default: derived from the source incarnation).")
def adopt(namespace: str, schedule_id: str, actor: str, reason: str, as_json: bool,
          request_id: str | None) -> None:
    """Give a legacy (identity-less) migration a durable id.

    It parks as adopted_unverified and starts nothing: then resolve it, or rearm it with
    --confirm-no-destination-run."""
    _run("adopt", namespace, schedule_id, as_json, actor=actor, reason=reason,
         request_id=request_id)


@recover.command("resolve")
@_common
@click.option("--resolution", required=True,
              type=click.Choice(["source_kept", "destination_owns"]),
              help="source_kept: restore the source; destination_owns: close it.")
@click.option("--first-run-id", default=None,
              help="destination_owns: the first run of the chain that runs the schedule.")
def resolve(namespace: str, schedule_id: str, actor: str, reason: str, as_json: bool,
            resolution: str, first_run_id: str | None) -> None:
    """End a parked migration after a manual check (operator-attested, recorded).

    source_kept is refused while a scheduler run is running at the destination;
    destination_owns needs --first-run-id naming an existing scheduler chain head."""
    _run("resolve", namespace, schedule_id, as_json, actor=actor, reason=reason,
         resolution=resolution, first_run_id=first_run_id)


@recover.command("bind")
@_common
def bind(namespace: str, schedule_id: str, actor: str, reason: str, as_json: bool) -> None:
    """Bind a migration accepted by an older release (destination unknown) to the destination
    this process serves (--destination), on your word that it was accepted there.

    Refused for a migration whose destination is recorded (never replaced) or closed."""
    _run("bind", namespace, schedule_id, as_json, actor=actor, reason=reason)
