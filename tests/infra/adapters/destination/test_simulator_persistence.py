"""The simulator kept in a store (``SqlSimState``): shared between instances, never in
memory, and serialised between processes."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from schedfence.domain.ports import AlreadyStarted
from schedfence.infra.adapters.destination.simulator import SimulatedDestination, SqlSimState

from tests.infra.adapters.destination.sim_requests import NS, REPO, WID, req


# --- persistence ------------------------------------------------------------------------------

def test_sql_state_shared_between_instances(file_store_url):
    url = file_store_url  # a SQLite file or a PostgreSQL schema (tests/conftest.py)
    one, two = SimulatedDestination(SqlSimState(url)), SimulatedDestination(SqlSimState(url))
    a = one.start_workflow(req("R1", input={"k": [1, 2]}))
    assert two.describe(NS, WID) == one.describe(NS, WID)
    assert two.start_workflow(req("R1")) == a  # dedupe across instances
    b = two.continue_as_new(NS, WID)
    with pytest.raises(AlreadyStarted) as exc:
        one.start_workflow(req("R1"))
    assert (exc.value.run_id, exc.value.first_execution_run_id) == (b, a.run_id)
    reopened = SimulatedDestination(SqlSimState(url))
    assert [r.run_id for r in reopened.runs(NS, WID)] == [a.run_id, b]
    assert [o for _, o in reopened.start_log()] == ["created", "deduplicated", "already_started"]
    assert reopened.start_log()[0][0] == req("R1", input={"k": [1, 2]})


def test_sql_state_rejects_memory_url():
    for url in ("sqlite://", "sqlite:///:memory:"):
        with pytest.raises(ValueError, match="InMemorySimState"):
            SqlSimState(url)


WORKER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    from schedfence.domain.ports import AlreadyStarted, StartWorkflow
    from schedfence.infra.adapters.destination.simulator import SimulatedDestination, SqlSimState
    d = SimulatedDestination(SqlSimState(sys.argv[2]))
    for k in range(int(sys.argv[4])):
        d.start_workflow(StartWorkflow("default", f"{sys.argv[3]}-{k}", "R", "T"))
        d.start_workflow(StartWorkflow("default", "shared", "same", "T"))
""")


def test_sql_state_serialises_concurrent_processes(file_store_url):
    url = file_store_url  # a SQLite file or a PostgreSQL schema (tests/conftest.py)
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(REPO), url, f"p{i}", "15"])
             for i in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    d = SimulatedDestination(SqlSimState(url))
    assert len(d.workflow_ids()) == 3 * 15 + 1  # no lost updates
    assert d.created_count(NS, "shared") == 1  # one run, all other starts deduplicated
    outcomes = [o for r, o in d.start_log(NS, "shared")]
    assert len(outcomes) == 45 and outcomes.count("created") == 1
    run_ids = [d.describe(NS, wid).run_id for _, wid in d.workflow_ids()]
    assert len(set(run_ids)) == len(run_ids)
