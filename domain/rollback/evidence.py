"""Absence inside the namespace's retention as proof that a start committed nothing (F16,
docs/protocol.md).

A start whose answer was a transport failure, or was never recorded because the worker died,
has an unknown outcome. A committed start creates a run at the workflow id, and that run is
the id's current run (or an older run of a chain whose current run is newer) until retention
removes it, at the earliest ``retention`` after it closed, which is after the claim. So
DescribeWorkflowExecution (the history service, never visibility) answering NOT_FOUND for the
workflow id, read after the claim grace (no start still on its way) and while the claim is
younger than the namespace's retention less a margin (clock skew), proves no create
committed: the claim may be re-armed. A run deleted by hand (or retention lengthened after
the run closed) defeats the rule; docs/protocol.md says so.

Pure: the worker reads the destination and hands the reading in; the decision
(``absence_proof``) and the checker (``rearm_refusal``) apply the same rule to what the
re-arm records (``StartClaimRearmed.absence``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schedfence.domain.model import Immutable

# Slack between our clock (the claim's timestamp) and the server's (its retention timers).
RETENTION_MARGIN_SECONDS = 3600.0
REARM_REASON = "absent_within_retention"
DESCRIBE = "describe_workflow_execution"
# The answers whose start may or may not have committed, and that absence can settle:
# a transport failure, or none recorded (the worker died between the claim and the answer).
UNKNOWN_ANSWERS = ("unavailable", "none")
# How far the log's own times may trail a recorded age (appends come after the reading).
LOG_TOLERANCE_SECONDS = 1.0


class AbsenceObserved(Immutable):
    """What a re-arm on absence rests on, recorded on ``StartClaimRearmed`` (v2)."""

    observed_at: datetime  # when the describe answered (the worker's clock)
    source: str = DESCRIBE  # any other (a visibility listing) proves nothing: I9 says so
    run_found: bool = False  # False: NOT_FOUND for the workflow id, no run open or closed
    answer: str  # the start's recorded answer: "unavailable", or "none" (a crash)
    claim_age: float  # seconds from the unproven start's claim to observed_at
    step_age: float  # seconds from the migration's last step to observed_at
    claim_grace: float  # for how long after the last step the start may still land
    retention_seconds: float  # the namespace's retention, read when deciding
    margin_seconds: float = RETENTION_MARGIN_SECONDS


@dataclass(frozen=True)
class RetentionReading:
    """What the worker read besides the describe: when it answered NOT_FOUND, the
    namespace's retention (seconds) read then, and the latest claim from the log."""

    observed_at: datetime
    retention_seconds: float
    claim: ClaimRecord | None
    margin_seconds: float = RETENTION_MARGIN_SECONDS


@dataclass(frozen=True)
class ClaimRecord:
    """The latest claim as the log holds it: when it was consumed (its event's timestamp,
    the writer's clock) and the kind of the answer recorded to its start since ("none":
    none was, the worker died first)."""

    at: datetime
    answer: str = "none"


def refusal(obs: AbsenceObserved) -> str | None:
    """Why the observation alone proves nothing (None: it proves no create committed)."""
    if obs.source != DESCRIBE:
        return f"absence read from {obs.source}, not DescribeWorkflowExecution"
    if obs.run_found:
        return "a run (open or closed) is at the workflow id"
    if obs.answer not in UNKNOWN_ANSWERS:
        return f"the start's answer was {obs.answer!r}, not a transport failure or none"
    if obs.claim_grace <= 0:
        return "no claim grace: nothing says the start is no longer on its way"
    if obs.step_age < obs.claim_grace:
        return (f"read {obs.step_age:g}s after the last step, inside the "
                f"{obs.claim_grace:g}s claim grace: the start may still land")
    if obs.margin_seconds <= 0 or obs.retention_seconds <= obs.margin_seconds:
        return (f"retention {obs.retention_seconds:g}s leaves nothing after the "
                f"{obs.margin_seconds:g}s margin")
    if obs.claim_age < 0 or obs.claim_age >= obs.retention_seconds - obs.margin_seconds:
        return (f"the claim is {obs.claim_age:g}s old, not younger than retention "
                f"{obs.retention_seconds:g}s less {obs.margin_seconds:g}s: a run it "
                "created may have been removed")
    return None


def state_refusal(phase: str, unproven_starts: int, unverified: bool,
                  claim: ClaimRecord | None) -> str | None:
    """Why the migration's log does not allow a re-arm on absence: only a claimed migration
    whose one unproven start is the latest claim's, with every earlier start proven."""
    if unverified or phase != "claimed":
        return f"the migration is {phase}{' (unverified)' if unverified else ''}, not claimed"
    if unproven_starts != 1:
        return f"{unproven_starts} starts are unproven; absence can settle only the latest"
    if claim is None:
        return "the log holds no claim"
    return None


def rearm_refusal(obs: AbsenceObserved, state: Any, claim: ClaimRecord | None,
                  last_step_at: datetime | None) -> str | None:
    """The checker's verdict on a recorded re-arm on absence, against the log before it
    (``state``: the migration folded so far): the rule on the observation, the state, and
    the log's own times and answer (a recorded age may not understate them, nor the
    recorded answer differ from the log's)."""
    phase, unproven_starts, unverified = state.phase, state.unproven_starts, state.unverified
    why = state_refusal(phase, unproven_starts, unverified, claim) or refusal(obs)
    if why:
        return why
    assert claim is not None
    if obs.answer != claim.answer:
        return f"the re-arm records answer {obs.answer!r}; the log holds {claim.answer!r}"
    claim_age = (obs.observed_at - claim.at).total_seconds()
    if obs.claim_age + LOG_TOLERANCE_SECONDS < claim_age:
        return f"the re-arm records a claim age of {obs.claim_age:g}s; the log's is " \
               f"{claim_age:.3f}s"
    if last_step_at is not None:
        step_age = (obs.observed_at - last_step_at).total_seconds()
        if obs.step_age > step_age + LOG_TOLERANCE_SECONDS:
            return f"the re-arm records {obs.step_age:g}s since the last step; the log's " \
                   f"is {step_age:.3f}s"
    return None


def absence_proof(phase: str, unproven_starts: int, unverified: bool,
                  reading: RetentionReading | None,
                  step_age: float | None, claim_grace: float | None
                  ) -> tuple[AbsenceObserved | None, str]:
    """The decision: the observation to re-arm on, or None and why not (a park's detail).
    ``reading`` is None when the destination cannot tell its retention."""
    if reading is None or step_age is None or claim_grace is None:
        return None, "the destination's retention was not read"
    claim = reading.claim
    why = state_refusal(phase, unproven_starts, unverified, claim)
    if why:
        return None, why
    assert claim is not None
    claim_age = (reading.observed_at - claim.at).total_seconds()
    obs = AbsenceObserved(
        observed_at=reading.observed_at, answer=claim.answer,
        # Rounded against the rule: the claim no younger, the last step no older.
        claim_age=math.ceil(claim_age * 1000) / 1000,
        step_age=math.floor(step_age * 1000) / 1000, claim_grace=claim_grace,
        retention_seconds=reading.retention_seconds, margin_seconds=reading.margin_seconds)
    why = refusal(obs)
    return (None, why) if why else (obs, "")
