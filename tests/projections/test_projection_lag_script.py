"""``benchmarks/projection_lag.py --quick`` still runs end to end and prints a row per mode
(timings are not asserted: they depend on the machine)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests import pgtools

ROOT = Path(__file__).resolve().parents[2]


def test_the_lag_benchmark_measures_polling_and_the_subscription(pg_database: str) -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/projection_lag.py", "--quick", "--sqlite", "--server",
         pgtools.database_url(pg_database)], cwd=ROOT, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith("| ") and "ms" not in ln
            and "---" not in ln and not ln.startswith("| mode")]
    assert [r.split(" | ")[0] for r in rows] == [
        "| PostgreSQL, poll every 1 s", "| PostgreSQL, subscribe (LISTEN/NOTIFY)",
        "| SQLite, poll every 1 s"]
    assert all(len(r.strip("| ").split(" | ")) == 5 for r in rows)
