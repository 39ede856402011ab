"""``benchmarks/audit_query.py`` still runs end to end (on a tiny store; timings not asserted)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_generates_projects_and_times_every_query_kind(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/audit_query.py", "--events", "3000", "--repeat", "1",
         "--store", str(tmp_path / "b.db")], cwd=ROOT, capture_output=True, text=True,
        timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("generated 300") and lines[1].startswith("projected 300")
    timed = [ln for ln in lines if ln.strip().endswith("rows)")]
    assert len(timed) == 13
    assert "(11 rows)" in timed[0]  # the probed schedule's whole history
