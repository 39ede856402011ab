"""What the server refuses is refused by the service, nothing written (issue 27, item 10).

A create given models built without make_spec / make_action (the Python API) is checked by
today's rules all the same. A rollback asks the destination, before its fence, whether its namespace registered the
action's search attributes (and their types): an action the server would refuse is refused
``invalid_argument`` naming ``search_attributes``, nothing written, instead of the rollback
parking ``start_rejected`` after the fence (issue 27, item 10). A destination that cannot
tell (the simulator) is not asked."""
from __future__ import annotations

import pytest

from schedfence.domain.source.action import StartWorkflowAction, make_action
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.spec import ScheduleSpec, make_spec
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from tests.helpers import NS, SID, new_world, nothing_written


class Registry(SimulatedDestination):
    def __init__(self, registered: dict[str, str]) -> None:
        super().__init__()
        self.registered, self.asked = registered, 0

    def search_attribute_types(self, namespace: str) -> dict[str, str]:
        self.asked += 1
        return dict(self.registered)


def _created(dest: SimulatedDestination, attributes: dict) -> object:
    w = new_world(dest=dest)
    w.service.create_schedule(NS, SID, spec=make_spec(intervals=[(60, 0)]), action=make_action(
        workflow_type="W", task_queue="q", workflow_id="a", search_attributes=attributes))
    return w


@pytest.mark.parametrize("attributes", [{"Missing": "x"}, {"Count": "seven"}])
def test_a_rollback_of_unregistered_search_attributes_is_refused_unwritten(attributes):
    dest = Registry({"Count": "Int"})
    w = _created(dest, attributes)
    with nothing_written(w.service), pytest.raises(InvalidArgument) as no:
        w.service.rollback(NS, SID, "R1")
    assert str(no.value).startswith("search_attributes: ") and dest.asked == 1
    assert w.service.schedule(NS, SID).paused is False  # never fenced
    w.service.close()


def test_registered_search_attributes_roll_back_and_the_simulator_is_not_asked():
    dest = Registry({"Count": "Int"})
    w = _created(dest, {"Count": 7})
    assert w.service.rollback(NS, SID, "R1").outcome == "accepted" and dest.asked == 1
    w.service.close()
    w = _created(SimulatedDestination(), {"Anything": "x"})
    assert w.service.rollback(NS, SID, "R1").outcome == "accepted"
    w.service.close()


def test_a_bulk_rollback_answers_the_same_refusal_in_that_schedules_place():
    dest = Registry({})
    w = _created(dest, {"Missing": "x"})
    with nothing_written(w.service):
        [answer] = w.service.rollback_many(NS, [SID], ["R1"])
    assert isinstance(answer, InvalidArgument)
    assert str(answer).startswith("search_attributes: ")
    w.service.close()


@pytest.mark.parametrize("spec, action, field", [
    (ScheduleSpec(cron_expressions=("*/99999999999999999999 * * * *",)), None, "cron"),
    (None, StartWorkflowAction(workflow_type="W", task_queue="temporal-sys-per-ns-tq",
                               workflow_id="a"), "task_queue"),
])
def test_a_create_with_models_made_past_the_rules_is_refused_unwritten(spec, action, field):
    w = new_world()
    spec = spec or make_spec(intervals=[(60, 0)])
    action = action or make_action(workflow_type="W", task_queue="q", workflow_id="a")
    with nothing_written(w.service), pytest.raises(InvalidArgument, match=f"^{field}: "):
        w.service.create_schedule(NS, SID, spec=spec, action=action)
    w.service.close()
