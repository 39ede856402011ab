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


def test_batch_benchmark_prints_every_path_and_shape() -> None:
    """``batch_throughput.py --quick``: the baselines, the one-at-a-time path and each batched
    shape (processes, and threads in one process), each checked complete by the script."""
    done = subprocess.run([sys.executable, "benchmarks/batch_throughput.py", "--quick",
                           "--procs", "1,1x2"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr
    labels = ["raw tx", "raw COPY", "single", "batched, 1 process ",
              "batched, 1 process x 2 threads"]
    rows = {label: ln for ln in done.stdout.splitlines() for label in labels
            if ln.startswith(label) and (label != "batched, 1 process " or "threads" not in ln)}
    assert sorted(rows) == sorted(labels), done.stdout
    assert all(float(ln.split()[-3]) > 0 for ln in rows.values())  # migrations/s
    assert "# scaling: 1 process x 2 threads = " in done.stdout
