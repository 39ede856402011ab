"""What an operator may do about a forward migration (domain/forward/aggregate.py) that needs one.

The rollback's on-call advice (projections/oncall.py) has a forward twin here: each verdict is a
dry run of the decision that guards the command (``check_abortable``, ``check_takeover``), and
only the wording lives here. Nothing is recorded.
"""
from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from schedfence.domain.forward import steps as fs
from schedfence.domain.forward.aggregate import OPEN_PHASES, ForwardState

from .oncall import ALLOWED, dry_run, stall_line

TAKE_OVER_CHECK = "allowed once the Temporal schedule is confirmed gone (the command checks)"

# What each park reason means for the operator, and what to do about it.
_PARK_ADVICE = {
    "schedule_not_found": "no Temporal schedule was at the key when the fence was due; nothing "
                          "was changed: abort it",
    "unsupported_schedule": "the Temporal schedule uses what the source cannot run; abort it "
                            "(the schedule gets its pre-fence pause and notes back)",
    "buffered_starts": "the Temporal schedule has buffered starts; let them run, then abort "
                       "and ask again",
    "fence_contended": "the Temporal schedule kept changing under the fence; abort (its "
                       "pre-fence pause and notes come back) and ask again when it is quiet",
    "source_exists": "a live source runs the schedule already; abort",
    "key_not_held": "another migration holds the schedule's key; abort this one",
    "marker_without_issue": "the Temporal schedule carries this request's marker with no "
                            "recorded fence; check it by hand, then abort",
    "deleted_elsewhere": "someone deleted the Temporal schedule during the handoff and the "
                         "source waits dormant: take it over if the delete was meant (the "
                         "source runs the schedule), or abort (the dormant source closes)",
    "fence_broken": "the Temporal schedule changed after the fence (someone unpaused or "
                    "re-noted it); the dormant source never acted: abort (it closes and the "
                    "Temporal schedule keeps running)",
}


@dataclass(frozen=True)
class ForwardOnCallItem:
    category: str  # parked | stuck
    migration: dict[str, Any]  # the forward migration's view (without the handover)
    verdicts: dict[str, str] = field(default_factory=dict)  # action -> allowed | refused: why
    actions: list[str] = field(default_factory=list)  # advice, most useful first
    stall: dict[str, Any] | None = None  # attempts that keep failing (projections/oncall.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def view(st: ForwardState, idle_seconds: float) -> dict[str, Any]:
    doc = asdict(st)
    doc.pop("handover", None)
    return {"migration_id": st.migration_id, **doc, "idle_seconds": round(idle_seconds, 3)}


def category(st: ForwardState, idle_seconds: float, stuck_after: float) -> str | None:
    if st.phase == "parked":
        return "parked"
    if st.phase in OPEN_PHASES and idle_seconds >= stuck_after:
        return "stuck"
    return None


def verdicts(st: ForwardState) -> dict[str, str]:
    take_over = dry_run(lambda: fs.check_takeover(st, None))
    return {"abort": dry_run(lambda: fs.check_abortable(st)),
            "take_over": TAKE_OVER_CHECK if take_over == ALLOWED else take_over}


def commands(st: ForwardState) -> dict[str, str]:
    """Operator action → its complete command (YOU and WHY are the operator's values)."""
    args = " ".join(shlex.quote(a) for a in (st.namespace, st.schedule_id, st.request_id))
    return {"abort": f"schedfence forward-abort {args} --actor YOU --reason WHY",
            "take_over": f"schedfence forward-take-over {args} --actor YOU"}


def actions(st: ForwardState, idle_seconds: float, allowed: dict[str, str]) -> list[str]:
    """Advice lines: the situation, then one line per allowed command (at its end after ": ")."""
    if st.phase == "parked":
        reason = st.park_reason or ""
        lines = [f"parked {reason}: {_PARK_ADVICE.get(reason, 'check it, then abort')}"]
    else:
        lines = [f"no worker has moved it ({st.phase}) for {idle_seconds:.0f}s: check that a "
                 "worker with a Schedules API destination runs against this store"]
    cmd = commands(st)
    for action in ("take_over", "abort"):
        if allowed[action].startswith(ALLOWED):
            lines.append(f"{action.replace('_', '-')} {allowed[action]}: {cmd[action]}")
    return lines


def item(st: ForwardState, idle_seconds: float, stuck_after: float,
         stall: dict[str, Any] | None = None) -> ForwardOnCallItem | None:
    """``stall``: what ``current_stall`` gives (None: no failed attempt since the last
    event)."""
    kind = category(st, max(idle_seconds, stall["stalled_seconds"] if stall else 0.0),
                    stuck_after)
    if kind is None:
        return None
    allowed = verdicts(st)
    advice = actions(st, idle_seconds, allowed)
    if stall is not None and kind == "stuck":
        advice.insert(0, stall_line(stall))  # a worker runs: what it keeps running into
    return ForwardOnCallItem(kind, view(st, idle_seconds), allowed, advice, stall)


def current_stall(stall: dict[str, Any] | None, last_event: float,
                  now: float) -> dict[str, Any] | None:
    """A stall row (infra/engines/stalls.py) that still stands, no event of the migration
    (at ``last_event``, seconds since the epoch) after its last failure, with how long it
    has lasted; None otherwise."""
    if stall is None or stall["at_us"] < int(last_event * 1e6):
        return None
    return dict(stall, stalled_seconds=round(max(now - stall["since_us"] / 1e6, 0.0), 3))


def oncall_doc(stuck_after: float, items: list[Any], forward: list[ForwardOnCallItem],
               ownership: list[dict[str, Any]] | None = None,
               schedules: list[Any] | None = None) -> dict[str, Any]:
    """The on-call document: rollback items (projections/oncall.py), then forward ones, then
    the drift of each namespace's last ownership audit (infra/application/owners_doc.py),
    then the schedules whose scheduler step keeps failing (projections/schedule_oncall.py)."""
    return {"stuck_after_seconds": stuck_after, "items": [i.to_dict() for i in items],
            "forward": [i.to_dict() for i in forward], "ownership": list(ownership or []),
            "schedules": [i.to_dict() for i in schedules or []]}
