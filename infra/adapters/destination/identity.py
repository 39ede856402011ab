"""The destination this process serves, as the domain's ``DestinationId``
(domain/destination_id.py), and the check every step makes before it writes or calls.

Each adapter says what it is (``destination_identity()``): the simulator kept in the store,
a shared simulator (its redacted label), a Temporal server (its address, the namespaces it
serves, and the cluster's own id, read once with GetClusterInfo when a decision needs it). A
``Destination`` object of the Python API that says nothing is a ``custom`` destination named by
its class. The rule itself is the domain's: this module only supplies the serving identity.
"""
from __future__ import annotations

from typing import Any, Mapping

from schedfence.domain.destination_id import (DestinationId, destination_gate,
                                              needs_cluster_id)


def serving_identity(destination: Any, with_cluster: bool = False) -> DestinationId:
    """What ``destination`` is; ``with_cluster``: with a Temporal cluster's id read (one
    GetClusterInfo per adapter; ``DestinationUnavailable`` when it cannot be read)."""
    own = getattr(destination, "destination_identity", None)
    if callable(own):
        found = own(with_cluster)
        if isinstance(found, DestinationId):
            return found
    kind = type(destination)
    return DestinationId("custom", f"{kind.__module__}.{kind.__qualname__}")


def binding_for(destination: Any, namespace: str) -> dict[str, str]:
    """What an accept records for a migration (or job) of ``namespace`` on ``destination``:
    with the cluster's id where the server gives one."""
    return serving_identity(destination, with_cluster=True).binding(namespace)


def check_destination(what: str, binding: Mapping[str, Any] | None, destination: Any,
                      bind_hint: str = "") -> None:
    """Refuse (``DestinationMismatch`` / ``DestinationUnknown``) a step on ``what`` unless
    ``destination`` is the one ``binding`` names. The cluster's id is read only when the
    decision needs it; a kind, namespace or address that differs is refused without a call."""
    serving = serving_identity(destination)
    if needs_cluster_id(binding, serving):
        serving = serving_identity(destination, with_cluster=True)
    destination_gate(what, binding, serving, bind_hint)
