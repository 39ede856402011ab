"""``benchmarks/throughput.py --quick`` runs end to end on both stores and prints its table.

Timings are never asserted (they depend on the machine); the script itself checks that every
migration of every run completed before it reports a rate."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_throughput_benchmark_prints_a_row_per_store_and_process_count() -> None:
    done = subprocess.run([sys.executable, "benchmarks/throughput.py", "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    rows = [ln.split() for ln in done.stdout.splitlines()
            if ln.startswith(("sqlite ", "postgres "))]
    assert [(r[0], r[1]) for r in rows] == [("sqlite", "1"), ("sqlite", "2"),
                                           ("postgres", "1"), ("postgres", "2")]
    assert all(float(r[2]) > 0 and float(r[3]) > 0 for r in rows)  # fence/s and raw/s
