"""What a schedule runs and when: its program (spec, action, policies, limit), checked as a
whole, recorded as JSON documents on ``Schedule.Created``, and read back from the state."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from schedfence.domain.source.action import SchedulePolicies, StartWorkflowAction, check_action, parse_nominal
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.spec import ScheduleSpec, check_spec, times_after

if TYPE_CHECKING:
    from schedfence.domain.source.state import ScheduleState

MAX_LIMIT = 10**9  # remaining actions


@dataclass(frozen=True)
class Program:
    """What a schedule runs and when: its spec, action, policies and limit (each optional)."""

    spec: ScheduleSpec | None = None
    action: StartWorkflowAction | None = None
    policies: SchedulePolicies | None = None
    remaining_actions: int | None = None

    def check(self) -> Program:
        """A spec needs an action and an action a spec; policies and a limit need both."""
        if (self.spec is None) != (self.action is None):
            missing = "action" if self.action is None else "spec"
            raise InvalidArgument(f"{missing}: a schedule that runs needs both a spec (interval "
                                  "or cron) and an action (workflow type and task queue)")
        if self.spec is None and (self.policies is not None or
                                  self.remaining_actions is not None):
            raise InvalidArgument("spec: policies and a limit apply only to a schedule with a "
                                  "spec and an action")
        n = self.remaining_actions
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or
                              not 0 <= n <= MAX_LIMIT):
            raise InvalidArgument("limit: must be a whole number of actions from 0 to 10^9")
        # the parts by today's rules, however they were built (a caller of the Python API may
        # pass models it did not make with make_spec / make_action)
        if self.spec is not None:
            check_spec(self.spec)
        if self.action is not None:
            check_action(self.action)
        return self

    def fields(self) -> dict[str, Any]:
        """As ``Schedule.Created`` records them: JSON documents, None where absent."""
        def doc(model: Any) -> dict[str, Any] | None:
            return None if model is None else model.model_dump(mode="json")
        return {"spec": doc(self.spec), "action": doc(self.action),
                "policies": doc(self.policies), "remaining_actions": self.remaining_actions}


def program_of(state: ScheduleState) -> Program:
    """What the schedule runs and when, read back from its state."""
    return Program(None if state.spec is None else ScheduleSpec.model_validate(state.spec),
                   None if state.action is None else
                   StartWorkflowAction.model_validate(state.action),
                   None if state.policies is None else
                   SchedulePolicies.model_validate(state.policies), state.remaining_actions)


def policies_in(state: ScheduleState) -> SchedulePolicies:
    """The schedule's policies (Temporal's defaults where it has none), read back alone: a
    decision that reads only them does not validate the whole program (``program_of``)."""
    return SchedulePolicies() if state.policies is None else \
        SchedulePolicies.model_validate(state.policies)


def upcoming(state: ScheduleState, now: datetime, count: int = 5) -> list[datetime]:
    """The next ``count`` nominal times after ``now`` (and after the cursor), or none."""
    spec = program_of(state).spec
    if spec is None or state.closed:
        return []
    after = max(now, parse_nominal(state.cursor)) \
        if state.cursor else now
    return list(itertools.islice(times_after(spec, after), count))
