"""``benchmarks/projection_rebuild.py --quick`` runs end to end on PostgreSQL and prints its
figures; the script itself checks that every rebuild wrote the same rows. Timings are never
asserted: they depend on the machine."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests import pgtools

ROOT = Path(__file__).resolve().parents[2]


def test_projection_rebuild_benchmark_prints_both_rates_and_the_ratio() -> None:
    pgtools.require_postgres()
    done = subprocess.run([sys.executable, "benchmarks/projection_rebuild.py", "--quick"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    counts = re.search(r"# (\d+) events, (\d+) view rows \(aggregates (\d+), audit (\d+), "
                       r"migrations (\d+)", out)
    assert counts, out
    events, _, aggregates, audit, migrations = map(int, counts.groups())
    assert (migrations, aggregates, audit) == (200, 400, events)  # 200 rolled back
    rates = {ln.split("  ")[0].strip(): ln for ln in out.splitlines()
             if ln.startswith(("rebuild", "raw COPY"))}
    assert sorted(rates) == ["raw COPY (same rows)", "rebuild (OperatorViews)"], out
    assert re.search(r"# rebuild = \d+\.\d{3}x raw COPY", out)
