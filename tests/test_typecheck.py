"""The types hold: mypy with the [tool.mypy] settings of pyproject.toml, run by ``make test``.

mypy finds a package's modules on disk under the package's own folder, but our subpackages live
at the top of the repository and are mapped by setuptools' package-dir (the editable install's
import hook is invisible to it). So, as for the import contracts, the check runs on a staged
``schedfence/`` whose ``domain``, ``infra`` and ``projections`` link to (or, for the negative
case, are copies of) the repository's folders, with ``-p schedfence``: every module is checked.

To run it by hand: ``.venv/bin/python -m pytest -q tests/test_typecheck.py``.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.staging import stage

ROOT = Path(__file__).resolve().parents[1]


def _mypy(staged: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MYPYPATH=str(staged))
    env.pop("MYPY_FORCE_COLOR", None)
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               "--cache-dir", str(cache), "--no-color-output", "--no-error-summary",
               "-p", "schedfence"]
    return subprocess.run(command, cwd=staged, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for both runs: the libraries' stubs (pydantic, SQLAlchemy...) are read once."""
    return tmp_path_factory.mktemp("mypy-cache")


def test_mypy_reports_nothing(tmp_path: Path, cache: Path) -> None:
    done = _mypy(stage(tmp_path / "stage", copy=False), cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "", done.stdout


def test_a_type_error_in_the_domain_breaks_the_build(tmp_path: Path, cache: Path) -> None:
    staged = stage(tmp_path / "stage", copy=True)
    (staged / "schedfence" / "domain" / "zz_wrong.py").write_text(
        "def count() -> int:\n    return 'many'  # a str where an int is promised\n")
    done = _mypy(staged, cache)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "schedfence/domain/zz_wrong.py:2: error: Incompatible return value type" in done.stdout
