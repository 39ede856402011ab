"""``schedfence projection follow``: JSON Lines per batch, a clean stop on SIGTERM or SIGINT (a
subprocess), resuming where it stopped, and the error contract for a refusal and a gap."""
from __future__ import annotations

import json
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from schedfence.infra.cli.commands import cli
from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service

ROOT = Path(__file__).resolve().parents[3]
WAIT = 30.0  # seconds for a line: far more than a subprocess start


class Follow:
    """``projection follow --json`` in a subprocess, its stdout read line by line."""

    def __init__(self, store: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "schedfence.infra.cli", "--store", store, "projection",
             "follow", "--json", *args], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def next(self) -> dict:
        try:
            return json.loads(self.lines.get(timeout=WAIT))
        except queue.Empty:
            self.proc.kill()
            raise AssertionError(f"no line within {WAIT:g}s; stderr: "
                                 f"{self.proc.communicate()[1]}") from None

    def stop(self, signum: int) -> tuple[int, str]:
        self.proc.send_signal(signum)
        try:
            code = self.proc.wait(WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


def append(store: str, schedule_id: str) -> int:
    with open_service(store, SimulatedDestination()) as svc:
        svc.create_schedule("default", schedule_id)
        return svc.event_count()


def status(store: str) -> dict:
    result = CliRunner().invoke(cli, ["--store", store, "projection", "status", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_follow_prints_a_line_per_batch_and_stops_cleanly(file_store_url: str, store_kind: str,
                                                          signum: int) -> None:
    store = file_store_url
    first = append(store, "before")
    run = Follow(store, "--interval", "0.1") if store_kind == "sqlite" else Follow(store)
    started = run.next()
    assert started == {"event": "started", "interval": started["interval"],
                       "mode": "subscribe" if store_kind == "postgres" else "poll"}
    batch = run.next()
    assert batch["event"] == "batch" and batch["position"] == first and batch["events"] == 3
    assert batch["lag_seconds"] >= 0
    second = append(store, "after")
    batch = run.next()
    assert (batch["event"], batch["position"], batch["events"]) == ("batch", second, 3)
    code, stderr = run.stop(signum)
    assert code == 0 and stderr == ""
    assert run.next() == {"event": "stopped", "position": second}
    assert status(store)["projected_through"] == second

    third = append(store, "while-stopped")  # a restart applies only what is new
    again = Follow(store, "--interval", "0.1")
    assert again.next()["event"] == "started"
    batch = again.next()
    assert (batch["position"], batch["events"]) == (third, 3)
    assert again.stop(signal.SIGTERM) == (0, "")
    assert sum(status(store)["tables"].values()) > 0


def test_subscribe_on_sqlite_is_refused_with_one_line(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    append(store, "s")
    result = CliRunner().invoke(cli, ["--store", store, "projection", "follow", "--mode",
                                      "subscribe"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("error: invalid_argument: ") and \
        len(result.stderr.splitlines()) == 1 and "--mode poll" in result.stderr
    with sqlite3.connect(tmp_path / "store.db") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master")]
    assert not [t for t in tables if t.startswith("schedfence_proj")]


def test_a_gap_stops_follow_with_the_projection_error(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    append(store, "a")
    append(store, "b")
    with sqlite3.connect(tmp_path / "store.db") as db:
        db.execute("DELETE FROM stored_events WHERE rowid = 5")
    result = CliRunner().invoke(cli, ["--store", store, "projection", "follow", "--json"])
    assert result.exit_code == 1
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line.get("event") for line in lines[:2]] == ["started", "batch"]
    assert (lines[1]["position"], lines[1]["events"]) == (4, 4)
    assert lines[2]["error"]["code"] == "projection_gap"
    assert "position 5 is missing" in lines[2]["error"]["message"]


def test_bad_interval_is_a_usage_error(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    result = CliRunner().invoke(cli, ["--store", store, "projection", "follow", "--interval",
                                      "0"])
    assert result.exit_code == 2 and "--interval" in result.stderr
