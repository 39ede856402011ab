"""SIGINT stops the long-running commands even when the process began with SIGINT ignored,
as a shell without job control starts a command run with ``&`` (found when the suite itself
ran from such a shell: ``worker`` and ``replicate --follow`` ignored the tests' SIGINT and
ran on until the tests' 30 s and 20 s timeouts)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.infra.cli.cli_runs import stops_on_sigint
from tests.replica_helpers import populate

ROOT = Path(__file__).resolve().parents[3]


def ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def started(argv: list[str], ready: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", *argv], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=ignoring_sigint)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if ready in proc.stdout.readline():
            return proc
    proc.kill()
    raise AssertionError(f"never printed {ready!r}")


def test_a_worker_started_with_sigint_ignored_stops_on_sigint(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    proc = started(["--store", store, "worker", "--poll-interval", "0.2"], "polling every")
    assert stops_on_sigint(proc)[0].strip().startswith("worker stopped after")


def test_a_follower_started_with_sigint_ignored_stops_on_sigint(tmp_path: Path) -> None:
    source = f"sqlite:///{tmp_path / 'active.db'}"
    populate(source, 1)
    proc = started(["replicate", "--from", source, "--to", f"sqlite:///{tmp_path / 's.db'}",
                    "--follow", "--poll-interval", "0.05"], "following")
    assert "follower stopped after copying" in stops_on_sigint(proc)[0]
