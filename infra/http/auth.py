"""Who may call what: bearer tokens read from a file, each with a name and a role.

Roles are hierarchical, each allowed everything below it:
``metrics`` (only ``/metrics``, for a scraper) < ``reader`` (views, audit, replay, verify) <
``operator`` (recovery, abort, running the worker and the scheduler, the projection's catch-up)
< ``admin`` (rollback, schedule changes, projection rebuild, promote).

The tokens file (``--tokens FILE`` or ``SCHEDFENCE_TOKENS_FILE``) is either JSON,
``[{"name": "alice", "role": "admin", "secret": "..."}, ...]`` (or that list under
``"tokens"``), or lines ``NAME ROLE SECRET`` (blank lines and ``#`` comments skipped). A name is
what every event the token writes records as its actor; a secret has at least 16 characters,
no white space; names and secrets are unique. Errors name the line or entry, never a secret.

A presented token is compared with every secret (``hmac.compare_digest`` over SHA-256 digests,
so neither which secret matched nor its length shows in the time taken). The token comes from
``Authorization: Bearer`` or the web page's ``schedfence_token`` cookie. Each principal, and
each client address presenting no valid token, has a token bucket (``RateLimiter``).

A browser sends the cookie with a form that another port of the same host posts (SameSite does
not look at ports), so a request that writes (any method but GET, HEAD, OPTIONS) and is
authenticated by the cookie must come from this server's own origin (``Origin`` /
``Sec-Fetch-Site``, infra/web/origin.py): otherwise it is refused ``cross_origin`` (403) before
any route runs. A bearer token is never sent by a browser on its own, so it is not checked.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.text import validate_actor

from schedfence.infra.http.errors import ApiError
from schedfence.infra.http.settings import TOKENS_ENV
from schedfence.infra.adapters.observability import logs
from schedfence.infra.pacing import TokenBucket
from schedfence.infra.web.origin import foreign_origin

ROLES = ("metrics", "reader", "operator", "admin")
RANK = {role: n for n, role in enumerate(ROLES)}
COOKIE = "schedfence_token"
MIN_SECRET = 16
MAX_NAME = 64  # a drain runs as NAME#RANDOM, a worker id of at most 200
MAX_SECRET = 4096
MAX_BUCKETS = 10_000  # rate-limit keys kept before the full ones are forgotten
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})  # a request that writes nothing


@dataclass(frozen=True)
class Principal:
    name: str
    role: str

    def may(self, role: str) -> bool:
        return RANK[self.role] >= RANK[role]


@dataclass(frozen=True)
class _Token:
    principal: Principal
    digest: bytes


class Tokens:
    """The known tokens; ``find`` compares in constant time against all of them."""

    def __init__(self, entries: list[tuple[str, str, str]]) -> None:
        if not entries:
            raise InvalidArgument("the tokens file holds no token")
        names: set[str] = set()
        digests: set[bytes] = set()
        self._tokens: list[_Token] = []
        for where, (name, role, secret) in enumerate(entries, 1):
            _check(where, name, role, secret)
            digest = _digest(secret)
            if name in names or digest in digests:
                raise InvalidArgument(f"tokens: entry {where}: its name or secret is "
                                      "already used by another entry")
            names.add(name)
            digests.add(digest)
            self._tokens.append(_Token(Principal(name, role), digest))

    def find(self, presented: str) -> Principal | None:
        digest = _digest(presented)
        found = None
        for token in self._tokens:  # no early exit: the time does not tell which matched
            if hmac.compare_digest(digest, token.digest):
                found = token.principal
        return found

    def __len__(self) -> int:
        return len(self._tokens)


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


def _check(where: int, name: Any, role: Any, secret: Any) -> None:
    try:
        validate_actor(name, "name")
        if len(name) > MAX_NAME:
            raise InvalidArgument(f"name is longer than {MAX_NAME} characters")
    except InvalidArgument as exc:
        raise InvalidArgument(f"tokens: entry {where}: {exc.message}") from None
    if not isinstance(role, str) or role not in RANK:
        raise InvalidArgument(f"tokens: entry {where}: role must be one of {', '.join(ROLES)}")
    if not isinstance(secret, str) or not MIN_SECRET <= len(secret) <= MAX_SECRET \
            or any(c.isspace() or not c.isprintable() for c in secret):
        raise InvalidArgument(f"tokens: entry {where} ({name}): the secret must be "
                              f"{MIN_SECRET} to {MAX_SECRET} printable characters without "
                              "white space")


def load_tokens(path: str | None) -> Tokens:
    """The tokens of ``path``; a clear ``invalid_argument`` (never a secret) otherwise."""
    if not path:
        raise InvalidArgument(f"serve needs a tokens file: --tokens FILE or {TOKENS_ENV} "
                              "(lines NAME ROLE SECRET, or JSON; see docs/operators.md, "
                              "HTTP API)")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"cannot read the tokens file {path!r}: "
                              f"{type(exc).__name__}") from None
    entries = parse_tokens(text)
    tokens = Tokens(entries)
    logs.hide(secret for _, _, secret in entries)  # no log line shows an accepted token
    return tokens


def parse_tokens(text: str) -> list[tuple[str, str, str]]:
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")):
        return _json_entries(stripped)
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3:
            raise InvalidArgument(f"tokens: line {number}: expected NAME ROLE SECRET "
                                  f"({len(parts)} fields)")
        entries.append((parts[0], parts[1], parts[2]))
    return entries


TOKEN_FIELDS = ("name", "role", "secret")


def _json_entries(text: str) -> list[tuple[str, str, str]]:
    try:
        doc = json.loads(text)
    except ValueError as exc:  # the position only: the text may hold secrets
        raise InvalidArgument(f"tokens: not JSON (line {getattr(exc, 'lineno', '?')})") from None
    except RecursionError:  # a document nested deeper than the parser goes
        raise InvalidArgument("tokens: JSON nested too deep (a list of objects is two "
                              "levels)") from None
    if isinstance(doc, dict) and "tokens" in doc and len(doc) > 1:
        raise InvalidArgument('tokens: a JSON object holds one field, "tokens", and no '
                              "other")
    items = doc.get("tokens") if isinstance(doc, dict) else doc
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise InvalidArgument('tokens: JSON must be a list of {"name", "role", "secret"} '
                              'objects (or that list under "tokens")')
    for where, item in enumerate(items, 1):
        # a misspelt field would otherwise be dropped without a word; its name is not shown
        # (a secret pasted as a key would be)
        if set(item) - set(TOKEN_FIELDS):
            raise InvalidArgument(f"tokens: entry {where}: a field other than name, role and "
                                  "secret")
    return [(i.get("name"), i.get("role"), i.get("secret")) for i in items]


class RateLimiter:
    """A token bucket (infra/pacing.py) per key: ``rate`` requests a second, bursts of up to
    ``burst``."""

    def __init__(self, rate: float, burst: int | None = None) -> None:
        self.rate = rate
        self.burst = float(burst if burst is not None else max(1, int(rate * 2)))
        self._buckets: dict[str, TokenBucket] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """0 when allowed; else the seconds until the next request would be."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            if len(self._buckets) > MAX_BUCKETS:  # forget the keys that are full again
                self._buckets = {k: b for k, b in self._buckets.items()
                                 if b.level(now) < self.burst}
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = TokenBucket(self.rate, self.burst, now=now)
            return bucket.try_take(now)


@dataclass
class Auth:
    """What ``authorize`` consults: kept on ``app.state.auth``."""

    tokens: Tokens
    limiter: RateLimiter


def presented_token(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.partition(" ")
        return value.strip() if scheme.lower() == "bearer" and value.strip() else None
    return request.cookies.get(COOKIE) or None


def by_cookie(request: Request) -> bool:
    """Whether the token ``presented_token`` reads is the cookie's (no Authorization header)."""
    return request.headers.get("authorization") is None and bool(request.cookies.get(COOKIE))


def check_origin(request: Request) -> None:
    """Refuse a cookie-authenticated write that does not come from this server's own pages
    (``cross_origin``, 403); a read, or a bearer token, passes."""
    if request.method in SAFE_METHODS or not by_cookie(request):
        return
    why = foreign_origin(request, required=True)
    if why is not None:
        raise ApiError("cross_origin", f"refused: a request that writes with the "
                       f"{COOKIE} cookie must come from this server's own pages, and {why}; "
                       "a client sends Authorization: Bearer TOKEN instead")


def authorize(request: Request, role: str) -> Principal:
    """The caller's principal if it holds ``role`` (or a higher one); otherwise raise
    ``ApiError``: 401 without a known token, 403 for a cookie-authenticated write from another
    origin (``check_origin``) or below the role, 429 over the rate limit."""
    auth: Auth = request.app.state.auth
    token = presented_token(request)
    principal = auth.tokens.find(token) if token else None
    key = f"principal:{principal.name}" if principal else \
        f"client:{request.client.host if request.client else '-'}"
    wait = auth.limiter.take(key)
    if wait:
        raise ApiError("resource_exhausted", "too many requests; retry after "
                       f"{wait:.1f}s", {"Retry-After": str(max(1, round(wait + 0.5)))})
    if principal is None:
        raise ApiError("unauthenticated", "a valid bearer token is required (Authorization: "
                       "Bearer TOKEN)" if token is None else "the token is not known",
                       {"WWW-Authenticate": 'Bearer realm="schedfence"'})
    check_origin(request)
    if not principal.may(role):
        raise ApiError("permission_denied", f"{principal.name} has role {principal.role}; "
                       f"this needs {role}")
    request.state.principal = principal
    return principal
