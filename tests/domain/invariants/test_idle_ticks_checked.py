"""Histories written before an idle pass wrote nothing (a ``TimesProcessed`` per pass, most of
them moving only the cursor) and after (only passes in which a time passed) both fold and
pass the checker's I17 and I18; and the checker still sees a time a history passed over
without accounting for it, in either shape."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from schedfence.domain.invariants.checker import check_history
from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.program import Program
from schedfence.domain.source.runs import TimesProcessed
from schedfence.domain.source.schedule import Schedule
from schedfence.domain.source.scheduling import tick
from schedfence.domain.source.spec import make_spec

T0 = datetime(2026, 12, 5, 7, 0, tzinfo=timezone.utc)


def history(every_pass_writes: bool, passes: int = 40) -> list:
    """A schedule every 10 s ticked once a second; ``every_pass_writes``: the old shape."""
    source = Schedule.create("ns", "s", 1, False, "", None, 0, Program(
        make_spec(intervals=[(10, 0)]),
        make_action(workflow_type="W", task_queue="q", workflow_id="act"),
        make_policies(overlap="allow_all")), now=T0)
    for k in range(1, passes + 1):
        source.record(tick(source.state, T0 + timedelta(seconds=k), settle=every_pass_writes))
    return source.collect_events()


def test_both_shapes_fold_to_the_same_starts_and_pass_i17_and_i18():
    old, new = history(True), history(False)
    assert sum(isinstance(e, TimesProcessed) for e in old) == 40
    assert sum(isinstance(e, TimesProcessed) for e in new) == 4
    assert check_history(enumerate(old, 1)) == [] and check_history(enumerate(new, 1)) == []
    issued = [[e.nominal for e in h if type(e).__name__ == "ActionStartIssued"]
              for h in (old, new)]
    assert issued[0] == issued[1] and len(issued[0]) == 4
    assert fold(old) == fold(new)  # the last pass is a time's: even the cursors agree


def fold(events: list):
    state = None
    for event in events:
        state = Schedule.evolve(state, event)
    return state


def test_a_time_passed_over_without_a_record_is_flagged_in_either_shape():
    for shape in (True, False):
        events = history(shape)
        first = next(i for i, e in enumerate(events)
                     if isinstance(e, TimesProcessed) and e.due)
        events[first] = events[first].model_copy(update={"due": []})  # the time lost
        assert [v.invariant for v in check_history(enumerate(events, 1))] == ["I18"]
