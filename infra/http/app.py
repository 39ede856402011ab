"""The HTTP app: ``create_app(service, tokens, ...)`` wires the routes, the error shape, the
request-size limit and the rate limit around one application service.

The service is kept on ``app.state.service``; the operator pages (``infra/web/pages.py``) are
included under ``/ui``, and the Prometheus exposition (``infra/adapters/observability/metrics.py``) is
served at ``/metrics`` (role ``metrics`` or higher). Neither is part of the
OpenAPI document, which describes the JSON API alone (``openapi_document``; committed as
``schemas/openapi.json``).
"""
from __future__ import annotations

import json
import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from schedfence.infra.http import errors, migrations, operations, reads, schedules
from schedfence.infra.http.auth import Auth, RateLimiter, Tokens, authorize
from schedfence.infra.http.calls import Metrics, call
from schedfence.infra.http.settings import MAX_BODY, RATE
from schedfence.infra.adapters.observability import logs
from schedfence.infra.adapters.observability.metrics import render_metrics
from schedfence.infra.application.service import MigrationService
from schedfence.projections.oncall import STUCK_AFTER
from schedfence.infra.web.pages import make_router as make_pages


API_VERSION = "1.0"
DESCRIPTION = """The admin API of schedfence: every admin, worker-control, view and recovery
command of the CLI, as a thin layer over the application service. Authenticate with
`Authorization: Bearer TOKEN` (roles metrics < reader < operator < admin). Every refusal is
`{"error": {"code": ..., "message": ...}}` with the status of its code
(docs/operators.md, HTTP API)."""


def _build() -> FastAPI:
    # No /docs or /redoc: their pages load scripts from a CDN; /openapi.json is the contract.
    app = FastAPI(title="schedfence admin API", version=API_VERSION, description=DESCRIPTION,
                  docs_url=None, redoc_url=None)
    errors.install(app, lambda request: authorize(request, "metrics"))
    for router in (reads.router, schedules.router, operations.router, migrations.router):
        app.include_router(router)

    @app.get("/healthz", tags=["health"], summary="Liveness (no token needed)")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI document (needs no store and no tokens)."""
    return _build().openapi()


def openapi_text() -> str:
    """``schemas/openapi.json`` as committed: ``schedfence serve --print-openapi`` prints it."""
    return json.dumps(openapi_document(), indent=2, ensure_ascii=False) + "\n"


def create_app(service: MigrationService, tokens: Tokens, *, destination_label: str = "none",
               max_body: int = MAX_BODY, rate: float = RATE,
               burst: int | None = None, temporal_ui: str | None = None,
               stuck_after: float = STUCK_AFTER) -> FastAPI:
    """The app over ``service``; ``tokens`` decide who may call what (``auth.authorize``).
    ``rate`` requests a second per token (0: no limit); ``max_body`` bytes per request;
    ``temporal_ui`` the base URL of Temporal's Web UI the pages link into (None: no links);
    ``stuck_after`` the seconds without progress after which an open migration is stuck
    where a request does not say (on-call, the web page, the gauge)."""
    app = _build()
    app.state.service = service
    app.state.stuck_after = stuck_after
    app.state.auth = Auth(tokens, RateLimiter(rate, burst))
    app.state.lock = threading.Lock()
    app.state.destination_label = destination_label
    app.include_router(make_pages(authorize, temporal_ui), include_in_schema=False)
    _serve_metrics(app)
    app.add_middleware(BodyLimit, max_bytes=max_body)
    app.add_middleware(RequestActor)
    return app


def _serve_metrics(app: FastAPI) -> None:
    """Prometheus's text exposition (infra/adapters/observability/metrics.py), for the role
    ``metrics`` or higher."""
    @app.get("/metrics", include_in_schema=False)
    def metrics(request: Request, _: Metrics) -> Response:
        body, content_type = call(request, lambda service: render_metrics(
            service.views, service.app, service.destination, service.schedules_due,
            service.failing_schedules,
            stuck=lambda: service.stuck_counts(request.app.state.stuck_after),
            stuck_after=request.app.state.stuck_after))
        return Response(body, media_type=content_type)


class RequestActor:
    """Name the request's actor (the token ``authorize`` accepted, ``request.state``) on the
    server's access record: uvicorn writes that record inside the response start's ``send``,
    so the name is bound around that call (``logs.request_actor``)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named(message: dict) -> None:
            principal = (scope.get("state") or {}).get("principal")
            token = logs.request_actor.set(getattr(principal, "name", None))
            try:
                await send(message)
            finally:
                logs.request_actor.reset(token)

        await self.app(scope, receive, named)


class BodyLimit:
    """Refuse a request whose body is over ``max_bytes`` (413), declared or streamed, before
    any route sees it."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            more = message.get("more_body", False)
        body, sent = b"".join(chunks), False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: dict, receive: Any, send: Any) -> None:
        response = errors.error_response("request_too_large", f"the request body is over "
                                                              f"{self.max_bytes} bytes")
        await response(scope, receive, send)
