"""The simulator's batch of starts (``StartBatcher``, one session for many starts) answers and
leaves the state exactly as the same starts sent one at a time: the same outcome per start
(dedupes within the batch too), the same runs, the same log, the same faults drawn; in memory
and in SQL rows (where the batch reads its workflow rows in one query and writes them in one
statement each way)."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from schedfence.domain.ports import DestinationError, StartAccepted
from schedfence.infra.adapters.destination.sim_sql import SqlSimState
from schedfence.infra.adapters.destination.sim_store import InMemorySimState
from schedfence.infra.adapters.destination.simulator import FaultRates, SimulatedDestination

from tests.infra.adapters.destination.sim_requests import CONFLICT, NS, REUSE, req

WIDS = ("w1", "w2", "w3")
starts = st.lists(st.tuples(st.sampled_from(("r1", "r2", "")), st.sampled_from(REUSE),
                            st.sampled_from(CONFLICT), st.sampled_from(WIDS)), max_size=12)
# Before the batch: some workflows already have runs, some closed.
before = st.lists(st.tuples(st.sampled_from(WIDS), st.sampled_from(("r0", "r1")),
                            st.booleans()), max_size=4)


def answer(a: StartAccepted | DestinationError | Exception) -> tuple:
    return (type(a).__name__, vars(a)) if isinstance(a, StartAccepted) else (type(a).__name__,
                                                                             str(a))


def one_at_a_time(dest: SimulatedDestination, requests) -> list:
    answers = []
    for r in requests:
        try:
            answers.append(dest.start_workflow(r))
        except DestinationError as exc:
            answers.append(exc)
    return answers


def world(state, prior, faults: FaultRates) -> SimulatedDestination:
    dest = SimulatedDestination(state, seed=7)
    for wid, rid, closed in prior:
        try:
            dest.start_workflow(req(rid, wid=wid))
        except DestinationError:
            pass
        if closed and dest.describe(NS, wid).status == "running":
            dest.complete(NS, wid)
    dest.faults = faults  # for the starts compared, each drawing from the same sequence
    return dest


def state_of(dest: SimulatedDestination) -> tuple:
    runs = {w: [vars(r) for r in dest.runs(NS, w)] for ns, w in dest.workflow_ids()}
    return runs, [(vars(r), o) for r, o in dest.start_log()], dest.workflow_ids()


@settings(max_examples=40, deadline=None)
@given(before, starts, st.sampled_from((0.0, 0.3)))
@example([], [("r1", "allow_duplicate", "fail", "w1")] * 2, 0.0)  # a dedupe within the batch
@example([("w1", "r0", False)], [("r1", "allow_duplicate", "use_existing", "w1"),
                                 ("r2", "terminate_if_running", "fail", "w1")], 0.0)
def test_a_batch_of_starts_is_the_same_starts_one_at_a_time(prior, spec, rate):
    faults = FaultRates(lose_response=rate / 2, unavailable=rate / 2)
    requests = [req(rid, reuse, conflict, wid=wid) for rid, reuse, conflict, wid in spec]
    with tempfile.TemporaryDirectory() as tmp:
        for make in (InMemorySimState, lambda: SqlSimState(f"sqlite:///{Path(tmp)}/{id(make)}.db")):
            batched, single = world(make(), prior, faults), world(InMemorySimState(), prior, faults)
            got = batched.start_workflows(requests)
            assert [answer(a) for a in got] == [answer(a) for a in one_at_a_time(single, requests)]
            assert state_of(batched) == state_of(single)
