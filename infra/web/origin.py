"""Where a browser says a request comes from: the one rule for cross-site request forgery.

A browser sends ``Origin`` with every POST and, since 2020, ``Sec-Fetch-Site`` with every
request. SameSite=Strict does not cover another *port* of the same host (a site is a scheme and
a host, not a port), so a page served from ``http://127.0.0.1:9999`` can post a form to this
server with its ``schedfence_token`` cookie; only these headers tell the two apart.

- ``Origin`` present: it must be this server's own (scheme, host and port as the request
  reached it); ``null`` (a sandboxed frame, a no-referrer page) is not.
- ``Sec-Fetch-Site`` present: it must be ``same-origin`` or ``none`` (typed or bookmarked);
  ``same-site`` (another port, another subdomain) and ``cross-site`` are refused.
- Neither: nothing vouches for the request. ``required`` says whether that refuses it: the
  API's cookie-authenticated writes require a vouched origin; a client that sends neither
  header is no browser and authenticates with ``Authorization: Bearer`` instead.
"""
from __future__ import annotations

from starlette.requests import Request

SAME_ORIGIN_FETCH = frozenset({"same-origin", "none"})
SHOWN = 100  # characters of a header value quoted in a refusal


def own_origin(request: Request) -> str:
    """This server's origin as the request reached it, e.g. ``http://127.0.0.1:8080``."""
    return f"{request.url.scheme}://{request.url.netloc}"


def foreign_origin(request: Request, *, required: bool) -> str | None:
    """Why ``request`` does not come from this server's own pages, or None when it does."""
    origin = request.headers.get("origin")
    fetch_site = request.headers.get("sec-fetch-site")
    if origin is not None and origin != own_origin(request):
        return f"its Origin {origin[:SHOWN]!r} is not this server's ({own_origin(request)})"
    if fetch_site is not None and fetch_site.lower() not in SAME_ORIGIN_FETCH:
        return f"its Sec-Fetch-Site is {fetch_site[:SHOWN]!r}"
    if required and origin is None and fetch_site is None:
        return "it carries neither Origin nor Sec-Fetch-Site"
    return None
