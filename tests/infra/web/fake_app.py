"""The operator pages in a minimal FastAPI app of their own: an ``authorize`` that keeps the
HTTP API's contract (a bearer token from the Authorization header or the ``schedfence_token``
cookie; HTTP 401 without a known token, 403 below the role), and the worlds the pages show."""
from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI, HTTPException, Request

from schedfence.infra.application.service import MigrationService
from schedfence.infra.web.pages import COOKIE, make_router
from tests.helpers import NS, World, new_world, start_foreign

READER_TOKEN = "reader-token-0123456789abcdef"
ADMIN_TOKEN = "admin-token-fedcba9876543210"
SCRAPER_TOKEN = "scraper-token-5555555555555555"  # a role below reader
_RANK = {"reader": 1, "operator": 2, "admin": 3}


@dataclass(frozen=True)
class Principal:
    name: str
    role: str


TOKENS = {READER_TOKEN: Principal("alice", "reader"), ADMIN_TOKEN: Principal("root", "admin"),
          SCRAPER_TOKEN: Principal("prometheus", "metrics")}


def fake_authorize(request: Request, role: str) -> Principal:
    header = request.headers.get("authorization", "")
    token = header[7:] if header.startswith("Bearer ") else request.cookies.get(COOKIE)
    principal = TOKENS.get(token or "")
    if principal is None:
        raise HTTPException(401, "a bearer token is required")
    if _RANK.get(principal.role, 0) < _RANK[role]:
        raise HTTPException(403, f"role {role} is required")
    return principal


def make_app(service: MigrationService, temporal_ui: str | None = None) -> FastAPI:
    app = FastAPI()
    app.state.service = service
    app.include_router(make_router(fake_authorize, temporal_ui))
    return app


PARKED = "parked-1"
DONE = "done-1"


def parked_and_done(store: str) -> World:
    """A migration parked on a foreign destination run (F1: somebody else's workflow holds the
    id and still runs) and a completed rollback, each on its own schedule."""
    w = new_world(store)
    w.service.create_schedule(NS, PARKED, notes="pre")
    start_foreign(w.dest, PARKED, workflow_type="order-fulfilment-workflow")
    w.service.rollback(NS, PARKED, "R-parked")
    w.service.run_until_idle()
    w.service.create_schedule(NS, DONE, notes="pre")
    w.service.rollback(NS, DONE, "R-done")
    w.service.run_until_idle()
    return w
