"""A pinned (limited) handover's settle against a fake server that behaves as Temporal's
scheduler was measured to: own starts lower the count and move the conflict token, an update
under a moved token is answered OK and dropped. The pin is in the past, so the settle does
not wait."""
from __future__ import annotations

from dataclasses import replace

import pytest
from datetime import datetime, timedelta, timezone

from temporalio.api.workflowservice.v1 import DescribeScheduleResponse

from schedfence.domain.source.action import make_action, make_policies, nominal_text
from schedfence.domain.rollback.handover import SECOND, handover_of, pin_plan
from schedfence.domain.ids import (SCHEDULER_WORKFLOW_TYPE, WORKFLOW_ID_PREFIX,
                                   destination_workflow_id)
from schedfence.domain.ports import DestinationNotFound, RunDescription, StartWorkflow
from schedfence.domain.source.program import Program
from schedfence.domain.source.state import ScheduleState
from schedfence.domain.source.spec import make_spec
from schedfence.infra.adapters.destination.schedule_proto import pin_stands, timestamp, to_temporal
from schedfence.infra.adapters.destination.temporal_schedule import settle_handover

CURSOR = datetime(2026, 1, 5, 10, 0, tzinfo=timezone.utc)  # long past
PIN = CURSOR + 6 * SECOND  # owed before it: 5 times
CHAIN = "first-run"  # the receipt's first run id of the scheduler workflow


def start(limit: int) -> StartWorkflow:
    program = Program(make_spec(intervals=[(1, 0)]),
                      make_action(workflow_type="W", task_queue="q", workflow_id="a"),
                      make_policies(overlap="allow_all"), limit)
    state = replace(ScheduleState("ns", "s1", 1, False, ""), **program.fields(),
                    cursor=nominal_text(CURSOR))
    h = handover_of(state, False, "").model_dump(mode="json")
    return StartWorkflow("ns", destination_workflow_id("s1"), "R1", SCHEDULER_WORKFLOW_TYPE,
                         {"paused": False, "notes": "", "handover": h})


class PinnedServer:
    """The schedule the create of ``request`` made at ``created``; ``races[i]`` own starts
    land just before the i-th update."""

    identity = "test"

    def __init__(self, request: StartWorkflow, created: datetime, races: list[int]) -> None:
        from schedfence.domain.rollback.handover import Handover
        h = Handover.model_validate(request.input["handover"])
        self.schedule, _, self.memo = to_temporal(h, pin_plan(h, PIN), PIN)
        self.created, self.token, self.races = created, 1, list(races)
        self.updates, self.patches, self.existing = [], [], set()
        self.chain = CHAIN  # the first run id of the scheduler workflow's chain
        self.on_update = lambda: None

    def own_starts(self, n: int) -> None:
        self.schedule.state.remaining_actions -= n
        self.token += n

    def describe(self, namespace, workflow_id, run_id=None):
        if workflow_id.startswith(WORKFLOW_ID_PREFIX):  # the scheduler workflow's chain
            return RunDescription(self.chain, self.chain, SCHEDULER_WORKFLOW_TYPE, "running")
        if workflow_id not in self.existing:
            raise DestinationNotFound(workflow_id)

    def _rpc(self, what, method, request, to_error):
        if method == "describe_schedule":
            desc = DescribeScheduleResponse(conflict_token=self.token.to_bytes(8, "big"),
                                            memo=self.memo)
            desc.schedule.CopyFrom(self.schedule)
            desc.info.create_time.CopyFrom(timestamp(self.created))
            return desc
        if method == "update_schedule":
            self.own_starts(self.races.pop(0) if self.races else 0)
            self.updates.append(int.from_bytes(request.conflict_token, "big"))
            if int.from_bytes(request.conflict_token, "big") == self.token:
                self.schedule.CopyFrom(request.schedule)
                self.token += 1
            self.on_update()
            return None
        assert method == "patch_schedule"
        self.patches.append(request)
        for b in request.patch.backfill_request:  # each time started (none overlap here)
            t = b.start_time.ToDatetime(tzinfo=timezone.utc)
            while t <= b.end_time.ToDatetime(tzinfo=timezone.utc):
                self.existing.add(f"a-{nominal_text(t)}")
                t += SECOND
        return None


def ranges(server: PinnedServer, i: int = 0) -> list[tuple[datetime, datetime]]:
    return [(b.start_time.ToDatetime(tzinfo=timezone.utc),
             b.end_time.ToDatetime(tzinfo=timezone.utc))
            for b in server.patches[i].patch.backfill_request]


def test_the_pin_is_cleared_with_the_count_read_then_the_whole_patch_is_sent():
    request = start(limit=8)
    server = PinnedServer(request, PIN - 3 * SECOND, races=[1])  # an own start overtakes
    server.own_starts(2)  # the server's own, from the pin on, before the settle
    done = settle_handover(server, request, CHAIN)
    assert server.updates == [3, 4]  # the first update was dropped, written again
    assert not pin_stands(server.schedule.spec, server.memo)
    assert not server.schedule.spec.HasField("start_time")  # the user's own (none)
    assert server.schedule.state.remaining_actions == 3 - 2 - 1  # 8 - 5 owed, less 3 own
    assert ranges(server) == [(CURSOR + SECOND, PIN - SECOND)]
    assert done.pin == nominal_text(PIN) and len(done.started) == 5 and done.over_limit == 0
    again = settle_handover(server, request, CHAIN)  # a repeat: nothing written, nothing asked
    assert server.updates == [3, 4] and again.started == [] and len(server.patches) == 1


def test_a_create_slower_than_the_lead_hands_its_late_times_to_the_settle_and_the_count():
    request = start(limit=10)
    server = PinnedServer(request, PIN + 2 * SECOND + timedelta(milliseconds=300), races=[])
    done = settle_handover(server, request, CHAIN)
    late = [PIN, PIN + SECOND, PIN + 2 * SECOND]  # never the server's own (before its instant)
    assert done.started[-3:] == [nominal_text(t) for t in late]
    assert server.schedule.state.remaining_actions == 10 - 5 - 3
    assert ranges(server)[-3:] == [(t, t) for t in late]
    assert done.over_limit == 0  # the count left room for the late times


def test_a_slow_create_whose_count_the_server_used_first_records_the_overrun():
    """Limit 8: 5 owed before the pin leave 3 for the server; the create lands 2.3 s after
    the pin (3 late times) and the server's own 2 starts come before the clear: 2 beyond the
    limit, which no write can take back. The settle still starts the late times (a
    never-migrated schedule would have started them, before the server's), clears the count
    to 0, and says how far it went over, for the log and the checker (I21)."""
    request = start(limit=8)
    server = PinnedServer(request, PIN + 2 * SECOND + timedelta(milliseconds=300), races=[])
    server.own_starts(2)
    done = settle_handover(server, request, CHAIN)
    assert done.started[-3:] == [nominal_text(PIN + i * SECOND) for i in range(3)]
    assert server.schedule.state.remaining_actions == 0 and done.over_limit == 2
    again = settle_handover(server, request, CHAIN)  # a repeat cannot read it any more
    assert again.over_limit is None and again.started == []


def test_a_settle_that_finds_the_pin_cleared_asks_only_for_what_has_not_started():
    """A crash after the clear and part of the patch's starts (its dedupe lost: the server's
    scheduler continued as new): the repeat writes no update and asks for the rest."""
    request = start(limit=8)
    server = PinnedServer(request, PIN - 3 * SECOND, races=[])
    server.schedule.spec.ClearField("start_time")  # cleared by the settle that died
    server.existing = {f"a-{nominal_text(CURSOR + i * SECOND)}" for i in (1, 2)}
    done = settle_handover(server, request, CHAIN)
    assert server.updates == []
    rest = [CURSOR + i * SECOND for i in (3, 4, 5)]
    assert done.started == [nominal_text(t) for t in rest]
    assert ranges(server) == [(t, t) for t in rest]


@pytest.mark.parametrize("replaced_after", [0, 1])
def test_a_schedule_re_created_by_someone_else_is_never_written(replaced_after):
    """Deleted and re-created at the id (its chain begins with another run; its conflict
    token, like every new schedule's, may be 1 again): the settle writes nothing to it, before
    the first update or between the update and the patch, and answers not found, so the
    deleted one's settle follows."""
    request = start(limit=8)
    server = PinnedServer(request, PIN - 3 * SECOND, races=[])
    if replaced_after == 0:
        server.chain = "theirs"
    else:  # replaced once the pin's update is in
        server.on_update = lambda: setattr(server, "chain", "theirs")
    with pytest.raises(DestinationNotFound, match="re-created"):
        settle_handover(server, request, CHAIN)
    assert server.patches == [] and len(server.updates) == replaced_after
