"""``schedfence schedule``: create, describe and change source schedules (update, pause,
notes, trigger, backfill, delete). Every change is refused with ``migration_pending`` while a
migration holds the fence, and bad input is ``invalid_argument`` naming the option; neither
writes anything."""
from __future__ import annotations

from typing import Any, Callable

import click

from schedfence.domain.source.action import nominal_text
from schedfence.domain.source.payload import shown
from schedfence.domain.source.invoker import OVERLAPS, Overlap

from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import emit, existing, json_option, service
from schedfence.infra.cli.program import moment, parse_program, parse_update


@click.group()
def schedule() -> None:
    """Create and change source schedules.

    Every change is refused with migration_pending while a migration holds the fence."""


def _schedule_out(view: Any, as_json: bool) -> None:
    emit(as_json, view.to_dict(), out.schedule_lines(view.to_dict()))


def _key(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.argument("namespace")(click.argument("schedule_id")(fn))


_actor = click.option("--actor", default="",
                      help="Who asks (recorded on the event; default: SCHEDFENCE_ACTOR, else "
                           "user@host).")


def program_options(create: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The spec, action, policy and limit options of ``create`` (with its defaults) and of
    ``update`` (no defaults: an absent option keeps that part)."""
    def default(value: Any) -> Any:
        return value if create else None

    options = [
        click.option("--interval", "intervals", multiple=True, metavar="EVERY[/OFFSET]",
                     help="Run every EVERY (30s, 5m, 2h, 1d or seconds), OFFSET after each "
                          "multiple since the Unix epoch. Repeatable."),
        click.option("--cron", "crons", multiple=True, metavar="EXPR",
                     help="A five-field cron string or @daily/@hourly/...; read in --tz. "
                          "Repeatable."),
        click.option("--tz", "time_zone", default=None,
                     help="Time zone of the cron strings (IANA name; default UTC)."),
        click.option("--start", "start_at", default=None, metavar="TIME",
                     help="No action before this time (RFC 3339 with a zone)."),
        click.option("--end", "end_at", default=None, metavar="TIME",
                     help="No action after this time."),
        click.option("--jitter", default=None, metavar="DURATION",
                     help="Delay each action by a deterministic amount below this."),
        click.option("--overlap", default=default("skip"), type=click.Choice(list(OVERLAPS)),
                     help="What a start does while one runs (default skip)."),
        click.option("--catchup-window", default=None, metavar="DURATION",
                     help="How late an action may still start after the scheduler was down "
                          "(default 365d)."),
        click.option("--pause-on-failure/--no-pause-on-failure", default=None,
                     help="Pause the schedule when an action fails or times out."),
        click.option("--workflow-type", default=None, help="The action's workflow type."),
        click.option("--task-queue", default=None, help="The action's task queue."),
        click.option("--workflow-id", "action_workflow_id", default=None,
                     help="Prefix of each action workflow's id (default: the schedule id)."),
        click.option("--input", "input_json", default=None, metavar="JSON",
                     help="The action workflow's input, as JSON."),
        click.option("--limit", type=click.IntRange(0, 10**9), default=None,
                     help="Take at most this many more actions."),
    ]
    if not create:
        options.append(click.option("--no-limit", is_flag=True, help="Remove the limit."))

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            fn = option(fn)
        return fn
    return decorate


@schedule.command("create")
@_key
@click.option("--paused", is_flag=True, help="Create it paused.")
@click.option("--notes", default="", help="Free-text notes.")
@program_options(create=True)
@_actor
@json_option
def schedule_create(namespace: str, schedule_id: str, paused: bool, notes: str, actor: str,
                    as_json: bool, **program: Any) -> None:
    """Create a schedule (or a new incarnation); with a spec and an action it runs."""
    _schedule_out(service().create_schedule(namespace, schedule_id, paused, notes,
                                            **parse_program(schedule_id, **program),
                                            actor=actor), as_json)


@schedule.command("update")
@_key
@program_options(create=False)
@click.option("--conflict-token", type=int, default=None,
              help="Apply only if the schedule is still at this token (from describe).")
@_actor
@json_option
def schedule_update(namespace: str, schedule_id: str, conflict_token: int | None, actor: str,
                    as_json: bool, **options: Any) -> None:
    """Change what a schedule runs and when: a new spec (--interval/--cron replace it), the
    action's and the policies' options given, the limit. Absent options keep their part; the
    update merges over what describe shows now, so pass --conflict-token to be sure nothing
    changed in between."""
    svc = existing()
    view = svc.schedule(namespace, schedule_id)
    changes = parse_update(view.to_dict(), **options)
    token = view.conflict_token if conflict_token is None else conflict_token
    _schedule_out(svc.update_schedule(namespace, schedule_id, conflict_token=token,
                                      actor=actor, **changes), as_json)


@schedule.command("trigger")
@_key
@click.option("--overlap", default=None, type=click.Choice(list(OVERLAPS)),
              help="Overlap policy of this start (default: the schedule's).")
@_actor
@json_option
def schedule_trigger(namespace: str, schedule_id: str, overlap: Overlap | None, actor: str,
                     as_json: bool) -> None:
    """Take one action now (the scheduler starts it on its next pass), even if paused."""
    _schedule_out(existing().trigger_schedule(namespace, schedule_id, overlap=overlap,
                                              actor=actor), as_json)


@schedule.command("backfill")
@_key
@click.option("--start", "start_at", required=True, metavar="TIME",
              help="First time of the range (RFC 3339 with a zone; included).")
@click.option("--end", "end_at", required=True, metavar="TIME",
              help="Last time of the range (included; not in the future).")
@click.option("--overlap", default=None, type=click.Choice(list(OVERLAPS)),
              help="Overlap policy of the backfill's starts (default: the schedule's).")
@_actor
@json_option
def schedule_backfill(namespace: str, schedule_id: str, start_at: str, end_at: str,
                      overlap: Overlap | None, actor: str, as_json: bool) -> None:
    """Start every action time of the spec in [--start, --end], from a durable cursor."""
    view = existing().backfill_schedule(namespace, schedule_id, moment(start_at, "start"),
                                        moment(end_at, "end"), overlap=overlap, actor=actor)
    _schedule_out(view, as_json)


@schedule.command("describe")
@_key
@click.option("--next", "count", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="How many upcoming action times to show.")
@json_option
def schedule_describe(namespace: str, schedule_id: str, count: int, as_json: bool) -> None:
    """A schedule's spec, action, policies, next action times, recent and running actions,
    buffered starts and backfills in progress. The action's inputs are shown decoded
    (``inputs``: a json/plain payload's value, else its encoding and size)."""
    svc = existing()
    view = svc.schedule(namespace, schedule_id)
    doc = dict(view.to_dict(), inputs=[shown(p) for p in (view.action or {}).get("inputs", [])],
               next_action_times=[nominal_text(t) for t in svc.upcoming(namespace, schedule_id,
                                                                        count)])
    emit(as_json, doc, out.schedule_lines(doc) + out.program_lines(doc) +
         out.activity_lines(doc))


def _updater(name: str, doc: str, **change: Any) -> None:
    @schedule.command(name, help=doc)
    @_key
    @_actor
    @json_option
    def command(namespace: str, schedule_id: str, actor: str, as_json: bool) -> None:
        _schedule_out(existing().update_schedule(namespace, schedule_id, actor=actor, **change),
                      as_json)


_updater("pause", "Pause a schedule.", paused=True)
_updater("unpause", "Unpause a schedule.", paused=False)
_updater("delete", "Delete (close) a schedule.", delete=True)


@schedule.command("notes")
@_key
@click.argument("text")
@_actor
@json_option
def schedule_notes(namespace: str, schedule_id: str, text: str, actor: str,
                   as_json: bool) -> None:
    """Replace a schedule's notes."""
    _schedule_out(existing().update_schedule(namespace, schedule_id, notes=text, actor=actor),
                  as_json)
