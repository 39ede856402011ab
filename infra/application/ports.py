"""What the use cases that drive the application service ask of it, as protocols the service
(infra/application/service.py) meets: a use case never imports the service (the layers
contract of pyproject.toml), so the front door is passed in and typed by what it is used for.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # types only: a job's start-up loads none of these

    from schedfence.domain.errors import DomainError
    from schedfence.domain.ports import Destination
    from schedfence.infra.adapters.store.aggregates import Aggregates
    from schedfence.infra.adapters.store.eventstore import FenceApplication
    from schedfence.infra.application.views import MigrationResult
    from schedfence.infra.engines.drive import Drive, Driven
    from schedfence.infra.engines.unit_of_work import UnitOfWork


class Commands(Protocol):
    """What a batch job (infra/application/jobs.py) asks of the application service: the
    commands one operator would give, and the workers that drive what they requested."""

    app: FenceApplication
    load: Aggregates
    destination: Destination
    worker_id: str
    unit: UnitOfWork

    def require_active(self) -> None: ...

    def rollback(self, namespace: str, schedule_id: str, request_id: str | None = None,
                 actor: str = "", job_id: str | None = None) -> MigrationResult: ...

    def rollback_many(self, namespace: str, schedule_ids: list[str],
                      request_ids: list[str] | None = None, actor: str = "",
                      job_id: str | None = None) -> list[MigrationResult | DomainError]: ...

    def forward(self, namespace: str, schedule_id: str, request_id: str | None = None,
                actor: str = "", job_id: str | None = None) -> MigrationResult: ...

    def predict_forward(self, namespace: str, schedule_id: str,
                        request_id: str) -> tuple[str, tuple[str, str] | None]: ...

    def drive(self, how: Drive = ...) -> Driven: ...
