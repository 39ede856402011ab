"""Cron schedules across the handoff on a real Temporal dev server.

The server keeps a cron string as a structured calendar. A source schedule with cron strings is
handed to a Temporal Schedule (the rollback), the server's next action times are the ones the
source would have run, and a forward migration reads the calendar back as the same cron strings
and time zone. A calendar no cron string says the same for (both the day of month and the day
of week restricted: Temporal matches both, cron either) parks ``unsupported_schedule``."""
from __future__ import annotations

import uuid
from datetime import timedelta, timezone
from itertools import islice
from pathlib import Path

import pytest

from schedfence.domain.errors import NotFound
from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.spec import ScheduleSpec, make_spec, times_after
from schedfence.infra.application.service import open_service
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env  # noqa: F401

CASES = [  # (cron strings, time zone): none fires within the test's minute
    (("*/15 9-17 * * 1-5",), "UTC"),
    (("30 2 * 6 *", "0 0 29 2 *"), "UTC"),
    (("45 6 * * 0,6",), "America/New_York"),
]


def _create(svc, sid: str, tag: str, spec: ScheduleSpec) -> None:
    svc.create_schedule(NS, sid, notes="cron", spec=spec,
                        action=make_action(workflow_type=f"Cron{tag}", task_queue=f"q-{tag}",
                                           workflow_id=f"cron-{tag}"),
                        policies=make_policies(overlap="skip"))


def test_cron_schedules_keep_their_times_both_ways(temporal_env: TemporalEnv,
                                                   tmp_path: Path) -> None:
    dest = temporal_env.destination
    with open_service(f"sqlite:///{tmp_path / 'fence.db'}", dest, worker_id="e2e") as svc:
        for n, (crons, tz) in enumerate(CASES):
            tag = uuid.uuid4().hex[:8]
            sid, spec = f"cron-{n}-{tag}", make_spec(cron=list(crons), time_zone=tz)
            _create(svc, sid, tag, spec)
            svc.rollback(NS, sid, f"R-{tag}")
            svc.run_until_idle(retry_for=10.0)
            assert svc.migration(NS, sid).state == "completed"
            # The server runs the times the source would have run.
            raw = temporal_env.ops.describe_schedule(sid)
            server = [t.ToDatetime(tzinfo=timezone.utc) for t in raw.info.future_action_times]
            assert len(server) >= 3, raw.info
            ours = list(islice(times_after(spec, server[0] - timedelta(seconds=1)), len(server)))
            assert ours == server, (crons, tz)
            # Read back: the same cron strings and zone.
            program = dest.describe_schedule(NS, sid).program
            assert "unsupported" not in program, program
            back = ScheduleSpec.model_validate(program["spec"])
            assert (back.cron_expressions, back.time_zone) == (spec.cron_expressions, tz)
            assert svc.forward(NS, sid, f"F-{tag}").outcome == "accepted"
            svc.run_until_idle(retry_for=20.0)
            assert svc.forward_state(NS, sid, f"F-{tag}").phase == "completed"
            source = svc.load.source(NS, sid).state
            assert source.incarnation == 2
            assert ScheduleSpec.model_validate(source.spec) == spec
        assert svc.verify() == []


def _theirs_parks_unsupported(env: TemporalEnv, svc, sid: str, cron: str, zone: str,
                              named: str) -> None:
    """A Temporal Schedule made with the SDK at ``cron`` in ``zone``, taken back: the forward
    parks ``unsupported_schedule`` naming ``named`` before its fence, the schedule runs on
    untouched (unpaused, its notes), and nothing is created on the source."""
    from temporalio.client import (Schedule, ScheduleActionStartWorkflow, ScheduleSpec as Spec,
                                   ScheduleState)
    schedule = Schedule(action=ScheduleActionStartWorkflow(f"W{sid}", id=f"act-{sid}",
                                                           task_queue=f"q-{sid}"),
                        spec=Spec(cron_expressions=[cron], time_zone_name=zone),
                        state=ScheduleState(note="theirs"))
    env.ops.run(lambda: env.ops.client.create_schedule(sid, schedule))
    svc.forward(NS, sid, f"F-{sid}")
    svc.run_until_idle(retry_for=10.0)
    st = svc.forward_state(NS, sid, f"F-{sid}")
    assert (st.phase, st.park_reason) == ("parked", "unsupported_schedule")
    assert named in st.park_detail
    desc = env.ops.describe_schedule(sid)
    assert (desc.schedule.state.paused, desc.schedule.state.notes) == (False, "theirs")
    with pytest.raises(NotFound):  # nothing created on the source
        svc.load.source(NS, sid)


def test_a_calendar_whose_days_cron_reads_otherwise_parks_unsupported(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    with open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                      worker_id="e2e") as svc:  # a 1st that is a Monday
        _theirs_parks_unsupported(temporal_env, svc, f"both-days-{uuid.uuid4().hex[:8]}",
                                  "0 12 1 * 1", "UTC", "day of week")


def test_a_clock_change_hour_is_refused_both_ways_before_any_fence(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    """At 02:30 New York the source runs the spring-forward day's time once at 03:00 and the
    autumn's once; Temporal's scheduler never and twice. A rollback of such a schedule is
    refused naming ``cron`` (nothing written, the source runs on), and a Temporal Schedule at
    that hour taken back parks ``unsupported_schedule`` before its fence."""
    from schedfence.domain.errors import InvalidArgument
    tag = uuid.uuid4().hex[:8]
    with open_service(f"sqlite:///{tmp_path / 'fence.db'}", temporal_env.destination,
                      worker_id="e2e") as svc:
        sid = f"dst-src-{tag}"
        _create(svc, sid, tag, make_spec(cron=["30 2 * * *"], time_zone="America/New_York"))
        before = svc.event_count()
        with pytest.raises(InvalidArgument, match="^cron: "):
            svc.rollback(NS, sid, f"R-{tag}")
        assert svc.event_count() == before and not svc.schedule(NS, sid).migration_pending
        _theirs_parks_unsupported(temporal_env, svc, f"dst-tmp-{tag}", "30 2 * * *",
                                  "America/New_York", "America/New_York")
