"""A commit whose reply is lost (the server committed, then the connection broke) is an unknown
outcome. The store retries the insert, and the retry meets its own rows: that must read as the
unknown outcome it is, never as another writer's conflict.

Found by tests/e2e/test_db_restart.py: a batch whose answer save lost its reply took the retry's
duplicate for a lost race, and recorded the start's answer again on top of its own receipt
(the checker's I8); a batch whose claim save lost its reply never sent those starts, and each
migration parked ``head_missing``."""
from __future__ import annotations

from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, OperationalError

import schedfence.infra.adapters.store.recorder_guard as fence_store
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service
from tests.helpers import Hooks
from tests.infra.engines.test_batch import NS, SIDS, _accepted
from schedfence.domain.ids import destination_workflow_id

DROPPED = "consuming input failed: server closed the connection unexpectedly"


def _guarded(*answers: Any) -> Any:
    """A guarded write whose attempts answer ``answers`` in turn (an exception is raised)."""
    queue = list(answers)

    def call() -> str:
        answer = queue.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer
    return fence_store._guarded(call, 3, True, lambda exc: None)


def test_a_retry_that_meets_its_own_rows_is_the_first_failure(monkeypatch) -> None:
    monkeypatch.setattr(fence_store, "STORE_RETRY_WAIT", 0)
    lost = OperationalError(DROPPED)
    with pytest.raises(OperationalError) as err:
        _guarded(lost, IntegrityError("duplicate key"))()
    assert err.value is lost and "may have committed" in err.value.__notes__[0]


def test_a_first_attempt_duplicate_is_still_a_conflict(monkeypatch) -> None:
    monkeypatch.setattr(fence_store, "STORE_RETRY_WAIT", 0)
    with pytest.raises(IntegrityError):
        _guarded(IntegrityError("duplicate key"))()
    assert _guarded(OperationalError(DROPPED), "saved")() == "saved"  # a plain retry


def _lose_the_reply_of_next_save(svc: Any, hooks: Hooks, label: str) -> None:
    """At ``label``'s append, the server commits and the reply never comes back."""
    recorder, armed = svc.app.recorder, []
    inner = type(recorder).insert_events.__wrapped__.__get__(recorder)

    def commit_then_drop(*args: Any, **kwargs: Any) -> Any:
        result = inner(*args, **kwargs)
        if armed and armed.pop():  # as eventsourcing wraps psycopg's error
            raise OperationalError(DROPPED) from psycopg.OperationalError(DROPPED)
        return result
    recorder.insert_events = fence_store._guarded(commit_then_drop, fence_store.STORE_RETRIES,
                                                  True, svc.app._timeout_of)
    hooks.once(f"{label}.before_append", lambda: armed.append(True))


@pytest.mark.parametrize("label", ["claim", "answer", "close"])
def test_a_batch_save_whose_reply_was_lost_starts_once_and_records_once(pg_store, label) -> None:
    dest, hooks = SimulatedDestination(), Hooks()
    with open_service(pg_store, dest, crash_hook=hooks, worker_id="w", claim_grace=0) as svc:
        ids = _accepted(svc)
        _lose_the_reply_of_next_save(svc, hooks, label)
        try:
            svc.worker.attempt_batch(ids)
        except OperationalError:
            pass  # the batch stops on an unknown save, as on any store failure
        assert f"{label}.before_append" in hooks.points  # the reply was lost
        svc.run_until_idle(retry_for=0)
        assert {svc.migration(NS, s).state for s in SIDS} == {"completed"}
        assert all(dest.created_count(NS, destination_workflow_id(s)) == 1 for s in SIDS)
        assert svc.verify() == []
