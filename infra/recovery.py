"""Service glue for operator recovery: load, look at the destination, decide, append atomically.

The decisions are in ``domain/recovery.py``. Here each recovery reads the source and its open
migration, asks the destination live where the decision needs it, and saves the operator's
events (and the source's, where it changes) in one append. A refusal writes nothing; a
concurrent worker write is retried on the new state, with a fresh look.
"""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Callable

from schedfence.domain import recovery as r
from schedfence.domain.errors import InvalidArgument, RecoveryRefused, Unavailable
from schedfence.domain.ids import (derive_request_id, migration_aggregate_id, validate_id,
                                   validate_request_id)
from schedfence.domain.migration import Migration
from schedfence.domain.ports import DestinationNotFound, DestinationUnavailable, RunDescription
from schedfence.domain.schedule import Schedule, check_fence
from schedfence.domain.text import validate_actor, validate_reason

from schedfence.infra.store.eventstore import retry_on_conflict
from schedfence.infra.views import MigrationView

if TYPE_CHECKING:
    from schedfence.infra.service import MigrationService



def recover(service: MigrationService, kind: str, namespace: str, schedule_id: str, *,
            actor: str, reason: str, request_id: str | None = None,
            confirm_no_destination_run: bool = False, resolution: str | None = None,
            first_run_id: str | None = None) -> MigrationView:
    """Run one operator recovery; refused with ``failed_precondition`` where the protocol
    forbids it."""
    if kind not in r.KINDS:
        raise InvalidArgument(f"recovery must be one of {', '.join(r.KINDS)}, not {kind!r}")
    validate_actor(actor)
    validate_reason(reason)
    if request_id is not None:
        validate_request_id(request_id)  # adopt: the id a later start sends to the destination
    if first_run_id is not None:
        validate_id("first run id", first_run_id)
    if kind == "abort":
        return service.abort(namespace, schedule_id, reason, actor)
    args = (service, namespace, schedule_id, actor, reason)
    steps: dict[str, Callable[[], MigrationView]] = {
        "adopt": partial(_adopt, *args, request_id),
        "rearm": partial(_rearm, *args, confirm_no_destination_run),
        "resolve": partial(_resolve, *args, resolution or "", first_run_id),
    }
    return retry_on_conflict(steps[kind], RecoveryRefused(
        "the migration kept changing under a running worker; retry"))


def _open(service: MigrationService, namespace: str,
          schedule_id: str) -> tuple[Schedule, Migration]:
    source = service._current(namespace, schedule_id)
    migration = service._migration(source.state.fence_migration_id)
    if migration is None:
        raise RecoveryRefused(f"schedule {namespace}/{schedule_id} has no open migration")
    return source, migration


def _adopt(service: MigrationService, namespace: str, schedule_id: str, actor: str,
           reason: str, request_id: str | None) -> MigrationView:
    source, mig = _open(service, namespace, schedule_id)
    # Default: the id a caller-less rollback of this incarnation derives, so it finds this one.
    rid = request_id or derive_request_id(namespace, schedule_id, source.state.incarnation)
    other = service._migration(migration_aggregate_id(namespace, schedule_id, rid))
    mig.record(r.decide_adopt(mig.state, actor, reason, rid,
                              other.state.migration_id if other is not None else None))
    source.adopt_fence(rid, mig.state.migration_id)
    service.worker.save("adopt", source, mig)  # one append: the id and the fence agree
    return MigrationView.of(mig.state, mig.version)


def _rearm(service: MigrationService, namespace: str, schedule_id: str, actor: str,
           reason: str, confirmed: bool) -> MigrationView:
    source, mig = _open(service, namespace, schedule_id)
    look = None
    epoch = service.epoch()
    if r.check_rearm(mig.state, confirmed, epoch):  # refuses before the destination is asked
        look = r.Look(current=_describe(service, mig.state.namespace, mig.state.workflow_id))
    check_fence(source.state, mig.state.request_id or "")  # the claim is ours to re-arm
    mig.record(r.decide_rearm(mig.state, actor, reason, confirmed=confirmed, look=look,
                              epoch=epoch))
    service.worker.save("rearm", mig)
    return MigrationView.of(mig.state, mig.version)


def _resolve(service: MigrationService, namespace: str, schedule_id: str, actor: str,
             reason: str, resolution: str, first_run_id: str | None) -> MigrationView:
    source, mig = _open(service, namespace, schedule_id)
    st = mig.state
    r.check_resolve(st, resolution, first_run_id)
    current = _describe(service, st.namespace, st.workflow_id)
    named = _describe(service, st.namespace, st.workflow_id, first_run_id) \
        if first_run_id else None
    mig.record(r.decide_resolve(st, actor, reason, resolution, first_run_id,
                                r.Look(current=current, named=named)))
    rid = mig.state.request_id or ""
    if resolution == "destination_owns":
        source.close_for_migration(rid, first_run_id or "")  # rechecks the fence holds rid
    else:
        source.release_fence(rid, st.pre_paused, st.pre_notes)
    service.worker.save("resolve", source, mig)
    return MigrationView.of(mig.state, mig.version)


def _describe(service: MigrationService, namespace: str, workflow_id: str,
              run_id: str | None = None) -> RunDescription | None:
    try:
        return service.destination.describe(namespace, workflow_id, run_id)
    except DestinationNotFound:
        return None
    except DestinationUnavailable as exc:
        raise Unavailable(f"destination unavailable for the recovery check: {exc}") from exc
