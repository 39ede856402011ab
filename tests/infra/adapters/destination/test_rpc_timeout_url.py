"""Each call's deadline set on the destination URL (issue 45, item 7): ``?rpc_timeout=15s``
reaches the adapter; a bad value is one ``invalid_argument``; the claim grace of an engine on
it covers the deadline (a start is sent within half the grace and answered within the other
half: infra/engines/attempt.py)."""
from __future__ import annotations

import socket
import time

import pytest

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ports import DestinationUnavailable
from schedfence.infra.adapters.destination.choose import parse_temporal
from schedfence.infra.adapters.store.eventstore import parse_store_url
from schedfence.infra.adapters.destination.choose import open_destination
from schedfence.infra.adapters.destination.temporal import DEFAULT_RPC_TIMEOUT
from schedfence.infra.engines.attempt import (CLAIM_GRACE_SECONDS, DEFAULT_DEADLINE,
                                              covering_grace)


@pytest.mark.parametrize("query, seconds", [("", None), ("?rpc_timeout=15s", 15.0),
                                            ("?rpc_timeout=1500ms", 1.5),
                                            ("?rpc_timeout=2min", 120.0),
                                            ("?rpc_timeout=7.5", 7.5),
                                            ("?tls=1&rpc_timeout=15s", 15.0)])
def test_rpc_timeout_is_read_from_the_url(query: str, seconds: float | None) -> None:
    spec = parse_temporal(f"temporal://h:7233/payments{query}")
    assert spec.rpc_timeout == seconds and spec.namespaces == ("payments",)
    assert bool(spec.tls) == ("tls=1" in query)


@pytest.mark.parametrize("value", ["0", "0.1s", "11min", "fast", "-1s", "1e3", "15s&rpc_timeout=2s"])
def test_a_bad_rpc_timeout_is_one_invalid_argument(value: str) -> None:
    with pytest.raises(InvalidArgument, match="rpc_timeout"):
        parse_temporal(f"temporal://h:7233/default?rpc_timeout={value}")


def test_the_adapter_waits_the_url_s_deadline() -> None:
    with socket.socket() as silent:  # accepts TCP connections, never speaks gRPC
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"temporal://127.0.0.1:{silent.getsockname()[1]}/default?rpc_timeout=700ms"
        opened = open_destination(url, parse_store_url("sqlite://"))
        try:
            assert opened.destination.rpc_timeout == 0.7
            started = time.monotonic()
            with pytest.raises(DestinationUnavailable, match="0.7s"):
                opened.destination.describe("default", "w")
            assert time.monotonic() - started >= 0.7
        finally:
            opened.close()
        default = open_destination(url.split("?")[0], parse_store_url("sqlite://"))
        assert default.destination.rpc_timeout == DEFAULT_RPC_TIMEOUT
        default.close()


class _Deadline:
    def __init__(self, rpc_timeout: float) -> None:
        self.rpc_timeout = rpc_timeout


def test_the_claim_grace_covers_the_deadline() -> None:
    assert covering_grace(CLAIM_GRACE_SECONDS, _Deadline(DEFAULT_RPC_TIMEOUT)) == \
        CLAIM_GRACE_SECONDS  # the defaults already do
    assert covering_grace(CLAIM_GRACE_SECONDS, _Deadline(15.0)) == 32.0
    assert covering_grace(60.0, _Deadline(15.0)) == 60.0
    assert covering_grace(0.0, _Deadline(15.0)) == 0.0  # tests' "no grace" stays
    assert covering_grace(CLAIM_GRACE_SECONDS, object()) == CLAIM_GRACE_SECONDS  # the sim
    # a short grace with the default deadline is left as given (tests' short graces)
    assert covering_grace(2.0, _Deadline(DEFAULT_RPC_TIMEOUT)) == 2.0
    assert DEFAULT_DEADLINE == DEFAULT_RPC_TIMEOUT
