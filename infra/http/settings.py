"""The HTTP API's defaults, importable without the web framework (the CLI reads them for its
``serve`` options and imports the app only when it serves)."""
from __future__ import annotations

MAX_BODY = 64 * 1024  # bytes of a request body (larger: 413)
RATE = 20.0  # requests a second per token, in bursts of twice that (over it: 429)
TOKENS_ENV = "SCHEDFENCE_TOKENS_FILE"
# The base URL of Temporal's Web UI (e.g. http://localhost:8233): the operator page links a
# handed-over schedule and its workflows into it. Unset: no such links.
TEMPORAL_UI_ENV = "SCHEDFENCE_TEMPORAL_UI"
