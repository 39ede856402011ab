"""The destination port: what schedule-fence needs from a Temporal-style workflow service.

This module is a public contract (tests outside this repository import it), so its names and
fields are stable. Adapters live in ``infra`` (the simulator, a real Temporal server).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Protocol, Sequence, runtime_checkable

from schedfence.domain.source.action import StartWorkflowAction
from schedfence.domain.errors import DomainError, InvalidArgument, NotFound, Unavailable

RunStatus = Literal[
    "running", "completed", "failed", "canceled", "terminated", "continued_as_new", "timed_out"
]
RUN_STATUSES: tuple[str, ...] = (
    "running", "completed", "failed", "canceled", "terminated", "continued_as_new", "timed_out",
)
ReusePolicy = Literal[
    "allow_duplicate", "allow_duplicate_failed_only", "reject_duplicate", "terminate_if_running"
]
ConflictPolicy = Literal["fail", "use_existing", "terminate_existing"]
StopKind = Literal["cancel", "terminate"]


@dataclass(frozen=True)
class StartWorkflow:
    """One StartWorkflowExecution request. ``action``: a schedule action's start, which
    carries the action's own arguments (its payloads, whole), timeouts, retry policy, memo,
    search attributes and user metadata, every one applied (``input`` is unused then)."""

    namespace: str
    workflow_id: str
    request_id: str
    workflow_type: str
    input: Any = field(default_factory=dict)  # JSON (a schedule action's input may be any)
    id_reuse_policy: ReusePolicy = "allow_duplicate"
    id_conflict_policy: ConflictPolicy = "fail"
    task_queue: str = ""  # the destination's own queue when empty (a schedule action names one)
    action: StartWorkflowAction | None = None


@dataclass(frozen=True)
class StartAccepted:
    """A start that returned a run: newly created, or deduplicated against the current run.

    ``started`` is True when our request id is the run's *create* id (this call created it,
    or a retry deduplicated against the run it created: Temporal says True for both), False
    when the run was returned for another reason (our id was merely *attached* to it, which
    proves nothing about who created it, or conflict policy USE_EXISTING), None when the
    destination did not say.
    """

    run_id: str
    first_execution_run_id: str
    status: RunStatus
    started: bool | None = None


@dataclass(frozen=True)
class RunDescription:
    """One run of a workflow id, as Describe shows it (request ids of that run only).

    ``create_request_id`` is the id recorded with the run's STARTED event: the only one that
    says who *created* the run ("" when the destination did not say). ``request_ids`` holds
    every id the run dedupes against: the create id and ids attached later (a start with
    conflict policy USE_EXISTING and attach-request-id), which prove nothing about creation.
    """

    run_id: str
    first_execution_run_id: str
    workflow_type: str
    status: RunStatus
    request_ids: frozenset[str] = frozenset()
    create_request_id: str = ""

    @property
    def attached_request_ids(self) -> frozenset[str]:
        return self.request_ids - {self.create_request_id}


class DestinationError(Exception):
    """Base of the errors a destination may raise."""


class AlreadyStarted(DestinationError):
    """The current run is running under another request id (conflict policy FAIL).

    ``start_request_id`` is the *current run's* create request id, which after continue-as-new
    is a random id, not the one that started the chain.
    """

    def __init__(self, start_request_id: str, run_id: str, first_execution_run_id: str) -> None:
        super().__init__(
            f"workflow already started: run {run_id} (first run {first_execution_run_id}, "
            f"start request id {start_request_id})"
        )
        self.start_request_id = start_request_id
        self.run_id = run_id
        self.first_execution_run_id = first_execution_run_id


class DestinationUnavailable(DestinationError):
    """The call's outcome is unknown: it may or may not have committed."""


class DestinationNotReached(DestinationUnavailable):
    """The call provably never reached the destination: the connection was refused, the
    name did not resolve, or no channel was ready before the deadline (or, in the simulator,
    its transaction failed before COMMIT). Nothing can have committed (unlike a plain
    ``DestinationUnavailable``, whose outcome is unknown)."""


class NamespaceNotFound(DestinationUnavailable):
    """The destination has no such namespace: the call did nothing, and retrying cannot help
    until an operator creates it, so a command answers ``not_found`` (``command_error``). It is
    a ``DestinationUnavailable`` all the same: a missing namespace says nothing about the runs
    a worker asked after, so a worker backs off and never reads it as "no such run"."""


class NamespaceNotServed(DestinationNotReached):
    """This destination (as configured: its URL's namespaces) does not serve the namespace:
    nothing left the process. A command answers ``invalid_argument`` (``command_error``): a
    configuration error, which no retry mends. A worker backs off all the same (another
    worker, configured for the namespace, may serve it)."""


def command_error(exc: DestinationUnavailable, what: str) -> DomainError:
    """What a command answers when the destination could not tell it ``what`` it asked (e.g.
    "the create check"): ``invalid_argument`` for a namespace the destination is not
    configured to serve, ``not_found`` for a namespace that does not exist, ``unavailable``
    (nothing written, retry later) otherwise."""
    if isinstance(exc, NamespaceNotServed):
        return InvalidArgument(f"{exc} ({what}): name the namespace in the destination URL "
                               "(temporal://HOST:PORT/NS1,NS2, or /* for every namespace)")
    if isinstance(exc, NamespaceNotFound):
        return NotFound(f"the destination has no such namespace ({what}): {exc}")
    return Unavailable(f"destination unavailable for {what}: {exc}")


class DestinationNotFound(DestinationError):
    """No such workflow run (never existed, deleted, or removed by retention)."""


class SchedulerGone(DestinationNotFound):
    """A deleted schedule's scheduler workflow cannot be read any more (retention passed, or
    deleted by hand): when it began, when it closed and what its create recorded are lost."""


class InvalidStartRequest(DestinationError):
    """The destination refused the request before doing anything (e.g. bad policy combination)."""


@runtime_checkable
class Destination(Protocol):
    def start_workflow(self, request: StartWorkflow) -> StartAccepted: ...

    def describe(
        self, namespace: str, workflow_id: str, run_id: str | None = None
    ) -> RunDescription: ...


@runtime_checkable
class RetentionReader(Protocol):
    """How long a closed run stays visible to a describe in ``namespace`` (seconds), read
    live (Temporal: DescribeNamespace's workflow execution retention). Any failure is
    ``DestinationUnavailable``: it says nothing about the runs (domain/rollback/evidence.py)."""

    def retention_seconds(self, namespace: str) -> float: ...


@runtime_checkable
class ActionRunner(Destination, Protocol):
    """A destination that also runs a schedule's actions: it starts them (``start_workflow``),
    watches them (``describe``) and stops overlapping ones for the ``cancel_other`` and
    ``terminate_other`` policies.

    ``stop_workflow`` asks the current run of ``workflow_id`` to cancel, or terminates it. A
    run already closed, or no run at all, is not an error (the stop is idempotent: the
    scheduler asks again each pass until it sees the run closed). An unknown outcome raises
    ``DestinationUnavailable``."""

    def stop_workflow(self, namespace: str, workflow_id: str, kind: StopKind,
                      reason: str = "") -> None: ...


@runtime_checkable
class RunWatcher(Protocol):
    """A runner that reports the current runs of many workflows of one namespace in one call
    (the scheduler's pass watches every running action it started with it, not one
    ``describe`` per run): each workflow id's current run status, ``gone`` where there is no
    current run; an unknown outcome raises ``DestinationUnavailable`` (nothing is known)."""

    def run_statuses(self, namespace: str, workflow_ids: Sequence[str]) -> dict[str, str]: ...


@runtime_checkable
class ActionListing(Protocol):
    """The destination's own record of the action starts of ``namespace``: the workflow id
    of every run it started (a chain continued as new counts once; closed, running or, where
    the destination keeps them, deleted), of the ids that begin with one of ``prefixes`` and
    a ``-`` (None: every id). What ``verify --against-destination`` judges, and what a settle
    after a delete reads. An unknown outcome raises ``DestinationUnavailable``."""

    def action_starts(self, namespace: str,
                      prefixes: Sequence[str] | None = None) -> list[str]: ...


@runtime_checkable
class StartBatcher(Protocol):
    """A runner that takes many starts in one call (the simulator: one transaction for all):
    each request's answer in order, a refusal or an outage as the ``DestinationError`` that
    ``start_workflow`` would have raised for it. A call that fails as a whole raises
    ``DestinationUnavailable``: no start's outcome is known, and each is asked again with its
    own request id, which dedupes."""

    def start_workflows(self, requests: Sequence[StartWorkflow]
                        ) -> list[StartAccepted | DestinationError]: ...


@dataclass(frozen=True)
class Settled:
    """What a settle asked the destination to start (nominal times, RFC 3339 UTC) and, for a
    limited handover, the pin its create set and the settle cleared (RFC 3339 UTC; None:
    not pinned)."""

    started: list[str] = field(default_factory=list)
    pin: str | None = None
    deleted_at: str | None = None  # settle_deleted: when the delete took effect (RFC 3339)
    detail: str = ""
    # A pinned settle whose create came after its pin: how many of the server's own starts
    # went beyond the limit (domain.handover.limit_overrun); None: not known (a repeat).
    over_limit: int | None = None
    # settle_deleted: the times the server itself started at or after the delete (RFC 3339).
    after_delete: list[str] = field(default_factory=list)


@runtime_checkable
class HandoverTarget(Destination, Protocol):
    """A destination that takes a whole schedule (a start carrying a handover) and, once the
    migration holds the receipt, settles the boundary: the spec's times between the handover's
    gap backfill and the instant the destination's own processing began are started there, each
    once (idempotent: called again after a crash or an unknown outcome). Returns the nominal
    times it asked the destination to start, and a limited handover's pin. Unknown outcome:
    ``DestinationUnavailable``; the schedule gone (deleted since): ``DestinationNotFound``.
    ``first_run_id`` is the receipt's: a schedule at the id whose scheduler workflow's chain
    began with another run is not the one handed over (deleted, then re-created by someone
    else) and is never written to: that is ``DestinationNotFound`` too, and the settle of
    the deleted one follows.

    ``settle_deleted`` is the settle of a schedule deleted since the receipt: from its
    scheduler workflow's chain (first run ``first_run_id``: when it began, when it closed,
    what its create recorded) it starts each time the settle owed before the delete
    (domain/rollback/handover_gone.py) as a plain workflow at its action workflow id, under a request
    id derived from the migration's and the time, leaving any run at that id alone. Returns
    the spec's times this migration's starts created (``started``), the delete's instant and
    a detail naming the carried times. Idempotent. The chain unreadable: ``SchedulerGone``;
    the chain still running: ``DestinationUnavailable``."""

    def settle_handover(self, request: StartWorkflow, first_run_id: str) -> Settled: ...

    def settle_deleted(self, request: StartWorkflow, first_run_id: str) -> Settled: ...


@runtime_checkable
class SearchAttributeRegistry(Protocol):
    """A destination that tells which search attributes a namespace registered (name ->
    type: ``Keyword``, ``Int``, ...), so a rollback refuses, before its fence, an action the
    server would refuse for them. Unknown outcome: ``DestinationUnavailable``."""

    def search_attribute_types(self, namespace: str) -> dict[str, str]: ...


# -- the other direction: a Temporal Schedule handed to the source (domain/forward/aggregate.py) -------
@dataclass(frozen=True)
class ScheduleSnapshot:
    """A Temporal Schedule as DescribeSchedule shows it. ``program`` holds the JSON documents
    of domain.spec.ScheduleSpec, domain.action.StartWorkflowAction and SchedulePolicies
    (``spec``, ``action``, ``policies``: None where absent) and ``remaining_actions``.
    ``identity`` names this Temporal Schedule among all ever created at its id: the first run
    id of the server's scheduler workflow ``temporal-sys-scheduler:<id>`` (a forward's derived
    request id includes it). ``boundary``, on a paused schedule with a spec, is what the
    server was seen to have started (domain/forward/boundary.py: ``observation``);
    ``responsible_until`` (RFC 3339 UTC, whole seconds) is the cursor it proves, kept for
    display (a host that sets no ``boundary`` hands this cursor over instead).
    ``buffered`` counts starts it holds unstarted."""

    namespace: str
    schedule_id: str
    conflict_token: str
    paused: bool
    notes: str
    program: dict[str, Any]
    action_count: int = 0
    recent_actions: tuple[dict[str, Any], ...] = ()
    running: tuple[str, ...] = ()
    buffered: int = 0
    responsible_until: str | None = None
    identity: str = ""
    boundary: dict[str, Any] | None = None


class ConflictTokenMoved(DestinationError):
    """An update carried a conflict token the schedule no longer has: someone changed it."""


@runtime_checkable
class ScheduleHost(Protocol):
    """Temporal's Schedules API as the forward migration uses it. ``update_schedule_state``
    sets pause and notes only if the schedule still has ``conflict_token`` (else
    ``ConflictTokenMoved``); the server may apply it later, so only a describe tells it was.
    NOT_FOUND is ``DestinationNotFound``; an unknown outcome ``DestinationUnavailable``."""

    def list_schedules(self, namespace: str, page_token: bytes | None = None,
                       page_size: int = 100) -> tuple[list[str], bytes | None]: ...

    def describe_schedule(self, namespace: str, schedule_id: str) -> ScheduleSnapshot: ...

    def update_schedule_state(self, namespace: str, schedule_id: str, conflict_token: str,
                              paused: bool, notes: str) -> None: ...

    def delete_schedule(self, namespace: str, schedule_id: str) -> None: ...


# -- the ownership audit (domain/owners/classify.py): what a Temporal namespace holds -------------
@dataclass(frozen=True)
class ListedSchedule:
    """A Temporal Schedule as a listing (or a describe) shows it: its id, whether it is
    paused, its next action time (RFC 3339 UTC; None: none ahead) and, from a describe only,
    its ``program`` (``spec`` and ``action`` documents as ``ScheduleSnapshot.program``);
    ``handed_over``: it carries this project's handover memo (a rollback created it)."""

    schedule_id: str
    paused: bool = False
    next_run: str | None = None
    program: dict[str, Any] | None = None
    handed_over: bool = False


@runtime_checkable
class ScheduleInventory(Protocol):
    """Every schedule of a namespace, a page at a time (``list_schedule_page``: ListSchedules,
    which may lag), and one schedule read now (``find_schedule``: DescribeSchedule; None:
    there is none). An unreachable server or an unknown outcome: ``DestinationUnavailable``
    (``NamespaceNotFound`` for a namespace the server does not have)."""

    def list_schedule_page(self, namespace: str, page_token: bytes | None = None,
                           page_size: int = 1000
                           ) -> tuple[list[ListedSchedule], bytes | None]: ...

    def find_schedule(self, namespace: str, schedule_id: str) -> ListedSchedule | None: ...


# -- the crash hook: where a test stops the process ---------------------------------------------
# Called with a named point (``projection.committed``, ``forward.fence.after_append``...) at each
# boundary a crash must be survivable; a test raises there. The one definition: the projection,
# replication, the engines and the application import it from here.
CrashHook = Callable[[str], None]
