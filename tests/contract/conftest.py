"""The contract suite runs every test against the simulator and a real Temporal server."""
from tests.contract.temporal_env import temporal_env  # noqa: F401  (the session fixture)
