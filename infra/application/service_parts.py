"""The application service's parts (service.py), each built once, on its first use, and given
what it uses, never the service: the schedule and forward commands, the rollback worker, the
operator views, the due index and leases a drive is handed, the open forward migrations. The
service is built on this: `status` builds none of them, a rollback only the worker."""
from __future__ import annotations

import threading
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from schedfence.domain.ports import CrashHook, Destination
from schedfence.infra.adapters.store.aggregates import Aggregates
from schedfence.infra.adapters.store.eventstore import FenceApplication
from schedfence.infra.application.forward import ForwardCommands
from schedfence.infra.application.schedules import ScheduleCommands
from schedfence.infra.application.views import operator_views
from schedfence.infra.engines.attempt import RollbackEngine
from schedfence.infra.engines.drive import Once, OpenForwards, WorkParts
from schedfence.infra.engines.forward import ForwardEngine
from schedfence.infra.engines.unit_of_work import UnitOfWork

if TYPE_CHECKING:
    from schedfence.projections import service_views as pv
    from schedfence.infra.engines.due import DueWork
    from schedfence.infra.engines.schedule_due import ScheduleDue
    from schedfence.infra.engines.lease import Leases
# Imported where used: the views, due index and leases stay out of `status`.


class ServiceParts:
    def __init__(self, app: FenceApplication, destination: Destination, worker_id: str,
                 crash_hook: CrashHook | None, claim_grace: float) -> None:
        self.app, self.destination, self.worker_id = app, destination, worker_id
        self.load, self.crash_hook = Aggregates(app), crash_hook
        self.unit = UnitOfWork.of(app, worker_id, crash_hook)  # every save (admin too)
        self._worker_args = (app, destination, worker_id, crash_hook, claim_grace)
        self._parts: dict[str, Any] = {}  # see _part
        self._commands: dict[str, Any] = {}  # the use cases' parts (no I/O), also on first use
        self._building = threading.RLock()
        self._active = False  # proven not to be an unpromoted standby (require_active)

    def require_active(self) -> None:
        """Refuse to act on a standby not promoted since its last copy: its claims may have
        been used on the active already (replication/standby.py; proven once, remembered)."""
        if not self._active:
            from schedfence.infra.adapters.replication.standby import require_active
            require_active(self.app)
            self._active = True

    @property
    def _schedules(self) -> ScheduleCommands:
        return self._part("schedules", lambda: ScheduleCommands(
            self.app, self.load, self.unit, self.destination, self.require_active,
            self._schedule_due), self._commands)

    def _schedule_due(self) -> ScheduleDue:
        """The schedules' due index beside the operator views (built on first use)."""
        from schedfence.infra.engines.schedule_due import ScheduleDue
        return self._part("schedule_due", lambda: ScheduleDue(self.views.engine,
                                                              self.app.recorder))

    @property
    def _forward(self) -> ForwardCommands:
        return self._part("forward", lambda: ForwardCommands(
            self.app, self.load, self.unit, self.destination, self.require_active,
            self.worker_id, self.crash_hook, self._open_forwards()), self._commands)

    def _open_forwards(self) -> OpenForwards:
        """The open forward migrations, kept up to date from the log (drive.py): one reader
        for the forward commands and every drive's threads."""
        return self._part("open_forwards", lambda: OpenForwards(self.app))

    @property
    def worker(self) -> RollbackEngine:
        return self._part("worker", lambda: RollbackEngine(*self._worker_args))

    @property
    def views(self) -> pv.OperatorViews:
        """The operator views: an SQLAlchemy engine on the store (infra/application/views.py)."""
        return self._part("views", lambda: operator_views(self.app))

    @property
    def due(self) -> DueWork:
        return self._ready()[0]()

    @property
    def leases(self) -> Leases:
        return self._ready()[1]()

    def _ready(self) -> tuple[Once[DueWork], Once[Leases]]:
        """The due index and the leases, ready to be built below on first call (a drive is
        handed them: drive.py's ``Once``, never a call back up into this service)."""
        from schedfence.infra.engines.due import DueWork
        from schedfence.infra.engines.lease import Leases
        return self._part("ready", lambda: (Once(partial(DueWork, self.views, self.load.epoch)),
                                            Once(partial(Leases, self.views.engine))))

    def _work_parts(self) -> WorkParts:
        """What a drive is handed (drive.py)."""
        return WorkParts(self.worker, *self._ready(),
                         self._open_forwards(), lambda worker_id: ForwardEngine(
                             self.app, self._forward.host, worker_id, self.crash_hook,
                             self.load.epoch))

    def _part(self, name: str, build: Callable[[], Any],
              parts: dict[str, Any] | None = None) -> Any:
        """``name``, built once (also when a worker pool's threads ask at the same moment)."""
        parts = self._parts if parts is None else parts
        part = parts.get(name)
        if part is None:
            with self._building:  # reentrant: building the due index builds the views
                part = parts.get(name)
                if part is None:
                    part = parts[name] = build()
        return part

    def _close_parts(self) -> None:
        for name in ("views", "worker"):  # the worker's start threads, the views' engine
            if name in self._parts:
                self._parts[name].close()
