"""The package list, found on disk so it cannot drift from the tree (pyproject.toml holds the rest).

One import package, ``schedfence``; its rooms ``domain``, ``projections`` and ``infra`` stay at the top
of the repository and are mapped under it by ``[tool.setuptools.package-dir]``. setuptools' own
``find`` cannot follow that mapping, so every folder with an ``__init__.py`` under a room is listed
here as ``schedfence.<room>.<sub>``; the data folders (the web pages' templates and styles) are
listed as packages too, so their files (``[tool.setuptools.package-data]``) go in the wheel.
"""
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent
ROOMS = ("domain", "projections", "infra")
DATA = ("schedfence.infra.web.templates", "schedfence.infra.web.static")


def packages() -> list[str]:
    found = ["schedfence"]
    for room in ROOMS:
        found += [f"schedfence.{room}"]
        found += [f"schedfence.{room}.{sub}" for sub in find_packages(str(ROOT / room))]
    return sorted(found + list(DATA))


setup(packages=packages())
