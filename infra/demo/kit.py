"""The demo's toolbox: a scripted run over the real service, its checks and its step lines."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from schedfence.domain.errors import DomainError
from schedfence.domain.ids import destination_workflow_id
from schedfence.domain.ports import StartWorkflow

from schedfence.infra.application import display as out
from schedfence.infra.application.service import MigrationService
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

NS = "demo"
Echo = Callable[[str], None]


class SimulatedCrash(Exception):
    """Raised by the crash hook: the worker process 'dies' at that boundary (args[0])."""


class CrashOnce:
    """A crash hook that raises once, at the boundary it was armed for."""

    point: str | None = None

    def arm(self, point: str) -> None:
        self.point = point

    def __call__(self, point: str) -> None:
        if point == self.point:
            self.point = None
            raise SimulatedCrash(point)


@dataclass
class Scenario:
    code: str
    title: str
    expected: str
    schedule_ids: list[str]
    steps: list[str] = field(default_factory=list)
    checks: list[tuple[str, bool]] = field(default_factory=list)
    observed: str = ""
    error: str | None = None
    seen: int = 0  # last log position already rendered

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.checks) and all(ok for _, ok in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "title": self.title, "schedule_ids": self.schedule_ids,
                "expected": self.expected, "observed": self.observed, "passed": self.passed,
                "steps": self.steps, "failed_checks": [c for c, ok in self.checks if not ok],
                "error": self.error}


class DemoRun:
    """The scenarios' toolbox: one service, one scriptable destination, one crash hook."""

    def __init__(self, service: MigrationService, dest: SimulatedDestination, crash: CrashOnce,
                 echo: Echo) -> None:
        self.service, self.dest, self.crash, self.echo = service, dest, crash, echo
        self.current: Scenario | None = None

    # -- narration --------------------------------------------------------------------------
    def step(self, actor: str, text: str) -> None:
        assert self.current is not None
        line = f"{actor:<6}  {text}"
        self.current.steps.append(line)
        self.echo(f"  {line}")

    def sync(self) -> int:
        """Narrate the events the scenario's schedules gained since the last sync."""
        sc = self.current
        assert sc is not None
        entries = [e for sid in sc.schedule_ids for e in self._history(sid) if e.position > sc.seen]
        for entry in sorted(entries, key=lambda e: e.position):
            line = out.narrate(entry.type, entry.data)
            if entry.aggregate == "migration" and line is not None:
                self.step(line.actor, out.one_line(line.text))
        sc.seen = self.service.event_count()
        return len(entries)

    def _history(self, sid: str) -> list[Any]:
        try:
            return self.service.history(NS, sid)
        except DomainError:
            return []  # the schedule does not exist yet

    def check(self, label: str, ok: bool) -> bool:
        assert self.current is not None
        self.current.checks.append((label, bool(ok)))
        return bool(ok)

    # -- actions ----------------------------------------------------------------------------
    def create(self, sid: str, notes: str = "", what: str = "", **program: Any) -> None:
        """Create a schedule (with ``program``: spec=, action=, policies=, as the service
        takes them; ``what`` says in words what it runs)."""
        assert self.current is not None
        self.service.create_schedule(NS, sid, notes=notes, **program)
        if sid not in self.current.schedule_ids:
            self.current.schedule_ids.append(sid)
        self.current.seen = self.service.event_count()
        self.step("admin", f"schedule {NS}/{sid} created" + (f", notes {notes!r}" if notes else "")
                  + (f": {what}" if what else ""))

    def rollback(self, sid: str, request_id: str | None = None) -> Any:
        result = self.service.rollback(NS, sid, request_id)
        if result.outcome == "accepted":
            self.sync()
        else:
            self.step("admin", f"rollback again -> {result.outcome}, request id "
                      f"{out.short(result.request_id)} ({result.request_id_origin}); "
                      "nothing written")
        return result

    def worker(self, idle_note: str = "") -> None:
        """One worker run until idle; a simulated crash ends it like a dead process."""
        try:
            self.service.run_until_idle()
        except SimulatedCrash as crash:
            self.sync()
            self.step("crash", f"worker process died at {crash.args[0]}; nothing appended")
            return
        if not self.sync():
            self.step("worker", "nothing to do" + (f" ({idle_note})" if idle_note else ""))

    def refused(self, label: str, fn: Callable[[], Any], expected: type[DomainError]) -> None:
        """Run an action that the protocol says must fail with ``expected`` and write nothing."""
        before = self.service.event_count()
        try:
            fn()
        except DomainError as exc:
            same = self.service.event_count() == before
            self.step("admin", f"{label} -> {exc.code}: {exc.message}; "
                      + ("nothing written" if same else "EVENTS WRITTEN"))
            self.check(f"{label} refused with {expected.code}", isinstance(exc, expected))
            self.check(f"{label} wrote nothing", same)
            return
        self.step("admin", f"{label} -> accepted")
        self.check(f"{label} refused with {expected.code}", False)

    def start_foreign(self, sid: str, request_id: str, workflow_type: str) -> str:
        wid = destination_workflow_id(sid)
        run = self.dest.start_workflow(StartWorkflow(NS, wid, request_id, workflow_type))
        self.step("env", f"{workflow_type} started at {wid} by request {request_id} "
                  f"(run {out.short(run.run_id)})")
        return run.run_id

    # -- observations -----------------------------------------------------------------------
    def migration(self, sid: str) -> Any:
        return self.service.migration(NS, sid)

    def source(self, sid: str) -> Any:
        return self.service.schedule(NS, sid)

    def starts(self, sid: str) -> int:
        return len(self.dest.start_log(NS, destination_workflow_id(sid)))

    def evidence(self, sid: str) -> str | None:
        accepted = [e for e in self._history(sid) if e.type.endswith("OwnershipAccepted")]
        return accepted[-1].data["evidence"] if accepted else None

    def created_by(self, sid: str, request_id: str) -> int:
        return self.dest.created_count(NS, destination_workflow_id(sid), request_id)

    def expect_parked_foreign(self, sid: str) -> str:
        m, s = self.migration(sid), self.source(sid)
        self.check("migration parked as foreign_destination",
                   m.state == "parked" and m.park_reason == "foreign_destination")
        self.check("source kept paused and fenced, not closed",
                   s.paused and s.migration_pending and not s.closed)
        self.check("no run created with our request id", self.created_by(sid, m.request_id) == 0)
        state = "closed" if s.closed else "open and " + ("paused" if s.paused else "running")
        return f"{m.state} {m.park_reason or ''}".rstrip() + f"; source {state}"

    def expect_unknown_outcome(self, sid: str) -> None:
        m = self.migration(sid)
        self.check("after the lost response: claim consumed, no receipt, not closed",
                   m.state == "claimed" and not m.claim_armed and
                   (m.last_answer or {}).get("kind") == "unavailable")

    def expect_completed(self, sid: str, chains: int = 1) -> str:
        m, s = self.migration(sid), self.source(sid)
        self.check("migration completed", m.state == "completed")
        self.check("source closed by the migration", s.closed and s.close_reason == "migrated")
        self.check("exactly one start issued", m.starts_issued == 1)
        self.check("exactly one run created with our request id",
                   self.created_by(sid, m.request_id) == 1)
        n = len(self.dest.chains(NS, destination_workflow_id(sid)))
        self.check(f"{chains} chain(s) at the workflow id", n == chains)
        return (f"{m.state}, source closed; {m.starts_issued} start, {n} chain"
                f"{'s' if n != 1 else ''} at the workflow id")


