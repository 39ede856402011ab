"""Operator recovery in the application: load, look at the destination, decide, save.

The decisions are ``domain/rollback/steps.py``'s (built on ``domain/rollback/recover.py``). Here each recovery
loads the source and its open migration, asks the destination live where the decision needs
it, and saves the change (the operator's events and the source's) in one append. A refusal
writes nothing; a concurrent worker write is retried on the new state, with a fresh look.
It is given the parts it uses (``Parts``: the aggregates, the destination, the worker's save
and the abort command), never the application service.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

from schedfence.domain.rollback import steps as h
from schedfence.domain.rollback import recover as r
from schedfence.domain.errors import InvalidArgument, RecoveryRefused
from schedfence.domain.ids import validate_id, validate_request_id
from schedfence.domain.rollback.aggregate import Migration, MigrationState
from schedfence.domain.ports import (Destination, DestinationNotFound, DestinationUnavailable,
                                     RunDescription, command_error)
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.text import validate_actor, validate_reason

from schedfence.domain.destination_id import bind_hint
from schedfence.infra.adapters.store.aggregates import Aggregates
from schedfence.infra.application.guards import accept_binding, check_bound
from schedfence.infra.pacing import retry_call
from schedfence.infra.engines.unit_of_work import UnitOfWork
from schedfence.infra.application.views import MigrationView


@dataclass(frozen=True)
class Parts:
    """What a recovery uses."""

    load: Aggregates
    destination: Destination
    unit: UnitOfWork  # every save: one append per decision
    abort: Callable[[str, str, str, str], MigrationView]  # (namespace, id, reason, actor)


def recover(parts: Parts, kind: str, namespace: str, schedule_id: str, *,
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
        return parts.abort(namespace, schedule_id, reason, actor)
    args = (parts, namespace, schedule_id, actor, reason)
    steps: dict[str, Callable[[], MigrationView]] = {
        "adopt": partial(_adopt, *args, request_id),
        "rearm": partial(_rearm, *args, confirm_no_destination_run),
        "resolve": partial(_resolve, *args, resolution or "", first_run_id),
        "bind": partial(_bind, *args),
    }
    return retry_call(steps[kind], **parts.unit.on_conflict(RecoveryRefused(
        "the migration kept changing under a running worker; retry")))


def _load(parts: Parts, namespace: str,
          schedule_id: str) -> tuple[Schedule, Migration | None]:
    source = parts.load.source(namespace, schedule_id)
    return source, parts.load.migration(source.state.fence_migration_id)


def _state_of(mig: Migration | None) -> MigrationState | None:
    return None if mig is None else mig.state


def _adopt(parts: Parts, namespace: str, schedule_id: str, actor: str,
           reason: str, request_id: str | None) -> MigrationView:
    source, mig = _load(parts, namespace, schedule_id)
    rid, other_id = h.adoption_id(source.state, request_id)
    other = parts.load.migration(other_id)
    change = h.adopt(source.state, _state_of(mig), actor, reason, rid,
                     other.state.migration_id if other is not None else None,
                     accept_binding(parts.destination, namespace))
    return _save(parts, "adopt", change, source, mig)  # the id and the fence agree


def _bind(parts: Parts, namespace: str, schedule_id: str, actor: str,
          reason: str) -> MigrationView:
    source, mig = _load(parts, namespace, schedule_id)
    binding = accept_binding(parts.destination, namespace)
    change = h.bind(source.state, _state_of(mig), actor, reason, binding)
    return _save(parts, "bind", change, source, mig)


def _gate(parts: Parts, mig: Migration | None) -> None:
    """A recovery that looks at the destination does so only on the migration's own."""
    if mig is not None:
        st = mig.state
        check_bound(f"migration {st.namespace}/{st.schedule_id}", st.destination,
                    parts.destination, bind_hint(st.namespace, st.schedule_id))


def _rearm(parts: Parts, namespace: str, schedule_id: str, actor: str,
           reason: str, confirmed: bool) -> MigrationView:
    source, mig = _load(parts, namespace, schedule_id)
    epoch, look = parts.load.epoch(), None
    needs_look = h.rearm_needs_look(source.state, _state_of(mig), confirmed, epoch)
    _gate(parts, mig)  # the protocol's refusals first; then nothing off its destination
    if needs_look:
        st = mig.state  # type: ignore[union-attr]  # a look is needed only with a migration
        look = r.Look(current=_describe(parts, st.namespace, st.workflow_id))
    change = h.rearm(source.state, _state_of(mig), actor, reason, confirmed=confirmed,
                     look=look, epoch=epoch)
    return _save(parts, "rearm", change, source, mig)


def _resolve(parts: Parts, namespace: str, schedule_id: str, actor: str,
             reason: str, resolution: str, first_run_id: str | None) -> MigrationView:
    source, mig = _load(parts, namespace, schedule_id)
    st = h.resolve_check(source.state, _state_of(mig), resolution, first_run_id)
    _gate(parts, mig)  # the protocol's refusals first; then nothing off its destination
    look = r.Look(current=_describe(parts, st.namespace, st.workflow_id),
                  named=_describe(parts, st.namespace, st.workflow_id, first_run_id)
                  if first_run_id else None)
    change = h.resolve(source.state, st, actor, reason, resolution, first_run_id, look)
    return _save(parts, "resolve", change, source, mig)


def _save(parts: Parts, label: str, change: h.Change, source: Schedule,
          mig: Migration | None) -> MigrationView:
    parts.unit.save(label, *change.apply(source, mig))  # one append, both aggregates
    assert mig is not None
    return MigrationView.of(mig.state, mig.version)


def _describe(parts: Parts, namespace: str, workflow_id: str,
              run_id: str | None = None) -> RunDescription | None:
    try:
        return parts.destination.describe(namespace, workflow_id, run_id)
    except DestinationNotFound:
        return None
    except DestinationUnavailable as exc:
        raise command_error(exc, "the recovery check") from exc
