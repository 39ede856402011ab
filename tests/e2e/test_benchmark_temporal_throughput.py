"""``benchmarks/temporal_throughput.py --quick`` runs end to end against a real Temporal dev
server (which the script starts and stops itself) and prints every row and ratio it promises.

Timings are never asserted (they depend on the machine and the server). What is asserted: the
three paths' rows with positive rates, both ratios, the fenced path's time breakdown, and the
fenced run's store (kept with ``--store``), read here: every migration completed and the
invariant checker finds nothing. In CI (``CI=true``) a missing ``temporal`` binary fails; elsewhere it skips."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from schedfence.infra.application.service import open_service
from tests.temporal_server import ServerError, temporal_binary

ROOT = Path(__file__).resolve().parents[2]
QUICK = 20  # migrations per path with --quick
ROWS = ("fenced (rollback_many + attempt_batch)", "unfenced, raw CreateSchedule",
        "unfenced, adapter start")
BREAKDOWN = ("rollback_many", "sentinel describes (concurrent, wall)", "rollback append",
             "attempt_batch", "claim appends", "starts (concurrent windows)", "answer appends",
             "close appends", "mean start call, ms")


def _script_output(store: str) -> list[str]:
    try:
        temporal_binary()
    except ServerError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    done = subprocess.run([sys.executable, "benchmarks/temporal_throughput.py", "--quick",
                           "--store", store], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def _number(text: str) -> float:
    found = re.search(r"[0-9]+\.[0-9]+", text)
    assert found, text
    return float(found.group())


def test_temporal_throughput_prints_both_paths_ratios_and_a_clean_fenced_store(
        pg_store: str) -> None:
    lines = _script_output(pg_store)
    assert lines[0].startswith("# Temporal dev server ") and "concurrency 50" in lines[0]
    assert lines[2].startswith("# run 1: server at 127.0.0.1:")
    assert lines[1].startswith("# machine: ")
    per_run = [ln for ln in lines if ln.startswith("# run 1: ") and "migrations/s" in ln]
    assert sorted(ln.split()[3] for ln in per_run) == ["adapter", "fenced", "raw"]
    for label in ROWS:
        row = next(ln for ln in lines if ln.startswith(label))
        assert _number(row[len(label):]) > 0, row  # migrations/s
    ratio = next(ln for ln in lines if ln.startswith("ratio fenced / unfenced raw CreateSchedule"))
    assert _number(ratio.split("=")[1]) > 0 and "target >= 0.8x: " in ratio
    assert any(ln.startswith("ratio fenced / unfenced adapter start = ") for ln in lines)
    start = lines.index("where the fenced path's time went (median over runs; seconds per run, "
                        "share):")
    shown = [ln.strip() for ln in lines[start + 1:]]
    for label in BREAKDOWN:
        assert any(ln.startswith(label) for ln in shown), label
    assert lines[-1].startswith("checker: ok")
    # The fenced run's store, read here on its own: every rollback completed, none refused,
    # and the invariant checker finds nothing.
    with open_service(pg_store, "sim", worker_id="check") as svc:
        by_state = svc.stats()["by_state"]
        assert by_state.get("completed") == QUICK and sum(by_state.values()) == QUICK, by_state
        assert svc.verify() == []
