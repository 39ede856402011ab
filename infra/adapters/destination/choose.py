"""Choosing the destination: the one place a destination spec becomes a ``Destination``.

There is no default. A user who forgets to name the destination on a production store must get
an error, not a simulator that "migrates" schedules and closes the real sources. The specs:

- ``sim``: the simulator kept in the store itself (rows beside the events), for trials and demos;
- ``sim+STORE_URL``: a simulator kept in a store of its own, shared by an active and a standby;
- ``temporal://HOST:PORT/NAMESPACE``: a real Temporal server (the adapter connects on first use);
  several namespaces as ``/NS1,NS2`` (or ``/*``), TLS as ``?tls=1&ca=F&cert=F&key=F`` and an
  API key in ``SCHEDFENCE_TEMPORAL_API_KEY`` (refused over plain text unless the URL says
  ``tls=0``); each call's deadline as ``?rpc_timeout=15s`` (default 5 s).

The Python API also takes any object implementing ``schedfence.domain.ports.Destination``.
"""
from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from typing import Any, Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import validate_id
from schedfence.domain.ports import Destination

from schedfence.infra.adapters.store.eventstore import (FenceApplication, StoreURL,
                                                        open_application, parse_store_url)

SIM = "sim"
SHARED_SIM_PREFIX = "sim+"
TEMPORAL_SCHEME = "temporal"
SPECS = ("sim (the simulator kept in the store, for trials), sim+STORE_URL (a simulator in a "
         "store of its own) or temporal://HOST:PORT/NAMESPACE (a real Temporal server)")
CHOOSE = f"no destination chosen: pass --destination {SPECS}; env SCHEDFENCE_DESTINATION"
CHOOSE_API = f"open_service needs a destination: {SPECS}, or a Destination object"

_used_temporal = False  # set once this process created a Temporal client (see cli_temporal)


def temporal_used() -> bool:
    return _used_temporal


@dataclass
class OpenedDestination:
    """A destination, the name banners show (never a password), and how to release it."""

    destination: Any
    label: str
    close: Callable[[], None]


@dataclass(frozen=True)
class TemporalSpec:
    """A parsed ``temporal://HOST:PORT[/NS[,NS...]|/*][?tls=1&ca=F&cert=F&key=F&server_name=N]``:
    the namespaces served (the first is the client's own; ``*``: any) and the TLS files."""

    target: str
    namespaces: tuple[str, ...]
    tls: tuple[tuple[str, str], ...] = ()  # (option, value), e.g. ("ca", "/etc/ca.pem")
    plain: bool = False  # the URL said tls=0: plain text even with an API key
    rpc_timeout: float | None = None  # ?rpc_timeout=: each call's deadline (None: 5 s)

    @property
    def namespace(self) -> str:
        return self.namespaces[0] if self.namespaces[0] != "*" else "default"

    @property
    def label(self) -> str:
        tls = "" if not self.tls else " (TLS)"
        return f"temporal://{self.target}/{','.join(self.namespaces)}{tls}"


TLS_OPTIONS = ("tls", "ca", "cert", "key", "server_name")
RPC_TIMEOUT_OPTION = "rpc_timeout"
MIN_RPC_TIMEOUT, MAX_RPC_TIMEOUT = 0.5, 600.0  # seconds
_SECONDS = re.compile(r"^\s*(\d{1,6}(?:\.\d{1,3})?)\s*(ms|s|min)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "min": 60.0, None: 1.0}
API_KEY_ENV = "SCHEDFENCE_TEMPORAL_API_KEY"  # never in the URL: a URL is shown in banners


def parse_temporal(url: str) -> TemporalSpec:
    if url.startswith(SHARED_SIM_PREFIX):  # never echoed: it may hold a database password
        raise InvalidArgument("a sim+ destination is the simulator, not a Temporal server")
    parts = urlsplit(url)
    if parts.scheme != TEMPORAL_SCHEME or not parts.hostname:
        raise InvalidArgument(f"destination must be {SPECS}, got {url!r}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        raise InvalidArgument(f"destination {url!r} needs a port (Temporal's default is 7233)")
    if parts.fragment:
        raise InvalidArgument(f"destination {url!r}: no fragment is accepted")
    names = tuple(n.strip() for n in (parts.path.strip("/") or "default").split(","))
    for name in names:
        if name != "*":
            validate_id("destination namespace", name)
    if "*" in names and len(names) > 1:
        raise InvalidArgument("destination namespaces: '*' (every namespace) stands alone")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    query, rpc_timeout = _rpc_timeout(parts.query)
    plain = ("tls", "0") in parse_qsl(query, keep_blank_values=True)
    return TemporalSpec(f"{host}:{port}", names, _tls_options(query), plain, rpc_timeout)


def _rpc_timeout(query: str) -> tuple[str, float | None]:
    """``rpc_timeout`` taken out of the URL's query (the rest is TLS's): each call's deadline,
    ``15s``, ``1500ms``, ``2min`` or plain seconds, from 0.5 s to 10 min."""
    pairs = parse_qsl(query, keep_blank_values=True)
    found = [v for k, v in pairs if k == RPC_TIMEOUT_OPTION]
    if not found:
        return query, None
    if len(found) > 1:
        raise InvalidArgument(f"destination: {RPC_TIMEOUT_OPTION} given {len(found)} times")
    match = _SECONDS.match(found[0])
    seconds = round(float(match.group(1)) * _UNIT_S[match.group(2)], 3) if match else None
    if seconds is None or not MIN_RPC_TIMEOUT <= seconds <= MAX_RPC_TIMEOUT:
        raise InvalidArgument(f"destination: {RPC_TIMEOUT_OPTION}={found[0][:40]!r} must be a "
                              f"duration from {MIN_RPC_TIMEOUT:g}s to {MAX_RPC_TIMEOUT:g}s "
                              "(15s, 1500ms, 2min)")
    rest = [(k, v) for k, v in pairs if k != RPC_TIMEOUT_OPTION]
    return urlencode(rest), seconds


def _tls_options(query: str) -> tuple[tuple[str, str], ...]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise InvalidArgument("destination: its query does not parse") from None
    seen = dict(pairs)
    unknown = sorted(set(seen) - set(TLS_OPTIONS))
    if unknown or len(seen) != len(pairs):
        raise InvalidArgument(f"destination: unknown or repeated option(s) {unknown or pairs}; "
                              f"known: {', '.join(TLS_OPTIONS)} (an API key goes in "
                              f"{API_KEY_ENV})")
    if seen.get("tls", "1") not in ("0", "1"):
        raise InvalidArgument("destination: tls is 1 or 0")
    if ("cert" in seen) != ("key" in seen):
        raise InvalidArgument("destination: cert and key go together (a client certificate)")
    for option in ("ca", "cert", "key"):
        if option in seen and not Path(seen[option]).is_file():
            raise InvalidArgument(f"destination: {option} file {seen[option]!r} is not a "
                                  "readable file")
    if seen.get("tls") == "0" and len(seen) > 1:
        raise InvalidArgument("destination: tls=0 with certificate options")
    return tuple(sorted(seen.items())) if seen and seen.get("tls") != "0" else ()


def tls_config(options: tuple[tuple[str, str], ...]) -> Any:
    """temporalio's TLS setting for the parsed options (False: plain text)."""
    if not options:
        return False
    from temporalio.service import TLSConfig
    files = dict(options)

    def read(option: str) -> bytes | None:
        return Path(files[option]).read_bytes() if option in files else None
    return TLSConfig(server_root_ca_cert=read("ca"), client_cert=read("cert"),
                     client_private_key=read("key"), domain=files.get("server_name"))


def api_key_for(spec: TemporalSpec) -> str | None:
    """The API key (from ``API_KEY_ENV``) to send to ``spec``'s server. Never in plain text by
    accident: a URL with no TLS option needs an explicit ``tls=0`` to send one."""
    api_key = os.environ.get(API_KEY_ENV) or None
    if api_key and not spec.tls and not spec.plain:
        raise InvalidArgument(f"{API_KEY_ENV} is set but the destination has no TLS: add "
                              "?tls=1 to its URL (or tls=0 to send the key in plain text)")
    return api_key


def temporal_credentials(spec: TemporalSpec) -> tuple[Any, str | None]:
    """The TLS setting and the API key to connect to ``spec``'s server with."""
    api_key = api_key_for(spec)
    return tls_config(spec.tls), api_key


def parse_destination(url: str) -> tuple[str, str]:
    """``temporal://HOST:PORT[/NAMESPACE]`` → (``HOST:PORT``, the first namespace, default
    ``default``); ``parse_temporal`` gives every option."""
    spec = parse_temporal(url)
    return spec.target, spec.namespace


def check_spec(spec: str | None) -> str:
    """Refuse a spec that names no destination we know, before anything is opened."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidArgument(CHOOSE)
    if spec != SIM and not spec.startswith(SHARED_SIM_PREFIX):
        api_key_for(parse_temporal(spec))  # refused before anything is opened
    return spec


def open_destination(spec: str | None, store: StoreURL, **options: Any) -> OpenedDestination:
    """The destination named by ``spec`` for a service on ``store`` (None: refused, CHOOSE)."""
    global _used_temporal
    spec = check_spec(spec)
    if spec == SIM:
        from schedfence.infra.adapters.destination.sim_sql import SqlSimState, sim_state_for
        from schedfence.infra.adapters.destination.simulator import SimulatedDestination
        state = sim_state_for(store.url, store.kind == "sqlite-memory")
        close = state.dispose if isinstance(state, SqlSimState) else (lambda: None)
        return OpenedDestination(SimulatedDestination(state), "sim (the simulator kept in the "
                                 "store)", close)
    if spec.startswith(SHARED_SIM_PREFIX):
        from schedfence.infra.adapters.destination.shared_sim import open_shared_sim
        shared = open_shared_sim(spec)
        return OpenedDestination(shared, shared.label, shared.close)
    parsed = parse_temporal(spec)
    # Imported here, so temporalio stays off every other path.
    from schedfence.infra.adapters.destination.temporal import TemporalDestination
    _used_temporal = True
    tls, api_key = temporal_credentials(parsed)
    if parsed.rpc_timeout is not None:
        options.setdefault("rpc_timeout", parsed.rpc_timeout)
    adapter = TemporalDestination(parsed.target, parsed.namespace, namespaces=parsed.namespaces,
                                  tls=tls, api_key=api_key, **options)
    return OpenedDestination(adapter, parsed.label, adapter.close)


class NoDestination:
    """For commands that must never reach a destination (reads, replay, abort): every call is
    refused with ``error(reason)``, so a bug that would reach one fails loudly, never guesses."""

    def __init__(self, reason: str = CHOOSE,
                 error: type[Exception] = InvalidArgument) -> None:
        self.reason, self.error = reason, error

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error(self.reason)

    start_workflow = describe = _refuse


# -- what ``open_service`` (infra/application/service.py) opens before it builds the service --
Opened = tuple[FenceApplication, Destination, Callable[[], None] | None]  # and its close


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def open_store_and_destination(store: str, destination: Destination | str | None) -> Opened:
    """The store's application and the destination (``"sim"``, ``"sim+STORE_URL"``,
    ``"temporal://HOST:PORT/NS"`` or a ``Destination`` object), with what closes the one
    opened here. A bad destination spec is refused before the store is opened (nothing is
    created); a destination that fails to open closes the store."""
    if destination is None:
        raise InvalidArgument(CHOOSE_API)
    url = parse_store_url(store)
    if isinstance(destination, str):
        check_spec(destination)  # refused before the store is opened: nothing is created
    app = open_application(url)
    if not isinstance(destination, str):
        return app, destination, None
    try:
        opened = open_destination(destination, url)
    except BaseException:
        app.close()
        raise
    return app, opened.destination, opened.close
