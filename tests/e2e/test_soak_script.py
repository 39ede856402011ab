"""``benchmarks/soak.py --quick`` runs end to end and prints its table and verdicts.
Timings and memory are never asserted: they depend on the machine."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_soak_quick_prints_a_sample_table_and_flatness_verdicts() -> None:
    done = subprocess.run([sys.executable, "benchmarks/soak.py", "--quick"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("machine: ")
    assert lines[1].startswith("store: sqlite; 600 migrations, a sample every 100")
    assert lines[2].startswith("| migrations | RSS MB |") and lines[3].startswith("|---")
    rows = [ln for ln in lines if re.match(r"\|\s+\d+ \|", ln)]
    assert [int(r.split("|")[1]) for r in rows] == [100, 200, 300, 400, 500, 600]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 5 and float(cells[1]) > 0 and cells[2] == "-"
        # The simulator's time is summed over calls, and a batch's starts run concurrently:
        # it may exceed the wall time.
        assert float(cells[3]) > 0 and float(cells[4]) > 0
    assert any(ln.startswith("RSS growth first->last sample: ") and "KB per migration" in ln
               for ln in lines)
    for label in ("RSS", "sim s/100 rollbacks", "wall s/100 migrations"):
        verdict = next(ln for ln in lines if ln.startswith(f"{label}: last-quarter/first-quarter"))
        assert re.search(r"ratio \d+\.\d+ over 6 samples \((flat|NOT flat), threshold 1.5\)",
                         verdict), verdict
