"""The worker command and real worker processes on PostgreSQL: insane seconds refused, a
unique identity recorded, terminated connections ridden out, and SIGTERM honoured while
the destination hangs."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.engines.attempt import BATCH_SIZE

from tests.infra.engines.pool_helpers import (NS, _claim_workers, _rollbacks, _worker_process,
                                             assert_rode_it_out, pool_outcome, stop_all,
                                             worker_backends)


# -- the worker command: its options, its identity, and real processes on PostgreSQL --------
def _cli(store: str, *args: str) -> Any:
    from click.testing import CliRunner
    from schedfence.infra.cli.commands import cli
    return CliRunner().invoke(cli, ["--store", store, *args])


@pytest.mark.parametrize("option,value", [
    ("--poll-interval", "inf"), ("--poll-interval", "1e308"), ("--poll-interval", "nan"),
    ("--poll-interval", "3601"), ("--claim-grace", "nan"), ("--claim-grace", "inf"),
    ("--claim-grace", "1e400")])
def test_the_worker_refuses_insane_seconds(tmp_path: Path, option: str, value: str) -> None:
    store = f"sqlite:///{tmp_path}/w.db"
    result = _cli(store, "worker", "--until-idle", "--concurrency", "2", option, value)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, (result.stdout, result.stderr)
    assert lines[0].startswith(f"error: invalid_argument: {option} must be"), lines


def test_the_worker_command_records_a_unique_identity(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/w.db"
    for args in (["schedule", "create", NS, "a"], ["rollback", NS, "a"],
                 ["--worker-id", "me", "worker", "--until-idle"]):
        result = _cli(store, *args)
        assert result.exit_code == 0, (result.stdout, result.stderr)
    with open_service(store, SimulatedDestination()) as svc:
        workers = _claim_workers(svc, ["a"])
    assert len(workers) == 1 and workers[0].startswith("me#") and workers[0] != "me#"


def _wait_until_connected(store: str, timeout: float = 60.0) -> None:
    """Until the worker process holds a connection to the store (it has started)."""
    from tests import pgtools
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with pgtools.admin() as conn:
            if worker_backends(conn, pgtools.schema_of(store)[0]):
                return
        time.sleep(0.1)
    raise AssertionError("the worker process never connected to the store")


def test_a_worker_process_rides_out_terminated_connections(tmp_path: Path) -> None:
    """The worker's PostgreSQL connections are killed again and again while rollbacks arrive;
    thread i serves only ids hashing to i, so every migration completing means every thread
    lived (and a thread that died would have ended the process non-zero)."""
    from schedfence.infra.adapters.destination.shared_sim import open_shared_sim
    from tests import pgtools
    with pgtools.fresh_database("schedfence_wr") as store, \
            pgtools.fresh_database("schedfence_wr_sim") as sim_url:
        dest = open_shared_sim(f"sim+{sim_url}")
        svc = open_service(store, dest, worker_id="admin")
        log = tmp_path / "worker.err"
        proc = _worker_process(store, sim_url, log, "--concurrency", "2",
                               "--claim-grace", "1")
        killed, sids = 0, [f"s{i}" for i in range(40)]
        _wait_until_connected(store)  # the kills are for a running worker, not its start
        try:
            # Rollbacks arrive in 8 waves, each followed by a kill of every connection of the
            # worker; on a loaded machine the worker may hold none at some kill (it is still
            # starting, or reconnecting), so kills go on after the waves until 8 have landed.
            for wave in range(30):
                for sid in sids[wave * 5:(wave + 1) * 5]:
                    svc.create_schedule(NS, sid)
                    svc.rollback(NS, sid)
                time.sleep(0.4)
                with pgtools.admin() as conn:
                    killed += worker_backends(conn, pgtools.schema_of(store)[0], terminate=True)
                if wave >= 7 and killed >= 8:
                    break
            outcome = pool_outcome(svc, proc, sids, timeout=90)
        finally:
            code = stop_all(proc, svc, dest)
        assert killed >= 8, (killed, outcome, log.read_text()[-2000:])
        assert_rode_it_out(outcome, code, log.read_text(), len(sids))


def test_sigterm_is_honoured_while_the_destination_hangs(tmp_path: Path) -> None:
    """The destination's table is locked, so every start call waits out its 1 s deadline (an
    accepting server that never answers); SIGTERM ends the worker within about one call (a
    batch's starts are in flight together)."""
    import signal
    from schedfence.infra.adapters.destination.shared_sim import open_shared_sim
    from schedfence.infra.adapters.destination.sim_rows import WORKFLOWS_TABLE
    from tests import pgtools
    with pgtools.fresh_database("schedfence_wt") as store, \
            pgtools.fresh_database("schedfence_wt_sim") as sim_url:
        dest = open_shared_sim(f"sim+{sim_url}")
        svc = open_service(store, dest, worker_id="admin")
        sids = _rollbacks(svc, 12)
        lock = pgtools.connect(sim_url + "?schema=public")
        lock.autocommit = False
        # Every simulator call reads its workflows' rows: holding the table stalls each call.
        lock.execute(f"LOCK TABLE {WORKFLOWS_TABLE} IN ACCESS EXCLUSIVE MODE")
        proc = _worker_process(store, sim_url + "?lock_timeout=1s", tmp_path / "w.err")
        try:
            deadline = time.monotonic() + 30
            while svc.stats()["by_state"].get("claimed", 0) < 1:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            code = proc.wait(timeout=60)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
            lock.rollback()
            lock.close()
        claimed = svc.stats()["by_state"].get("claimed", 0)
        svc.close()
        dest.close()
        assert code == 0 and took < 4, (code, took, (tmp_path / "w.err").read_text())
        # The batch in flight at SIGTERM (its starts all went out together, so they all
        # waited out one deadline); no new batch was claimed after it.
        assert claimed <= min(len(sids), BATCH_SIZE), claimed
