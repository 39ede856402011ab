"""The scheduler tests' world: a service on a store with the simulator as the action runner."""
from __future__ import annotations

import pytest

from schedfence.infra.adapters.destination.simulator import SimulatedDestination
from schedfence.infra.application.service import open_service


@pytest.fixture
def world(store_url: str):
    dest = SimulatedDestination()
    with open_service(store_url, dest) as svc:
        yield svc, dest
