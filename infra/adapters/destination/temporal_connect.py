"""Connecting to a Temporal server, for the adapter and the destination worker alike.

TLS comes from the destination URL (``?tls=1&ca=F&cert=F&key=F&server_name=N``, see choose.py)
and an API key from the environment only. A failed connect is ``DestinationNotReached`` with a
one-line message: the target, plain text or TLS, a hint for the usual TLS mistakes, and the
SDK's own words. File *paths* may appear in messages; file contents and the API key never do.
"""
from __future__ import annotations

from datetime import timedelta
from typing import Any

from schedfence.domain.ports import DestinationNotReached

# Markers in the SDK's (rustls/tonic) connect errors → what the operator most likely has to fix.
# Measured against a TLS proxy in front of a dev server (tests/e2e/test_temporal_tls_e2e.py).
_CLIENT_CERT = "does it require a client certificate (cert=, key=), or refuse the one given?"
_HINTS = (
    ("UnknownIssuer", "the server's certificate is not signed by the CA given (ca=)"),
    ("NotValidForName", "the server's certificate does not name this host (server_name=)"),
    ("close_notify", f"the server closed the TLS session: {_CLIENT_CERT}"),
    ("ConnectionReset", f"the server reset the connection: {_CLIENT_CERT}"),
    ("InvalidContentType", "is this port plain text? (drop tls=1)"),
    ("CorruptMessage", "is this port plain text? (drop tls=1)"),
)
# A broken pipe, or a connection closed (or never ready) under a pending request: the server
# dropped the stream. Over TLS, after its handshake (measured: a missing client certificate
# gives any of these, close_notify or a reset, depending on timing); over plain text, on
# reading what is not TLS.
_DROPPED = ("BrokenPipe", 'Canceled, "connection closed"', 'Canceled, "connection was not ready"')
_BROKEN_PIPE = {True: f"the server dropped the TLS stream: {_CLIENT_CERT}",
                False: "does this port want TLS? (add ?tls=1)"}


def connect_error(target: str, exc: BaseException, *, tls: bool,
                  api_key: str | None = None) -> str:
    """One line saying why ``target`` could not be connected to; an API key that the SDK
    echoed (it does not today) is blanked out."""
    text = " ".join(str(exc).split())
    if api_key:
        text = text.replace(api_key, "[api key]")
    hint = next((h for marker, h in _HINTS if marker in text), None)
    if hint is None and any(marker in text for marker in _DROPPED):
        hint = _BROKEN_PIPE[tls]
    mode = "TLS" if tls else "plain text"
    return f"cannot connect to {target} ({mode}){': ' + hint if hint else ''}: {text}"


async def connect_client(target: str, namespace: str, *, tls: Any = False,
                         api_key: str | None = None, identity: str | None = None,
                         connect_timeout: float | None = None) -> Any:
    """A connected ``temporalio.client.Client``; ``DestinationNotReached`` when no connection
    could be made (so no request of ours left this process)."""
    from temporalio.client import Client
    try:
        return await Client.connect(
            target, namespace=namespace, identity=identity, tls=tls, api_key=api_key,
            connect_timeout=None if connect_timeout is None else timedelta(
                seconds=connect_timeout))
    except RuntimeError as exc:  # the SDK's bridge reports connect failures this way
        raise DestinationNotReached(
            connect_error(target, exc, tls=tls is not False, api_key=api_key)) from None


async def registered_namespaces(client: Any) -> list[str]:
    """Every namespace the server lists as registered, the server's own (temporal-system)
    left out, in the server's order."""
    from temporalio.api.enums.v1 import NamespaceState
    from temporalio.api.workflowservice.v1 import ListNamespacesRequest
    names: list[str] = []
    token = b""
    while True:
        resp = await client.workflow_service.list_namespaces(
            ListNamespacesRequest(page_size=100, next_page_token=token))
        for ns in resp.namespaces:
            info = ns.namespace_info
            if info.state == NamespaceState.NAMESPACE_STATE_REGISTERED and \
                    info.name != "temporal-system":
                names.append(info.name)
        token = resp.next_page_token
        if not token:
            return names
