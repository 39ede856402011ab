"""Shared by the CLI's tests (test_cli.py, test_cli_verify_and_worker.py) and the demo's
(tests/infra/demo/test_demo.py): a store on both backends (the ``store`` fixture), the
CLI invoked in process or in a subprocess, and the events a store holds."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from schedfence.infra.cli.commands import cli
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def store(file_store_url: str) -> str:
    """A SQLite file or a PostgreSQL schema: every store test runs on both (tests/conftest.py)."""
    return file_store_url


def run(store: str, *args: str, env: dict | None = None):
    return CliRunner(env=env).invoke(cli, ["--store", store, *args])


def ok(store: str, *args: str) -> str:
    result = run(store, *args)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def ok_json(store: str, *args: str) -> dict:
    return json.loads(ok(store, *args, "--json"))


def event_count(store: str) -> int:
    # An in-memory destination: counting must not touch the store's persisted simulator.
    with open_service(store, SimulatedDestination()) as service:
        return service.event_count()


def events_in(store: str) -> int:
    """How many events the store holds: counted, since PostgreSQL's log positions have holes
    wherever a save rolled back, so the last position can overstate it."""
    with open_service(store, SimulatedDestination()) as service:
        return sum(1 for _ in service.app.notifications())


def subprocess_cli(store: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store, *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, **kw)


def modules_of_command(store: str, *args: str) -> tuple[str, set[str]]:
    """A ``schedfence --store STORE ARGS...`` run in a fresh interpreter (it must exit 0): its
    stdout, and every module it had loaded by the end."""
    code = ("import json, sys\n"
            f"sys.argv = ['schedfence', '--store', {store!r}, *{list(args)!r}]\n"
            "from schedfence.infra.cli import main\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout, set(json.loads(done.stderr.strip().splitlines()[-1]))


def stops_on_sigint(proc: subprocess.Popen, settle: float = 0.3) -> tuple[str, str]:
    """Ctrl-C a long-running command ``settle`` seconds from now: it exits 0 within 30 s
    without a traceback; its stdout and stderr from then on."""
    try:
        time.sleep(settle)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    return out, err
