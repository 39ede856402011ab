"""One JSON error shape for every refusal, ``{"error": {"code": ..., "message": ...}}``, and the
HTTP status of each code.

The codes are the domain's (``DomainError.code``, the same the CLI prints), plus the few that
only HTTP has: ``unauthenticated`` (401), ``permission_denied`` and ``cross_origin`` (403),
``method_not_allowed`` (405), ``request_too_large`` (413), ``resource_exhausted`` (429) and
``internal`` (500).
A message never carries a secret: token errors name no token, and store errors go through the
store's own redaction (``FenceApplication.store_error``).
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from schedfence.domain.text import one_line
from schedfence.domain.errors import DomainError

LOG = logging.getLogger("schedfence.http")

# Every code a caller can see, and its status. A code not listed here (a new DomainError) is
# answered 500 and fails tests/infra/http/test_errors.py until it is placed.
STATUS: dict[str, int] = {
    "invalid_argument": 400,  # a value the domain refuses (422: a body the schema refuses)
    "unauthenticated": 401,
    "permission_denied": 403,
    "cross_origin": 403,  # a cookie-authenticated write from another origin (http/auth.py)
    "not_found": 404,
    "method_not_allowed": 405,
    # The request conflicts with the state: retrying the same call will not help until the
    # state changes (an operator, a worker, or the caller's own earlier call changes it).
    "already_exists": 409,
    "closed": 409,
    "migration_pending": 409,
    "failed_precondition": 409,
    "sentinel_blocked": 409,
    "phase_blocked": 409,
    "not_drained": 409,
    "destination_mismatch": 409,  # accepted against another destination (or an unknown one)
    "destination_unknown": 409,
    "request_too_large": 413,
    "resource_exhausted": 429,
    # The store holds what this code cannot read: an operator must look (never a retry).
    "undecodable_event": 500,
    "corrupt_history": 500,
    "projection_gap": 500,
    "projection_stopped": 500,
    "internal": 500,
    # Something the service depends on did not answer (nothing was written): retry later.
    "unavailable": 503,
    "store_unavailable": 503,
}
VALIDATION_STATUS = 422


class ErrorDetail(BaseModel):
    code: str
    message: str


class ErrorResponse(BaseModel):
    """The one shape of every refusal."""

    error: ErrorDetail


# The refusals every route documents in the OpenAPI document.
RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": why} for status, why in (
        (400, "invalid_argument: a value the domain refuses"),
        (401, "unauthenticated: no known bearer token"),
        (403, "permission_denied: the token's role is below the route's; cross_origin: a "
              "cookie-signed write from another origin"),
        (404, "not_found"),
        (409, "the state refuses it: already_exists, closed, migration_pending, "
              "failed_precondition, sentinel_blocked, phase_blocked, destination_mismatch, "
              "destination_unknown"),
        (413, "request_too_large"),
        (422, "invalid_argument: the request does not match this schema"),
        (429, "resource_exhausted: over the token's rate limit (Retry-After)"),
        (503, "unavailable, store_unavailable: nothing was written; retry later"))}


class ApiError(Exception):
    """A refusal the HTTP layer itself decides (authentication, limits, arguments)."""

    def __init__(self, code: str, message: str, headers: dict[str, str] | None = None,
                 status_code: int | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.headers = code, message, headers or {}
        self.status_code = status_code or STATUS[code]


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def error_response(code: str, message: str, status: int | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status or STATUS.get(code, 500),
                        headers=headers)


def status_of(code: str) -> int:
    return STATUS.get(code, 500)


def _named(request: Request, exc: Exception) -> DomainError | None:
    """A store failure, named as the CLI names it (a timeout, the server unavailable)."""
    service = getattr(request.app.state, "service", None)
    app = getattr(service, "app", None)
    return app.store_error(exc) if app is not None else None


def install(app: FastAPI, authenticate: Callable[[Request], Any]) -> None:
    """Route every error of ``app`` through the one shape. ``authenticate(request)`` raises
    ``ApiError`` without a known token: a body refused before the route's role was checked
    (JSON that does not parse) answers 401, not 422, to a caller without one."""

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.code, exc.message, exc.status_code, exc.headers)

    @app.exception_handler(DomainError)
    async def domain_error(_request: Request, exc: DomainError) -> JSONResponse:
        return error_response(exc.code, exc.message)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        if getattr(request.state, "principal", None) is None:
            try:
                authenticate(request)
            except ApiError as refused:
                return error_response(refused.code, refused.message, refused.status_code,
                                      refused.headers)
        return error_response("invalid_argument", _not_json(request) + _validation_message(exc),
                              VALIDATION_STATUS)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large",
                401: "unauthenticated", 403: "permission_denied"}.get(exc.status_code,
                                                                        "invalid_argument")
        return error_response(code, str(exc.detail), exc.status_code,
                              getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        named = _named(request, exc)
        if named is not None:
            return error_response(named.code, named.message)
        LOG.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        # The type only: a driver's text can carry SQL and values (never echoed to a caller).
        return error_response("internal", f"internal error ({type(exc).__name__}); see the "
                                          "server's log")


def _not_json(request: Request) -> str:
    """The hint a body in another content type (a form's, text) gets: what to send instead."""
    sent = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if request.method in ("POST", "PUT", "PATCH") and sent and sent != "application/json":
        return f"send application/json (this body is {one_line(sent)[:100]}); "
    return ""


def _validation_message(exc: RequestValidationError) -> str:
    """Where the request does not fit the schema, by location, never the value sent."""
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()))
        why = err.get("msg", "invalid") if err.get("type") != "string_pattern_mismatch" else \
            "does not match the field's pattern in the API's schema"
        parts.append(f"{where}: {why}")
    return "; ".join(parts) or "the request does not match the API's schema"
