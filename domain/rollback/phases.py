"""A migration's phases and park reasons: the one vocabulary the domain, projections, due work,
CLI and JSON all use, and the one wording of what each park reason means.

Pure words: ``MigrationState`` (aggregate.py) folds to these phases, and the decisions
(decide.py, recover.py) and the invariant checker read them.
"""
from __future__ import annotations

from typing import Literal, get_args

# The one phase vocabulary (domain, projections, due work, CLI and JSON all use these names).
Phase = Literal[
    "pending", "claimed", "receipted", "completed", "parked", "legacy_pending", "aborted"
]
PHASES: tuple[Phase, ...] = get_args(Phase)
# Open, and a worker moves it on (if none does for long, it is stuck).
WORKER_PHASES: tuple[Phase, ...] = ("pending", "claimed", "receipted")
# Open, and only an operator (or, for a foreign park, the foreign run closing) moves it on.
OPERATOR_PHASES: tuple[Phase, ...] = ("parked", "legacy_pending")
OPEN_PHASES: tuple[Phase, ...] = WORKER_PHASES + OPERATOR_PHASES
CLOSED_PHASES: tuple[Phase, ...] = ("completed", "aborted")
# Park reasons that mean "starts may exist that this log does not show".
UNVERIFIED_PARKS = ("adopted_unverified", "failover_unverified")
# What each park reason means: the one wording for errors, narration and on-call advice.
PARK_MEANING = {
    "foreign_destination": "the chain head at the workflow id was not created by our "
                           "request id",
    "head_missing": "the chain's first run is gone (retention or delete), which cannot be "
                    "told apart from a committed chain",
    "no_first_run_identity": "the destination shows no first-run identity for the chain",
    "start_rejected": "the destination rejected the start, so nothing committed",
    "adopted_unverified": "adopted legacy migration: an older release may have started the "
                          "destination with ids this log lacks",
    "failover_unverified": "migration from before a failover: the tail the failover lost may "
                           "have started the destination",
    "deleted_unsettled": "the destination's schedule was deleted after the receipt and before "
                         "the settle, and its scheduler workflow can no longer be read "
                         "(retention passed): which boundary times came before the delete "
                         "is unknown",
}
# A park after the receipt (the source stays fenced; only ``destination_owns`` ends it).
RECEIPTED_PARKS = ("deleted_unsettled",)


# What the destination answered to the one start (DestinationAnswered.kind, StartOutcome.kind).
AnswerKind = Literal["created", "deduplicated", "already_started", "unavailable", "rejected",
                     "not_sent"]
