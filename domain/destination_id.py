"""Which destination a migration (either direction) or a job belongs to, and the one rule that
keeps every step on it (issue 45: "a migration is not bound to its destination").

A migration is accepted against one destination: the rollback's create check, sentinel gate
and re-create refusal, the forward's reading of the Temporal schedule, a job's selection all
ran there. The event that commits it to that destination (``RequestIdAssigned``,
``ForwardRequested``, ``Job.Defined``) records what it was accepted against, its *binding*: a
JSON document ``{"kind", "address", "namespace", "cluster_id"}``. Every later step (the
worker's claim, start, reconcile, settle and close; the forward's fence, create and delete;
a job's rerun; an operator's recovery that looks at the destination) first asks
``destination_gate`` whether the process serves that destination, and is refused otherwise,
with nothing written and nothing called.

A binding of ``None`` is *unknown*: written by a release that recorded none. It is never
guessed: every step refuses it (``destination_unknown``) until an operator binds it
(``schedfence recover bind``, docs/operators.md).

Pure: infra supplies the serving ``DestinationId`` (infra/adapters/destination/identity.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from schedfence.domain.errors import DomainError, RecoveryRefused

KINDS = ("sim", "temporal", "custom")
STORE_SIM = "store"  # the address of the simulator kept in the migration's own store
Binding = dict[str, str]  # what an event records; None: unknown (an older release's)


class DestinationMismatch(DomainError):
    """The step's process serves another destination than the one the migration (or job)
    was accepted against: nothing was written, nothing was called."""

    code = "destination_mismatch"


class DestinationUnknown(DomainError):
    """The migration (or job) was accepted by a release that recorded no destination: no
    step acts on it until an operator binds it (nothing was written, nothing called)."""

    code = "destination_unknown"


@dataclass(frozen=True)
class DestinationId:
    """The destination a process serves. ``kind``: ``sim``, ``temporal`` or ``custom`` (a
    ``Destination`` object of the Python API); ``address``: ``store`` for the simulator kept in
    the store, the shared simulator's label (``sim+...``, no password), Temporal's
    ``HOST:PORT``, a custom object's class; ``namespaces``: those served (``*``: any);
    ``cluster_id``: the Temporal cluster's own id (GetClusterInfo), ``""`` when the server
    gives none, None while not read yet."""

    kind: str
    address: str
    namespaces: tuple[str, ...] = ("*",)
    cluster_id: str | None = ""

    def serves(self, namespace: str) -> bool:
        return "*" in self.namespaces or namespace in self.namespaces

    @property
    def label(self) -> str:
        return describe(self.kind, self.address, ",".join(self.namespaces),
                        self.cluster_id or "")

    def binding(self, namespace: str) -> Binding:
        """What an accept records: this destination, for ``namespace``."""
        return {"kind": self.kind, "address": self.address, "namespace": namespace,
                "cluster_id": self.cluster_id or ""}


def describe(kind: str, address: str, namespace: str, cluster_id: str = "") -> str:
    """One line naming a destination (never a password: a shared simulator's label is
    redacted by infra)."""
    if kind == "sim":
        text = "sim" if address == STORE_SIM else address
    elif kind == "temporal":
        text = f"temporal://{address}/{namespace}"
    else:
        text = f"{kind} destination {address}"
    return text + (f" (cluster {cluster_id})" if cluster_id else "")


def describe_binding(binding: Mapping[str, Any] | None) -> str:
    """A binding as status, history and the web page show it."""
    if binding is None:
        return "unknown (recorded before destinations were; see docs/operators.md)"
    return describe(str(binding.get("kind", "")), str(binding.get("address", "")),
                    str(binding.get("namespace", "")), str(binding.get("cluster_id") or ""))


def needs_cluster_id(binding: Mapping[str, Any] | None, serving: DestinationId) -> bool:
    """The gate can decide only once the serving Temporal cluster's id is read: the binding
    names a cluster of the same kind, and the process has not read its own yet."""
    return (binding is not None and serving.kind == binding.get("kind") == "temporal"
            and serving.serves(str(binding.get("namespace", "")))
            and bool(binding.get("cluster_id")) and serving.cluster_id is None)


def mismatch(binding: Mapping[str, Any], serving: DestinationId) -> str:
    """Why ``serving`` is not the destination ``binding`` names ("" when it is). The kind,
    then the namespace; then the cluster's own id where both sides know one (the same
    cluster behind another address is the same destination; another cluster at the same
    address, e.g. a server re-created, is not); else the address."""
    if binding.get("kind") != serving.kind:
        return "another kind of destination"
    if not serving.serves(str(binding.get("namespace", ""))):
        return f"namespace {binding.get('namespace')} is not served here"
    bound_cluster, serving_cluster = binding.get("cluster_id") or "", serving.cluster_id or ""
    if bound_cluster and serving_cluster:
        return "" if bound_cluster == serving_cluster else "another cluster"
    return "" if binding.get("address") == serving.address else "another address"


def destination_gate(what: str, binding: Mapping[str, Any] | None, serving: DestinationId,
                     bind_hint: str = "") -> None:
    """Refuse a step on ``what`` (e.g. ``migration default/pin1``) unless this process serves
    the destination it was accepted against; ``bind_hint``: how an operator binds an unknown
    one. Raises ``DestinationMismatch`` or ``DestinationUnknown``."""
    if binding is None:
        raise DestinationUnknown(
            f"{what} was accepted by a release that recorded no destination; this process "
            f"serves {serving.label}; nothing was done"
            + (f": {bind_hint}" if bind_hint else ""))
    why = mismatch(binding, serving)
    if why:
        raise DestinationMismatch(
            f"{what} was accepted against {describe_binding(binding)}; this process serves "
            f"{serving.label} ({why}); nothing was done")


def bind_hint(namespace: str, schedule_id: str) -> str:
    """How an operator binds a rollback whose destination is unknown."""
    return (f"check where it was accepted, then run `schedfence recover bind {namespace} "
            f"{schedule_id} --actor A --reason R` on a process serving that destination "
            "(docs/operators.md)")


def check_bind(what: str, binding: Mapping[str, Any] | None) -> None:
    """An operator's explicit bind: only an unknown binding may be bound (a recorded one is
    never replaced: that would move a migration to another destination)."""
    if binding is not None:
        raise RecoveryRefused(f"{what} is already bound to {describe_binding(binding)}; a "
                              "recorded destination is never replaced")
