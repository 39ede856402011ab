"""The layers hold: import-linter's contracts from pyproject.toml, run by ``make test``.

import-linter (grimp) finds a package's modules on disk under the package's own folder, but our
subpackages live at the top of the repository and are mapped by setuptools' package-dir. So the
check runs on a staged ``schedfence/`` whose ``domain``, ``infra`` and ``projections`` are links
to (or, for the negative case, copies of) the repository's folders.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.staging import stage

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(staged: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(staged))
    return subprocess.run([str(LINT), str(ROOT / "pyproject.toml"), "--no-cache"],
                          cwd=staged, env=env, capture_output=True, text=True, timeout=300)


def test_every_import_contract_is_kept(tmp_path: Path) -> None:
    done = _lint(stage(tmp_path, copy=False))
    assert done.returncode == 0, done.stdout + done.stderr
    contracts = (ROOT / "pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    assert f"Contracts: {contracts} kept, 0 broken." in done.stdout
    analyzed = int(done.stdout.split("Analyzed ")[1].split(" files")[0])
    assert analyzed >= 90  # the staged tree really holds every module


def test_a_domain_module_reaching_into_infra_breaks_the_build(tmp_path: Path) -> None:
    staged = stage(tmp_path, copy=True)
    (staged / "schedfence" / "domain" / "zz_violation.py").write_text(
        "from schedfence.infra.adapters.store import eventstore  # a rule that does I/O\n")
    done = _lint(staged)
    assert done.returncode != 0
    assert "domain is pure: no infra, projections, SQL, Temporal or CLI BROKEN" in done.stdout
    assert "schedfence.domain.zz_violation -> schedfence.infra.adapters.store" in done.stdout
