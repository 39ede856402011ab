"""Where the simulated destination keeps its state: the view every call has of it (``SimTx``,
inside one serialised transaction of a ``SimState``), and the state in memory.

The simulator makes each call inside one serialised transaction, through ``SimTx``: the runs of
one workflow id, the id counter, the start log. In memory the state is one plain-JSON dict
(``InMemorySimState``); in SQL it is rows per workflow id (sim_sql.py, ``SqlSimState``).
"""
from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol, runtime_checkable


class SimTx(Protocol):
    """One simulator call's view of the state, inside its transaction."""

    def runs(self, namespace: str, workflow_id: str) -> list[dict]:
        """The id's runs, oldest first ([] if none); changes to them are saved with the call."""
        ...

    def add_run(self, namespace: str, workflow_id: str, run: dict) -> None: ...

    def preload(self, keys: list[tuple[str, str]]) -> None:
        """Read the runs of these (namespace, workflow id) pairs at once (a call about many
        ids: one read, not one per id); ``runs`` then answers them from what was read."""
        ...

    def next_counter(self) -> int: ...

    def append_log(self, entry: dict) -> None: ...

    def log(self, namespace: str | None = None, workflow_id: str | None = None) -> list[dict]: ...

    def workflow_ids(self) -> list[tuple[str, str]]:
        """Every id that ever had a run, in the order of their first runs."""
        ...


@runtime_checkable
class SimState(Protocol):
    def session(self) -> AbstractContextManager[SimTx]:
        """One serialised transaction; committed if the block exits cleanly."""
        ...


def _key(namespace: str, workflow_id: str) -> str:
    # JSON keys must be strings; a JSON pair is unambiguous whatever the ids contain.
    return json.dumps([namespace, workflow_id])


def _matches(entry: dict, namespace: str | None, workflow_id: str | None) -> bool:
    req = entry["request"]
    return ((namespace is None or req["namespace"] == namespace)
            and (workflow_id is None or req["workflow_id"] == workflow_id))


class DictTx:
    """``SimTx`` over the whole-state dict: ``{"counter", "workflows": {key: runs}, "log"}``."""

    def __init__(self, state: dict) -> None:
        state.setdefault("counter", 0)
        state.setdefault("workflows", {})
        state.setdefault("log", [])
        self._s = state

    def runs(self, namespace: str, workflow_id: str) -> list[dict]:
        return self._s["workflows"].get(_key(namespace, workflow_id), [])

    def add_run(self, namespace: str, workflow_id: str, run: dict) -> None:
        self._s["workflows"].setdefault(_key(namespace, workflow_id), []).append(run)

    def preload(self, keys: list[tuple[str, str]]) -> None:
        pass  # the whole state is in hand

    def next_counter(self) -> int:
        self._s["counter"] += 1
        return self._s["counter"]

    def append_log(self, entry: dict) -> None:
        self._s["log"].append(entry)

    def log(self, namespace: str | None = None, workflow_id: str | None = None) -> list[dict]:
        return [e for e in self._s["log"] if _matches(e, namespace, workflow_id)]

    def workflow_ids(self) -> list[tuple[str, str]]:
        return [tuple(json.loads(k)) for k in self._s["workflows"]]


class InMemorySimState:
    """State in a dict, one transaction at a time; a failed block leaves the state untouched.

    ``rollback=False`` skips the per-call copy of the whole state that makes a failed block
    roll back; every SimulatedDestination call checks before it changes anything, so it needs
    none, and the copy grows with the runs kept (benchmarks of long workloads turn it off).
    """

    def __init__(self, rollback: bool = True) -> None:
        self._lock = threading.Lock()
        self._state: dict = {}
        self._rollback = rollback

    @contextmanager
    def transaction(self) -> Iterator[dict]:
        """The whole mutable state dict (tests read it directly)."""
        with self._lock:
            if not self._rollback:
                yield self._state
                return
            # Work on a copy so an exception inside the block behaves like a rollback.
            working = copy.deepcopy(self._state)
            yield working
            self._state = working

    @contextmanager
    def session(self) -> Iterator[SimTx]:
        with self.transaction() as state:
            yield DictTx(state)
