"""The settle's limit update against a fake server that behaves as Temporal's scheduler was
measured to (tests/contract/test_temporal_schedule_create.py): each own start lowers the
remaining count and moves the conflict token; an update under a moved token is answered OK
and dropped; one under the current token applies and sets the update time. Own starts are
injected between the settle's describe and its update, the race a real server makes at
random (and tests/e2e/test_temporal_handover_policies_e2e.py makes on one)."""
from __future__ import annotations

import pytest
from temporalio.api.schedule.v1 import Schedule, ScheduleState
from temporalio.api.workflowservice.v1 import DescribeScheduleResponse

from schedfence.domain.ports import DestinationUnavailable, RunDescription, StartWorkflow
from schedfence.infra.adapters.destination.temporal_schedule import LIMIT_TRIES, _count_against_limit

CHAIN = "first-run"  # the receipt's first run id of the scheduler workflow
REQUEST = StartWorkflow("default", "temporal-sys-scheduler:s1", "R1", "scheduler", {})


class RacingServer:
    """A limited schedule whose server takes ``races[i]`` own starts just before the i-th
    update lands (after the settle's describe)."""

    identity = "test"

    def __init__(self, remaining: int, races: list[int]) -> None:
        self.remaining, self.token, self.updated = remaining, 1, False
        self.races, self.updates = list(races), []

    def own_starts(self, n: int) -> None:
        self.remaining, self.token = self.remaining - n, self.token + n

    def snapshot(self) -> DescribeScheduleResponse:
        desc = DescribeScheduleResponse(
            schedule=Schedule(state=ScheduleState(limited_actions=True,
                                                  remaining_actions=self.remaining)),
            conflict_token=self.token.to_bytes(8, "big"))
        if self.updated:
            desc.info.update_time.GetCurrentTime()
        return desc

    def describe(self, namespace, workflow_id, run_id=None):  # the scheduler's chain: ours
        return RunDescription(CHAIN, CHAIN, "scheduler", "running")

    def _rpc(self, what, method, request, to_error):
        if method == "describe_schedule":
            return self.snapshot()
        assert method == "update_schedule"
        self.own_starts(self.races.pop(0) if self.races else 0)
        self.updates.append((int.from_bytes(request.conflict_token, "big"),
                             request.schedule.state.remaining_actions, request.request_id))
        if int.from_bytes(request.conflict_token, "big") == self.token:  # else: dropped, OK
            self.remaining, self.token, self.updated = \
                request.schedule.state.remaining_actions, self.token + 1, True
        return None


def test_an_update_an_own_start_overtook_is_written_again_from_a_fresh_describe():
    """Create left 5, the boundary holds 2: one own start lands under the first update, which
    the server drops; the settle sees no update applied, reads 4 and writes 2 (not 3, what
    the old settle left standing: one start more than a never-migrated schedule)."""
    server = RacingServer(remaining=5, races=[1])
    _count_against_limit(server, REQUEST, CHAIN, server.snapshot(), 2)
    assert [(token, target) for token, target, _ in server.updates] == [(1, 3), (2, 2)]
    assert server.remaining == 2 and server.updated
    assert len({request_id for *_, request_id in server.updates}) == 2  # not deduplicated
    server.own_starts(1)  # the settle asked again later (a crash) writes nothing
    _count_against_limit(server, REQUEST, CHAIN, server.snapshot(), 2)
    assert len(server.updates) == 2 and server.remaining == 1


def test_a_token_moving_under_every_update_is_an_unknown_outcome_asked_again():
    server = RacingServer(remaining=50, races=[1] * LIMIT_TRIES)
    with pytest.raises(DestinationUnavailable, match="moved under the limit's update"):
        _count_against_limit(server, REQUEST, CHAIN, server.snapshot(), 2)
    assert not server.updated and server.remaining == 50 - LIMIT_TRIES
    _count_against_limit(server, REQUEST, CHAIN, server.snapshot(), 2)  # the retry, undisturbed
    assert server.remaining == 50 - LIMIT_TRIES - 2


def test_no_race_one_update():
    server = RacingServer(remaining=5, races=[])
    _count_against_limit(server, REQUEST, CHAIN, server.snapshot(), 2)
    assert [(t, r) for t, r, _ in server.updates] == [(1, 3)] and server.remaining == 3
