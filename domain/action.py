"""Moved to ``schedfence.domain.source.action`` in 0.6.0 (CHANGELOG.md); this path re-exports it for one release.
New code imports from ``schedfence`` itself: ``from schedfence import open_service, make_spec, ...``."""
from __future__ import annotations

from importlib import import_module
from typing import Any

_MOVED = import_module("schedfence.domain.source.action")


def __getattr__(name: str) -> Any:
    return getattr(_MOVED, name)
