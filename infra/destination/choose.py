"""Choosing the destination: the one place a destination spec becomes a ``Destination``.

There is no default. A user who forgets to name the destination on a production store must get
an error, not a simulator that "migrates" schedules and closes the real sources. The specs:

- ``sim``: the simulator kept in the store itself (rows beside the events), for trials and demos;
- ``sim+STORE_URL``: a simulator kept in a store of its own, shared by an active and a standby;
- ``temporal://HOST:PORT/NAMESPACE``: a real Temporal server (the adapter connects on first use).

The Python API also takes any object implementing ``schedfence.domain.ports.Destination``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import urlsplit

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ids import validate_id

from schedfence.infra.store.eventstore import StoreURL

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


def parse_destination(url: str) -> tuple[str, str]:
    """``temporal://HOST:PORT[/NAMESPACE]`` → (``HOST:PORT``, namespace, default ``default``)."""
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
    if parts.query or parts.fragment:
        raise InvalidArgument(f"destination {url!r}: no query or fragment is accepted")
    namespace = parts.path.strip("/") or "default"
    validate_id("destination namespace", namespace)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port}", namespace


def check_spec(spec: str | None) -> str:
    """Refuse a spec that names no destination we know, before anything is opened."""
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidArgument(CHOOSE)
    if spec != SIM and not spec.startswith(SHARED_SIM_PREFIX):
        parse_destination(spec)
    return spec


def open_destination(spec: str | None, store: StoreURL, **options: Any) -> OpenedDestination:
    """The destination named by ``spec`` for a service on ``store`` (None: refused, CHOOSE)."""
    global _used_temporal
    spec = check_spec(spec)
    if spec == SIM:
        from schedfence.infra.destination.sim_store import SqlSimState, sim_state_for
        from schedfence.infra.destination.simulator import SimulatedDestination
        state = sim_state_for(store.url, store.kind == "sqlite-memory")
        close = state.dispose if isinstance(state, SqlSimState) else (lambda: None)
        return OpenedDestination(SimulatedDestination(state), "sim (the simulator kept in the "
                                 "store)", close)
    if spec.startswith(SHARED_SIM_PREFIX):
        from schedfence.infra.destination.shared_sim import open_shared_sim
        shared = open_shared_sim(spec)
        return OpenedDestination(shared, shared.label, shared.close)
    target, namespace = parse_destination(spec)
    # Imported here, so temporalio stays off every other path.
    from schedfence.infra.destination.temporal import TemporalDestination
    _used_temporal = True
    adapter = TemporalDestination(target, namespace, **options)
    return OpenedDestination(adapter, f"temporal://{target}/{namespace}", adapter.close)


class NoDestination:
    """For commands that must never reach a destination (reads, replay, abort): every call is
    refused with ``error(reason)``, so a bug that would reach one fails loudly, never guesses."""

    def __init__(self, reason: str = CHOOSE,
                 error: type[Exception] = InvalidArgument) -> None:
        self.reason, self.error = reason, error

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error(self.reason)

    start_workflow = describe = _refuse

