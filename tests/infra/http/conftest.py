"""The HTTP API's fixtures: ``api``, the API over a fresh SQLite file store."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.infra.http.api import Api, api_on


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with api_on(f"sqlite:///{tmp_path / 'api.db'}") as opened:
        yield opened
