"""``--destination sim+STORE_URL``: the simulated destination kept in a store of its own.

By default the simulator lives beside the events, in the event store itself. A failover needs
the destination to outlive both the active and the standby store, as a real Temporal cluster
does, so both sides must talk to the same one: ``sim+postgresql://USER@HOST:PORT/DB[?schema=S]``
or ``sim+sqlite:///PATH`` keeps its state (rows per workflow id,
``destination/sim_sql.SqlSimState``) in that third store. The schema is created on first use; the
database must exist.
"""
from __future__ import annotations

import os

from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from sqlalchemy.exc import SQLAlchemyError

from schedfence.domain.destination_id import DestinationId
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.text import error_line
from schedfence.domain.ports import (DestinationError, DestinationNotReached, DestinationUnavailable,
                                     RunDescription, Settled, StartAccepted, StartWorkflow,
                                     StopKind)

from schedfence.infra.adapters.destination.sim_sql import RolledBack, SqlSimState
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.adapters.store.eventstore import parse_store_url

PREFIX = "sim+"


def is_shared_sim(url: str) -> bool:
    return url.startswith(PREFIX)


class SharedSimDestination:
    """The ``Destination`` port (and ``ActionRunner``, ``RunWatcher``, ``HandoverTarget``) over a
    ``SimulatedDestination`` in its own store.

    A database error in a call means the outcome is unknown, exactly like an unreachable
    server: it is raised as ``DestinationUnavailable`` so workers fail closed. Only a start
    whose transaction failed before its COMMIT provably started nothing: that one is raised as
    ``DestinationNotReached``, and the worker re-arms its claim instead of parking it. The
    simulator's environment operations (``chains``, ``continue_as_new``, ...) are on
    ``.simulator``; this object's ``close()`` releases connections (the CLI calls it when a
    command ends).
    """

    def __init__(self, url: str) -> None:
        if not is_shared_sim(url):
            raise InvalidArgument(f"a shared simulator URL starts with {PREFIX}")
        store = parse_store_url(url[len(PREFIX):])
        if store.kind == "sqlite-memory":
            raise InvalidArgument("a shared simulated destination needs a file or a server, "
                                  "not an in-memory store")
        if store.pg is not None:
            store.pg.ensure_schema()  # StoreUnavailable (without password) if unreachable
        self.label = f"{PREFIX}{store.redacted}"
        # Where its rows live (domain/destination_id.py): the database and schema, or the
        # file; never a user, password or connection option (a lock timeout, say).
        self.address = (f"{PREFIX}postgresql://{store.pg.libpq_host}:{store.pg.libpq_port}/"
                        f"{store.pg.dbname}?schema={store.pg.schema}" if store.pg is not None
                        else f"{PREFIX}sqlite:///{os.path.abspath(store.path or store.url)}")
        self.state = SqlSimState(store.url)
        self.simulator = SimulatedDestination(self.state)

    def start_workflow(self, request: StartWorkflow) -> StartAccepted:
        with self._start_errors("start"):
            return self.simulator.start_workflow(request)

    @contextmanager
    def _start_errors(self, call: str) -> Iterator[None]:
        try:
            yield
        except RolledBack as exc:  # before COMMIT: provably nothing started, the claim re-arms
            raise DestinationNotReached(
                f"{call} on {self.label}: nothing committed, the transaction failed before "
                f"COMMIT: {error_line(exc.__cause__ or exc)}") from None
        except SQLAlchemyError as exc:
            raise self._unavailable(call, exc) from None

    def start_workflows(self, requests: Sequence[StartWorkflow]
                        ) -> list[StartAccepted | DestinationError]:
        """``StartBatcher``: the simulator's one-session batch, its errors mapped as a single
        start's (before COMMIT: none of them started)."""
        with self._start_errors("starts"):
            return self.simulator.start_workflows(requests)

    def describe(self, namespace: str, workflow_id: str,
                 run_id: str | None = None) -> RunDescription:
        try:
            return self.simulator.describe(namespace, workflow_id, run_id)
        except SQLAlchemyError as exc:
            raise self._unavailable("describe", exc) from None

    def run_statuses(self, namespace: str, workflow_ids: Sequence[str]) -> dict[str, str]:
        """``RunWatcher``: the simulator's one-session answer."""
        try:
            return self.simulator.run_statuses(namespace, workflow_ids)
        except SQLAlchemyError as exc:
            raise self._unavailable("describe", exc) from None

    def stop_workflow(self, namespace: str, workflow_id: str, kind: StopKind,
                      reason: str = "") -> None:
        try:
            self.simulator.stop_workflow(namespace, workflow_id, kind, reason)
        except SQLAlchemyError as exc:
            raise self._unavailable("stop", exc) from None

    def settle_handover(self, request: StartWorkflow, first_run_id: str) -> Settled:
        try:
            return self.simulator.settle_handover(request, first_run_id)
        except SQLAlchemyError as exc:
            raise self._unavailable("settle", exc) from None

    def settle_deleted(self, request: StartWorkflow, first_run_id: str) -> Settled:
        try:
            return self.simulator.settle_deleted(request, first_run_id)
        except SQLAlchemyError as exc:
            raise self._unavailable("settle", exc) from None

    def _unavailable(self, call: str, exc: Exception) -> DestinationUnavailable:
        return DestinationUnavailable(f"{call} on {self.label}: {error_line(exc)}")

    def destination_identity(self, with_cluster: bool = False) -> DestinationId:
        """This shared simulator, by where its rows live (domain/destination_id.py)."""
        return DestinationId("sim", self.address)

    def close(self) -> None:
        self.state.dispose()

    def __getattr__(self, name: str) -> Any:
        # Inspection helpers (chains, created_count, start_log) for operators and tests.
        if name == "simulator":  # not set yet: __init__ failed
            raise AttributeError(name)
        return getattr(self.simulator, name)


def open_shared_sim(url: str) -> SharedSimDestination:
    return SharedSimDestination(url)
