"""The retention port on a real dev server (F16): DescribeNamespace's workflow execution
retention, and the describe that proves absence (no run at all: NOT_FOUND, never a guess)."""
from __future__ import annotations

import uuid

import pytest

from schedfence.domain.ports import DestinationNotFound, DestinationNotReached
from schedfence.domain.rollback.evidence import RETENTION_MARGIN_SECONDS
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env  # noqa: F401


def test_the_namespace_retention_is_read_live_and_leaves_room_for_the_margin(
        temporal_env: TemporalEnv) -> None:
    seconds = temporal_env.destination.retention_seconds(NS)
    assert seconds > RETENTION_MARGIN_SECONDS  # the dev server's default namespace: a day
    with pytest.raises(DestinationNotReached):  # a namespace it does not serve: unavailable
        temporal_env.destination.retention_seconds("not-served")


def test_no_run_at_all_is_not_found(temporal_env: TemporalEnv) -> None:
    with pytest.raises(DestinationNotFound):
        temporal_env.destination.describe(NS, f"temporal-sys-scheduler:{uuid.uuid4().hex}")
