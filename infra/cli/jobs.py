"""``schedfence migrate`` and ``schedfence job status|cancel|list``: batch jobs (infra/application/jobs.py).

``migrate`` runs or resumes a job: the same command, run again, continues from the job's
cursor. Once its selection is decided, it asks its blocked schedules again, in rounds
(``--blocked-rounds``, ``--blocked-wait``). While it runs, a progress bar (schedules settled, rate, ETA; migrations driven and
completed) goes to stderr when stderr is a terminal, as for every long command (stdout, and
``--json`` on it, stays clean). It ends with the job's report; when the migrations it
requested could not all be driven to an end, it prints the report and exits 1
(``not_drained``), as ``worker --until-idle`` does.
"""
from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import click

from schedfence.domain.direction import SIDES
from schedfence.domain.job import (MAX_BLOCKED_ROUNDS, MAX_BLOCKED_WAIT, Selection, describe,
                                   parse_rate)

from schedfence.infra.application import jobs
from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import destination_label, emit, existing, json_option, service
from schedfence.infra.cli.attention import attention_lines, job_attention
from schedfence.infra.engines.drain import DrainReport, NotDrained

EXAMPLES = 5  # schedule ids shown per reason in text


@click.command()
@click.option("--namespace", required=True, help="The namespace the job migrates in.")
@click.option("--schedule-id", "schedule_ids", multiple=True,
              help="Only these schedules (repeatable; default: every schedule of the side "
                   "the job migrates from).")
@click.option("--match", default=None, help="Only schedule ids matching this glob (* ? [..]).")
@click.option("--to", "direction", type=click.Choice(SIDES), required=True,
              help="workflow: rollbacks of source schedules; source: forward migrations of "
                   "the Temporal side's schedules.")
@click.option("--job-id", required=True, help="Names the job: rerun with it to resume.")
@click.option("--rate", default=None, help="At most N requests per second (N/s).")
@click.option("--concurrency", type=click.IntRange(min=1, max=64), default=1,
              show_default=True, help="Worker threads that drive the requested migrations.")
@click.option("--dry-run", is_flag=True, help="Say what would be requested and refused; "
              "write nothing.")
@click.option("--no-wait", is_flag=True, help="Request only; leave the migrations to workers.")
@click.option("--actor", default="", help="Who asks (default: SCHEDFENCE_ACTOR, else user@host).")
@click.option("--blocked-rounds", type=click.IntRange(0, MAX_BLOCKED_ROUNDS), default=3,
              show_default=True, help="Once every schedule is decided, ask the blocked ones "
              "(a refusal that may clear by itself) again, up to N rounds in all, counting "
              "an earlier run's; 0: never.")
@click.option("--blocked-wait", type=click.FloatRange(0, MAX_BLOCKED_WAIT), default=2.0,
              show_default=True, metavar="SECONDS",
              help="Seconds to wait before each round that asks the blocked schedules again.")
@json_option
def migrate(namespace: str, schedule_ids: tuple[str, ...], match: str | None, direction: str,
            job_id: str, rate: str | None, concurrency: int, dry_run: bool, no_wait: bool,
            actor: str, blocked_rounds: int, blocked_wait: float, as_json: bool) -> None:
    """Migrate many schedules as one durable, resumable job.

    The job records each page of its selection before it reads the next; rerunning the same
    command resumes it without asking any schedule twice. Each schedule's request id is derived
    from the job id, the direction and the schedule id. Once the selection is decided, the job
    asks its blocked schedules again in rounds, with the same request ids: a blocked request
    wrote nothing, so asking again is safe."""
    options = jobs.RunOptions(rate=parse_rate(rate), concurrency=concurrency,
                              dry_run=dry_run, wait=not no_wait, actor=actor,
                              blocked_rounds=blocked_rounds,
                              blocked_wait=blocked_wait).check()
    svc = service()
    with _Bar(enabled=out.stderr_is_terminal()) as bar:  # as every long command: stderr only
        doc = jobs.run_job(svc, job_id, namespace, direction, schedule_ids=list(schedule_ids),
                           match=match, options=options,
                           on_progress=bar.update if bar.enabled else None)
    doc["destination"] = destination_label()
    if dry_run:
        emit(as_json, doc, dry_run_lines(doc))
        return
    drain = doc.get("drain")
    failure = None if drain is None or drain["drained"] else NotDrained.of(
        DrainReport(drain["attempts"], tuple(drain["blocked"]), drain["exhausted"]))
    if failure is not None and as_json:
        doc["error"] = {"code": failure.code, "message": failure.message}
    doc["attention"] = job_attention(doc)
    emit(as_json, doc, report_lines(doc) + attention_lines(doc["attention"]))
    if failure is not None:
        if as_json:
            raise click.exceptions.Exit(1)
        raise failure


@click.group()
def job() -> None:
    """Batch jobs: their status, cancelling one, listing them."""


@job.command()
@click.option("--job-id", required=True)
@json_option
def status(job_id: str, as_json: bool) -> None:
    """The job's report: where each schedule it decided stands now."""
    doc = jobs.job_report(existing(), job_id)
    emit(as_json, doc, report_lines(doc))


@job.command()
@click.option("--job-id", required=True)
@click.option("--actor", required=True, help="Who cancels (recorded).")
@click.option("--reason", default="", help="Why (recorded).")
@json_option
def cancel(job_id: str, actor: str, reason: str, as_json: bool) -> None:
    """Stop the job's new requests; the migrations it already requested finish."""
    doc = jobs.cancel_job(existing(), job_id, actor, reason)
    emit(as_json, doc, report_lines(doc))


@job.command(name="list")
@json_option
def list_(as_json: bool) -> None:
    """Every job, with its selection, phase, rounds and decision counts."""
    rows = jobs.list_jobs(existing())
    emit(as_json, rows, out.table(
        ["JOB", "TO", "NAMESPACE", "PHASE", "PAGES", "ROUNDS", "REQUESTED", "SKIPPED",
         "BLOCKED"],
        [[r["job_id"], r["direction"], r["namespace"], r["phase"], r["pages"],
          r["blocked_rounds"], r["counts"]["requested"], r["counts"]["skipped"],
          r["counts"]["blocked"]] for r in rows]))


def _selection_text(doc: dict[str, Any]) -> str:
    return describe(Selection(doc["namespace"], doc["direction"], doc["schedule_ids"],
                              doc["match"]))


def _by_reason(reasons: dict[str, dict[str, int]], items: list[dict[str, str]],
               kind_key: str) -> list[str]:
    """One line per (kind, reason): a few of its schedule ids."""
    lines = []
    for kind, by in reasons.items():
        for reason in sorted(by):
            of = "requested" if kind == "would_park" else kind  # a dry run's predicted park
            ids = [x["schedule_id"] for x in items
                   if x[kind_key] == of and x["reason"] == reason]
            more = f" and {len(ids) - EXAMPLES} more" if len(ids) > EXAMPLES else ""
            lines.append(f"  {kind} {reason}: {', '.join(ids[:EXAMPLES])}{more}")
    return lines


def report_lines(doc: dict[str, Any]) -> list[str]:
    c = doc["counts"]
    rounds = doc.get("blocked_rounds", 0)
    lines = [f"job {doc['job_id']} ({_selection_text(doc)}): {doc['phase']}, "
             f"{doc['decided']} decided in {doc['pages']} page(s)" +
             (f", blocked ones asked again in {rounds} round(s)" if rounds else ""),
             f"completed {c['completed']}, parked {c['parked']}, aborted {c['aborted']}, "
             f"in progress {c['in_progress']}, blocked {c['blocked']}, skipped {c['skipped']}"]
    lines += _by_reason(doc["reasons"], doc["unfinished"], "outcome")
    if doc.get("cancel_reason"):
        lines.append(f"cancelled: {doc['cancel_reason']}")
    run = doc.get("this_run")
    if run:
        lines.append(f"this run: {run['asked']} request(s) in {run['seconds']:.1f}s "
                     f"({run['rate_per_second']:.1f}/s)" +
                     (f"; {run['blocked_rounds']} round(s) asked blocked schedules again, "
                      f"{run['unblocked']} unblocked" if run.get("blocked_rounds") else ""))
    if doc.get("destination"):
        lines.append(f"destination: {doc['destination']}")
    return lines


def dry_run_lines(doc: dict[str, Any]) -> list[str]:
    w = doc["would"]
    lines = [f"dry run of job {doc['job_id']} ({_selection_text(doc)}): nothing written",
             f"would request {w['requested']}, skip {w['skipped']}, block {w['blocked']}"]
    return lines + _by_reason(doc["reasons"], doc["decisions"], "decision")


class _Bar:
    """The job's progress on stderr, in the CLI's one style (``out.progress``): schedules
    settled (skipped, blocked, or their migration driven to an end; without waiting, decided)
    of the selection, with the rate and the ETA of the whole job, and beside it the counts:
    driven (migrations ended) and completed, skipped and blocked when any (80 columns hold
    it). Drawn only when enabled and
    stderr is a terminal (infra/application/job_progress.py counts)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._stack = ExitStack()
        self._update: out.ProgressUpdate | None = None

    def __enter__(self) -> _Bar:
        if self.enabled:
            self._update = self._stack.enter_context(out.progress("migrating", "settled"))
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.close()

    def update(self, p: dict[str, Any]) -> None:
        if self._update is None:
            return
        c = p["counts"]
        self._update(p["settled"], p["total"] or None,
                     f"driven {p['driven']}, completed {p['completed']}" + "".join(
                         f"; {word} {c[key]}" for key, word in (("skipped", "skip"),
                                                                 ("blocked", "blk")) if c.get(key))
                     + (f"; round {p['round']}" if p.get("round") else ""))
