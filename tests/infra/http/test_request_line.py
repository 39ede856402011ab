"""An oversize request line against a real ``schedfence serve``: uvicorn's parser (h11)
answers it before the app, in its own plain-text shape (docs/operators.md, "The HTTP API");
nothing is written, and the server answers the next request as before."""
from __future__ import annotations

import socket
from pathlib import Path

import httpx

from tests.infra.http.api import bearer
from tests.infra.http.test_serve_process import server  # noqa: F401 (the fixture)


def _raw(url: str, head: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        try:
            conn.sendall(head)
        except OSError:  # the server may close before it has read it all
            pass
        answer = b""
        try:
            while chunk := conn.recv(65536):
                answer += chunk
        except OSError:
            pass
    return answer


def test_an_oversize_request_line_is_refused_before_the_app(
        server: tuple[str, Path]) -> None:  # noqa: F811
    url, _ = server
    created = httpx.post(f"{url}/v1/schedule/create", headers=bearer("admin"),
                         json={"namespace": "ns", "schedule_id": "s"})
    assert created.status_code == 200, created.text
    line = b"POST /v1/schedule/delete?x=" + b"a" * (1 << 20) + b" HTTP/1.1\r\n"
    answer = _raw(url, line + b"Host: x\r\nContent-Type: application/json\r\n"
                              b"Content-Length: 39\r\n\r\n"
                              b'{"namespace":"ns","schedule_id":"s"}   ')
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 400 Bad Request", answer[:300]
    assert b"content-type: text/plain" in rest.lower() and \
        rest.endswith(b"Invalid HTTP request received."), answer[:300]
    listed = httpx.get(f"{url}/v1/schedules", headers=bearer("reader"))
    assert listed.status_code == 200
    assert [(s["schedule_id"], s["closed"]) for s in listed.json()["schedules"]] == \
        [("s", False)]
