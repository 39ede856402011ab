"""The contract suite runs every test against the simulator and a real Temporal server."""
from typing import Any

import pytest

from tests.contract.temporal_env import temporal_env  # noqa: F401  (the session fixture)
from tests.contract.worlds import make_world, new_wid


@pytest.fixture(params=["simulated", "temporal"])
def world(request: pytest.FixtureRequest) -> Any:
    """A ``SimWorld`` or a ``ServerWorld`` (tests.contract.worlds)."""
    return make_world(request)


@pytest.fixture
def wid() -> str:
    return new_wid()
