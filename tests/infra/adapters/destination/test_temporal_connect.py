"""The one line a failed Temporal connect becomes: the hint follows the SDK's error text, and
a broken pipe means a refused client certificate over TLS, a TLS port over plain text (the
TLS e2e test met all five of a missing certificate's texts: close_notify, a reset, a broken
pipe, and a connection closed or not yet ready under the pending request, depending on
timing)."""
from __future__ import annotations

import pytest

from schedfence.infra.adapters.destination.temporal_connect import connect_error

PIPE = 'Failed client connect: hyper::Error(Io, Custom { kind: BrokenPipe, error: "closed" })'
# Seen in a CI run with no client certificate, as its log showed it (pytest shortened the
# middle of the SDK's text).
CLOSED = ('Failed client connect: `get_...eration was canceled", source: Some(tonic::transport'
          '::Error(Transport, hyper::Error(Canceled, "connection closed"))) }')
# Seen in a loaded CI run (at a1af8a3), the same way: the stream dropped before it was ready.
NOT_READY = ('Failed client connect: `get_... was canceled", source: Some(tonic::transport::'
             'Error(Transport, hyper::Error(Canceled, "connection was not ready"))) }')


@pytest.mark.parametrize("text", [PIPE, CLOSED, NOT_READY, "received fatal alert: close_notify",
                                  "Connection reset by peer (ConnectionReset)"])
def test_a_dropped_tls_stream_names_the_client_certificate(text: str) -> None:
    line = connect_error("127.0.0.1:7233", RuntimeError(text), tls=True)
    assert line.startswith("cannot connect to 127.0.0.1:7233 (TLS): ")
    assert "client certificate" in line and line.endswith(text)


@pytest.mark.parametrize("text", [PIPE, CLOSED, NOT_READY])
def test_a_dropped_stream_over_plain_text_asks_for_tls(text: str) -> None:
    line = connect_error("127.0.0.1:7233", RuntimeError(text), tls=False)
    assert "(plain text): does this port want TLS? (add ?tls=1)" in line


def test_an_api_key_echoed_in_the_error_is_blanked() -> None:
    line = connect_error("h:1", RuntimeError("bad key sekrit-123"), tls=True,
                         api_key="sekrit-123")
    assert "sekrit-123" not in line and "[api key]" in line
