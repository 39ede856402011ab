"""What a batch job (infra/application/jobs.py) reads and asks: its selection, page by page, in
a stable order, and one schedule's request with the job's derived request id.

Stable orders and cursors: ``--to workflow`` takes the namespace's source schedules in the
order their keys were created (cursor: the log position of the page's last key); ``--to source``
the Temporal side's, as ``destination.list_schedules`` pages them (cursor: its page token);
named schedule ids sorted (cursor: an index).
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, cast

from schedfence.domain import job as j
from schedfence.domain.direction import TO_WORKFLOW
from schedfence.domain.errors import AlreadyExists, DomainError, InvalidArgument, MigrationPending
from schedfence.domain.forward.aggregate import forward_aggregate_id
from schedfence.domain.ids import migration_aggregate_id
from schedfence.domain.source.key import ScheduleKey

from schedfence.infra.application.guards import predict_rollback
from schedfence.infra.application.ports import Commands

NO_FORWARD = "forward migration is not available in this build"

# -- the selection, page by page -------------------------------------------------------------
Page = tuple[list[str], str | None, bool]  # schedule ids, the next cursor, exhausted


def read_page(service: Commands, sel: j.Selection, cursor: str | None,
              size: int) -> Page:
    if sel.schedule_ids is not None:
        return sel.named_page(cursor, size)
    if sel.direction == TO_WORKFLOW:
        return _source_page(service, sel, cursor, size)
    return _temporal_page(service, sel, cursor, size)


def _source_page(service: Commands, sel: j.Selection, cursor: str | None,
                 size: int) -> Page:
    """Keys of the namespace in the order they were created, from the log position after
    ``cursor``; the page ends at the ``size``-th matching key."""
    ids: list[str] = []
    position = int(cursor or 0)
    for position, schedule_id in matching_keys(service, sel, position):
        ids.append(schedule_id)
        if len(ids) == size:
            return ids, str(position), False
    return ids, str(position), True


def matching_keys(service: Commands, sel: j.Selection,
                  after: int = 0) -> Iterator[tuple[int, str]]:
    """(log position, schedule id) of each key of the selection's namespace that its pattern
    matches, created after log position ``after``, in the order the keys were created (read
    page by page as the caller goes on)."""
    for note in service.app.notifications((ScheduleKey.Created.TOPIC,), start=after + 1):
        created = cast(ScheduleKey.Created, service.app.mapper.to_domain_event(note))
        if created.namespace == sel.namespace and sel.matches(created.schedule_id):
            yield note.id, created.schedule_id


def _temporal_page(service: Commands, sel: j.Selection, cursor: str | None,
                   size: int) -> Page:
    lister = getattr(service.destination, "list_schedules", None)
    if lister is None:
        raise InvalidArgument(f"{NO_FORWARD}: the destination cannot list its schedules")
    token = bytes.fromhex(cursor) if cursor else None
    names, following = lister(sel.namespace, token, size)
    ids = [s for s in names if sel.matches(s)]
    return ids, following.hex() if following else None, not following


def selection_size(service: Commands, sel: j.Selection) -> int | None:
    """How many schedules the selection holds now, where that is cheap to know (for the
    progress bar's ETA); None for the Temporal side's listing."""
    if sel.schedule_ids is not None:
        return sum(1 for s in sel.schedule_ids if sel.matches(s))
    if sel.direction != TO_WORKFLOW:
        return None
    return sum(1 for _ in matching_keys(service, sel))


# -- one schedule's request --------------------------------------------------------------------
def request_one(service: Commands, sel: j.Selection, job_id: str, schedule_id: str,
                actor: str, dry_run: bool) -> dict[str, str]:
    """Ask the service for one schedule's migration (or, dry, predict its answer)."""
    rid = j.job_request_id(job_id, sel.direction, schedule_id)
    ns = sel.namespace
    try:
        if sel.direction == TO_WORKFLOW:
            outcome = (predict_rollback(service.load, service.destination, ns, schedule_id, rid)
                       if dry_run else
                       service.rollback(ns, schedule_id, request_id=rid, actor=actor,
                                        job_id=job_id).outcome)
        elif dry_run:
            outcome, park = service.predict_forward(ns, schedule_id, rid)
            return j.requested(schedule_id, rid, outcome, predicted=True, park=park)
        else:
            outcome = service.forward(ns, schedule_id, request_id=rid, actor=actor,
                                      job_id=job_id).outcome
    except AlreadyExists as exc:
        return j.refused(schedule_id, rid, held_by_another(service, sel, schedule_id, exc))
    except DomainError as exc:
        return j.refused(schedule_id, rid, exc)
    return j.requested(schedule_id, rid, outcome, predicted=dry_run)


def rollback_answers(service: Commands, sel: j.Selection, job_id: str, sids: list[str],
                     actor: str) -> list[dict[str, str]]:
    """No rate limit: the rollbacks of ``sids`` in one append (MigrationService.rollback_many),
    each answer the decision its own ``rollback`` would have given."""
    rids = [j.job_request_id(job_id, TO_WORKFLOW, sid) for sid in sids]
    answers = service.rollback_many(sel.namespace, sids, rids, actor, job_id)
    return [j.requested(sid, rid, a.outcome) if not isinstance(a, DomainError) else
            j.refused(sid, rid, held_by_another(service, sel, sid, a)
                      if isinstance(a, AlreadyExists) else a)
            for sid, rid, a in zip(sids, rids, answers)]


def held_by_another(service: Commands, sel: j.Selection, schedule_id: str,
                    exc: AlreadyExists) -> DomainError:
    """Another migration holds the source's fence: blocked (it clears), not skipped."""
    if sel.direction == TO_WORKFLOW:
        source = service.load.source(sel.namespace, schedule_id).state
        if source.migration_pending:
            return MigrationPending(exc.message)
    return exc


def migration_id(direction: str) -> Callable[[str, str, str], Any]:
    """(namespace, schedule id, request id) -> the migration's aggregate id."""
    return migration_aggregate_id if direction == TO_WORKFLOW else forward_aggregate_id
