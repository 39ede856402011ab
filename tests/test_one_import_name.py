"""One import package: every module is imported as ``schedfence.<room>.<module>``, never bare.

The folders ``domain/``, ``projections/`` and ``infra/`` stay at the top of the repository; setuptools'
package-dir maps them under ``schedfence``. A bare ``import infra`` anywhere would load a second copy of
a module (two classes with one name: ``isinstance`` and ``except`` would silently stop matching), and an
embedding application's own ``domain`` package would clash with ours.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BARE = re.compile(r"^\s*(from|import) (domain|infra|projections)(\s|\.)", re.M)
BARE_MODULE = re.compile(r"[\"']-m[\"'],\s*[\"'](domain|infra|projections)\.")


def _sources() -> list[Path]:
    rooms = ("domain", "infra", "projections", "schedfence", "tests", "benchmarks")
    return [p for room in rooms for p in (ROOT / room).rglob("*.py")]


def test_no_module_is_imported_under_a_bare_room_name() -> None:
    offenders = [f"{p.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}"
                 for p in _sources() for text in [p.read_text()]
                 for m in [*BARE.finditer(text), *BARE_MODULE.finditer(text)]]
    assert len(_sources()) > 100  # the scan really read the tree
    assert offenders == []


def test_an_embedding_application_imports_one_package_and_nothing_bare(tmp_path: Path) -> None:
    # Run from an unrelated directory, as an embedding application would: only the installed
    # package is on the path, and the bare names must not be importable from it.
    script = (
        "import json, sys\n"
        "import schedfence.infra.application.service as service\n"
        "import schedfence.infra.cli.commands\n"
        "from schedfence.domain import ports\n"
        "bare = sorted(n for n in sys.modules if n.split('.')[0] in ('domain', 'infra', 'projections'))\n"
        "print(json.dumps({'service': service.__file__, 'ports': ports.__file__, 'bare': bare,\n"
        "                  'open_service': callable(service.open_service)}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["bare"] == []
    # The files of the tree (through the venv's typed path, whose rooms link to them: Makefile).
    assert Path(found["service"]).resolve() == ROOT / "infra" / "application" / "service.py"
    assert Path(found["ports"]).resolve() == ROOT / "domain" / "ports.py"
    assert found["open_service"] is True


def test_the_package_ships_its_type_marker() -> None:
    assert (ROOT / "schedfence" / "py.typed").is_file()
    config = (ROOT / "pyproject.toml").read_text()
    assert 'schedfence = ["py.typed"]' in config
    assert 'schedfence = "schedfence.infra.cli:main"' in config
