"""A scheduler's batch whose step fails: it never pins the batch, nor the fleet.

A pass leases a batch of due schedules and steps them together (infra/engines/scheduler.py).
When that step raises (a poison schedule, a statement timeout, a runner that throws), the
batch is split in halves and each half stepped again, down to single schedules
(``step_in_parts``): every healthy part is stepped and settled in the same pass, and only a
schedule whose step fails alone is left. That one is given back at once, its lease freed for
any scheduler, with the failure counted in its due-index row (``ScheduleDue.fail``), where
``schedfence oncall`` and the ``schedfence_schedules_step_failing*`` metrics read it; its next
look is put off by ``backoff_seconds`` (its due time only: no event is written, and its owed
times wait as they would for a slow scheduler, under the catch-up window's rules). A step
that succeeds sets the count back to 0 (the settle).

Who is to blame. A schedule that fails where the same scheduler just stepped another one
(``blamed``: a success in this pass or in its last pass that stepped any) is put off from its
first failure. A scheduler that has stepped nothing yet, or only failed since, may itself be
what is broken (its runner, its connection): the schedules it fails are not put off, so a
healthy scheduler beside it takes them at once, unless one failed ``BLAME_AFTER`` times in a
row with no success between (by any scheduler: a success resets the count). Where every
scheduler is broken, putting a schedule off costs nothing.

A lease stays an efficiency device: every step is still checked against the stored version,
and a start's request id makes a second try a dedupe (I17).
"""
from __future__ import annotations

from typing import Callable

from schedfence.infra.pacing import doubling

BASE_BACKOFF = 1.0  # seconds after a schedule's first blamed failure; doubles per failure
MAX_BACKOFF = 60.0
BLAME_AFTER = 3  # failures in a row after which an unhealthy scheduler puts a schedule off


def backoff_seconds(failures: int, blamed: bool) -> float:
    """How long a schedule that failed alone ``failures`` times in a row waits before it is
    looked at again (0: due at once): exponential, capped at ``MAX_BACKOFF``."""
    if not blamed:
        if failures < BLAME_AFTER:
            return 0.0
        failures -= BLAME_AFTER - 1
    return doubling(BASE_BACKOFF, MAX_BACKOFF, min(failures, 32))


def step_in_parts(ids: list[str], attempt: Callable[[list[str]], Exception | None],
                  failed: Callable[[str, Exception], None]) -> None:
    """``attempt`` the batch ``ids`` (None: stepped and settled; else its error); a part that
    fails is split in two and each half attempted, the first half first, down to single
    schedules, each of which then goes to ``failed``. One bad schedule among n costs about
    2 log2(n) more attempts; n bad ones, 2n - 1."""
    pending = [ids]
    while pending:
        part = pending.pop()
        error = attempt(part)
        if error is None:
            continue
        if len(part) == 1:
            failed(part[0], error)
        else:
            half = len(part) // 2
            pending += [part[half:], part[:half]]
