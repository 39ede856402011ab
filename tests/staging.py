"""A staged ``schedfence/`` package for the tools that find modules on disk (import-linter,
mypy): our subpackages live at the top of the repository and are mapped by setuptools'
package-dir, which those tools cannot follow. The stage's ``domain``, ``infra`` and
``projections`` link to the repository's folders, or are copies of them (for the negative
tests, which edit the copy)."""
from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("domain", "infra", "projections")


def stage(where: Path, copy: bool) -> Path:
    """``where`` holding ``schedfence/`` (its ``__init__.py`` and ``py.typed``, and the rooms
    linked or copied); returns ``where``."""
    package = where / "schedfence"
    package.mkdir(parents=True)
    for name in ("__init__.py", "py.typed"):
        shutil.copy(ROOT / "schedfence" / name, package / name)
    for room in ROOMS:
        if copy:
            shutil.copytree(ROOT / room, package / room,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (package / room).symlink_to(ROOT / room, target_is_directory=True)
    return where
