"""The web operator page: server-rendered HTML (Jinja2, autoescaped), no JavaScript, no CDN.

``make_router(authorize)`` returns the routes under ``/ui``; the HTTP app includes them and
keeps the application service at ``request.app.state.service``. Every page needs the
``reader`` role: ``authorize(request, role)`` reads the bearer token from the Authorization
header or the ``schedfence_token`` cookie, which ``/ui/login`` sets (HttpOnly, SameSite=Strict)
after ``authorize`` accepted the token. A page without a token redirects to the login form; the
token is never shown back.

Pages: ``/ui/`` the summary counts, the on-call list and the schedules table (``state``,
``direction``, ``key``, ``owner`` filter it, ``page`` and ``per_page`` page it: overview.py);
``/ui/schedule`` a schedule's timeline (``migration``, ``since``, ``until`` filter it);
``/ui/migration``, ``/ui/run``, ``/ui/workflow`` each id's own view; ``/ui/jobs`` the batch
jobs and ``/ui/job?id=`` one job's progress. Ids are query parameters (an id may hold ``/``),
always shown whole. With a Temporal Web UI URL (``make_router(..., temporal_ui=)``), the
schedules and workflows at Temporal link into it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from schedfence.domain.errors import InvalidArgument, NotFound
from schedfence.domain.text import validate_id
from schedfence.projections.service_views import STUCK_AFTER

from schedfence.infra.application.service import MigrationService
from schedfence.infra.web import overview as ov
from schedfence.infra.web import timeline as tl
from schedfence.infra.web.origin import foreign_origin

HERE = Path(__file__).parent
COOKIE = "schedfence_token"
READER = "reader"
MAX_FORM_BYTES = 8192
HOME = "/ui/"
# Nothing but this app's stylesheet and forms: no script runs, no page may frame this one.
# Referrer same-origin: ids in the URLs go to no other site, and the login form's POST still
# carries its Origin (under no-referrer, Chromium sends ``Origin: null``).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store", "X-Frame-Options": "DENY"}
# What a read page refuses by itself (bad input 400, an unknown id 404); any other error goes
# to the app's one mapping of codes to statuses.
READ_ERRORS = (InvalidArgument, NotFound)

Authorize = Callable[[Request, str], Any]


def url(view: str, **params: Any) -> str:
    """A page's path with its query (empty parameters left out)."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"/ui/{view}" + (f"?{query}" if query else "")


ENV = Environment(loader=FileSystemLoader(HERE / "templates"),
                  autoescape=select_autoescape(default=True, default_for_string=True),
                  undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
ENV.globals.update(url=url, shown=tl.shown, utc_parts=tl.utc_parts, RUN=tl.RUN,
                   WORKFLOW=tl.WORKFLOW, MIGRATION=tl.MIGRATION, state_of=ov.state_of)


def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    context.setdefault("principal", None)
    return HTMLResponse(ENV.get_template(name).render(**context), status_code=status,
                        headers=SECURITY_HEADERS)


def safe_next(target: str) -> str:
    """Where to go after the login: a page of this app only (never another site)."""
    ok = target.startswith("/ui/") and "\\" not in target and not target.startswith("//")
    return target if ok else HOME


def same_origin(request: Request) -> bool:
    """A form posted from this app's own pages, or by a client that is no browser (neither
    Origin nor Sec-Fetch-Site: infra/web/origin.py)."""
    return foreign_origin(request, required=False) is None


def _arg(request: Request, name: str, kind: str) -> str:
    """A required id from the query, checked as every id is (domain/text.py)."""
    return validate_id(kind, request.query_params.get(name))


def _text_arg(request: Request, name: str) -> str | None:
    return request.query_params.get(name) or None


class _Pages:
    def __init__(self, authorize: Authorize, temporal_ui: ov.TemporalUI) -> None:
        self.authorize, self.temporal_ui = authorize, temporal_ui

    # -- plumbing ---------------------------------------------------------------------------
    def _page(self, request: Request, build: Callable[[MigrationService], tuple[str, dict]]
              ) -> Response:
        try:
            principal = self.authorize(request, READER)
        except Exception as exc:  # no or bad token: to the login form; a lower role: 403
            status = getattr(exc, "status_code", None)
            if status == 403:
                return render("error.html", 403, code="permission_denied",
                              message=f"these pages need the {READER} role")
            if status != 401:
                raise
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(url("login", next=target), status_code=303)
        try:
            name, context = build(request.app.state.service)
        except READ_ERRORS as exc:
            return render("error.html", 404 if isinstance(exc, NotFound) else 400,
                          principal=principal, code=exc.code, message=exc.message)
        return render(name, principal=principal, temporal=self.temporal_ui, **context)

    def _key(self, request: Request) -> tuple[str, str]:
        return _arg(request, "namespace", "namespace"), _arg(request, "schedule", "schedule id")

    # -- pages ------------------------------------------------------------------------------
    def index(self, request: Request) -> Response:
        def build(service: MigrationService) -> tuple[str, dict]:
            stuck = request.query_params.get("stuck_after") or \
                str(getattr(request.app.state, "stuck_after", STUCK_AFTER))
            try:
                seconds = float(stuck)
            except ValueError:
                raise InvalidArgument(f"stuck_after {stuck[:40]!r} is not a number of "
                                      "seconds") from None
            query = ov.table_query(request.query_params)
            return "index.html", {"items": service.oncall(seconds),
                                  "forward": service.forward_oncall(seconds),
                                  "failing": service.failing_schedules(),
                                  "stuck_jobs": service.job_oncall(seconds),
                                  "o": ov.schedules(service, query), "stuck_after": seconds}
        return self._page(request, build)

    def schedule(self, request: Request) -> Response:
        def build(service: MigrationService) -> tuple[str, dict]:
            ns, sid = self._key(request)
            filters = tl.Filters(_text_arg(request, "migration"), _text_arg(request, "since"),
                                 _text_arg(request, "until"))
            view = service.schedule(ns, sid)
            return "schedule.html", {"view": view, "t": tl.build(service, ns, sid, filters),
                                     "filters": filters, "key": ov.one_key(service, ns, sid)}
        return self._page(request, build)

    def migration(self, request: Request) -> Response:
        def build(service: MigrationService) -> tuple[str, dict]:
            ns, sid = self._key(request)
            mid = tl.migration_id(_arg(request, "id", "migration id"))
            t = tl.build(service, ns, sid, tl.Filters(migration=mid))
            return "migration.html", {"t": t, "doc": t.replays[mid], "mid": mid}
        return self._page(request, build)

    def _mentions(self, request: Request, kind: str) -> Response:
        def build(service: MigrationService) -> tuple[str, dict]:
            ns, sid = self._key(request)
            wanted = _arg(request, "id", f"{kind} id")
            t = tl.build(service, ns, sid, tl.Filters(mentions=wanted))
            runs = [r for r in t.runs if r.run_id == wanted]
            actions = [a for a in t.actions if a.workflow_id == wanted or wanted in a.run_ids]
            return "mentions.html", {"t": t, "kind": kind, "wanted": wanted, "runs": runs,
                                     "actions": actions}
        return self._page(request, build)

    def jobs(self, request: Request) -> Response:
        return self._page(request, lambda service: ("jobs.html",
                                                    {"jobs": ov.job_list(service)}))

    def job(self, request: Request) -> Response:
        return self._page(request, lambda service: (
            "job.html", {"job": ov.job(service, _arg(request, "id", "job id"))}))

    def run(self, request: Request) -> Response:
        return self._mentions(request, tl.RUN)

    def workflow(self, request: Request) -> Response:
        return self._mentions(request, tl.WORKFLOW)

    # -- login ------------------------------------------------------------------------------
    def login_form(self, request: Request) -> Response:
        return render("login.html", next=safe_next(request.query_params.get("next", HOME)),
                      error=None)

    async def login(self, request: Request) -> Response:
        form = await _form(request)
        token, target = form.get("token", ""), safe_next(form.get("next", HOME))
        if not same_origin(request):  # another site's form must not sign this browser in
            return render("login.html", 403, next=HOME, error="Sign in from this site's form.")
        if not token:
            return render("login.html", 400, next=target, error="Enter a token.")
        try:
            self.authorize(_with_token(request, token), READER)
        except Exception as exc:
            status = getattr(exc, "status_code", None)
            if status not in (401, 403):
                raise
            return render("login.html", status, next=target, error="That token was refused.")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/",
                            secure=request.url.scheme == "https")
        return response

    def logout(self, request: Request) -> Response:
        if not same_origin(request):
            return render("error.html", 403, code="forbidden",
                          message="Sign out from this site's page.")
        response = RedirectResponse(url("login"), status_code=303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    def stylesheet(self, request: Request) -> Response:
        return Response((HERE / "static" / "page.css").read_text(encoding="utf-8"),
                        media_type="text/css",
                        headers={"X-Content-Type-Options": "nosniff",
                                 "Cache-Control": "max-age=300"})


async def _form(request: Request) -> dict[str, str]:
    """A small url-encoded form (the login's); anything larger or otherwise is refused."""
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return {}
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=10)
    return {k: v[0] for k, v in fields.items() if v}


def _with_token(request: Request, token: str) -> Request:
    """The request as ``authorize`` sees it with ``token`` as its bearer token (and no cookie)."""
    headers = [(k, v) for k, v in request.scope["headers"]
               if k not in (b"authorization", b"cookie")]
    try:
        headers.append((b"authorization", f"Bearer {token}".encode("latin-1")))
    except UnicodeEncodeError:
        pass  # a token no header can carry: authorize sees none, and refuses
    return Request(dict(request.scope, headers=headers), request.receive)


def make_router(authorize: Authorize, temporal_ui: str | None = None) -> APIRouter:
    """The operator pages' routes; ``authorize(request, role)`` returns the principal or
    raises an HTTP error with ``status_code`` 401 or 403. ``temporal_ui``: the base URL of
    Temporal's Web UI (None: no links into it; a bad URL raises InvalidArgument)."""
    pages = _Pages(authorize, ov.TemporalUI.at(temporal_ui))
    router = APIRouter(include_in_schema=False)
    for path, endpoint, methods in (
            ("/ui", lambda: RedirectResponse(HOME, status_code=308), ["GET"]),
            ("/ui/", pages.index, ["GET"]), ("/ui/schedule", pages.schedule, ["GET"]),
            ("/ui/migration", pages.migration, ["GET"]), ("/ui/run", pages.run, ["GET"]),
            ("/ui/workflow", pages.workflow, ["GET"]), ("/ui/jobs", pages.jobs, ["GET"]),
            ("/ui/job", pages.job, ["GET"]),
            ("/ui/login", pages.login_form, ["GET"]), ("/ui/login", pages.login, ["POST"]),
            ("/ui/logout", pages.logout, ["POST"]),
            ("/ui/static/page.css", pages.stylesheet, ["GET"])):
        router.add_api_route(path, endpoint, methods=methods, response_class=HTMLResponse)
    return router
