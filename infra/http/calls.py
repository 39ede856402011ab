"""What every route shares: the role a route needs (a FastAPI dependency that also puts the
bearer scheme in the OpenAPI document), and ``call``, which runs one service call.

The application service is one object shared by every request, so ``call`` runs each call
under the app's lock, one at a time: an admin API's traffic is small, and the store's own
optimistic concurrency still decides every race with workers in other processes. A failure
of the store anywhere is named as the CLI names it (``store_unavailable``, a timeout).
"""
from __future__ import annotations

from typing import Annotated, Any, Callable, TypeVar

from fastapi import Depends, Request, Security
from fastapi.security import HTTPBearer

from schedfence.domain.errors import DomainError

from schedfence.infra.http.auth import Principal, authorize
from schedfence.infra.application.service import MigrationService

T = TypeVar("T")
BEARER = HTTPBearer(auto_error=False, description="A token of the tokens file (see "
                                                   "docs/operators.md, HTTP API); roles "
                                                   "metrics < reader < "
                                                   "operator < admin.")


def _needs(role: str) -> Callable[..., Principal]:
    def dependency(request: Request, _bearer: Any = Security(BEARER)) -> Principal:
        return authorize(request, role)
    dependency.__name__ = f"needs_{role}"
    return dependency


Reader = Annotated[Principal, Depends(_needs("reader"))]
Operator = Annotated[Principal, Depends(_needs("operator"))]
Admin = Annotated[Principal, Depends(_needs("admin"))]
Metrics = Annotated[Principal, Depends(_needs("metrics"))]


def call(request: Request, fn: Callable[[MigrationService], T]) -> T:
    """``fn(service)`` under the app's lock; a store failure becomes its named domain error."""
    service: MigrationService = request.app.state.service
    with request.app.state.lock:
        try:
            return fn(service)
        except DomainError:
            raise
        except Exception as exc:
            named = service.app.store_error(exc)
            if named is None or named is exc:
                raise
            raise named from exc


def destination(request: Request) -> str:
    """The destination the server was started with, as the CLI's banners name it."""
    return request.app.state.destination_label
