"""A TLS-terminating TCP proxy on loopback, for tests of ``?tls=1`` against a real dev server.

``temporal server start-dev`` has no TLS flags, so a test puts this in front of the dev server's
plain gRPC port: it accepts TLS (ALPN ``h2``, which gRPC needs), optionally requires a client
certificate signed by the test CA (mutual TLS), and copies bytes both ways to the upstream.

``make_pki`` writes a throwaway CA, a server certificate for 127.0.0.1/localhost and a client
certificate with the ``openssl`` command (the ``cryptography`` package is not a dependency).
The proxy runs an asyncio loop on a daemon thread and is stopped with ``stop()``.
"""
from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise RuntimeError("no 'openssl' command on PATH (the TLS tests make certificates "
                           "with it)")
    subprocess.run([binary, *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _signed(directory: Path, name: str, subject: str, ext: str) -> None:
    """``name``.key (PKCS#8, EC P-256) and ``name``.pem signed by ca.pem with ``ext``."""
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", f"{name}.key", cwd=directory)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr",
             cwd=directory)
    (directory / f"{name}.ext").write_text(ext)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-sha256", "-extfile", f"{name}.ext",
             "-out", f"{name}.pem", cwd=directory)


def make_pki(directory: Path, ca_name: str = "schedfence test CA") -> Pki:
    """A CA, a server certificate (127.0.0.1, localhost) and a client certificate in
    ``directory`` (made if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-out", "ca.key", cwd=directory)
    _openssl("req", "-x509", "-new", "-key", "ca.key", "-subj", f"/CN={ca_name}", "-days", "2",
             "-sha256", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-out", "ca.pem", cwd=directory)
    leaf = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
    _signed(directory, "server", "/CN=localhost",
            leaf + "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _signed(directory, "client", "/CN=schedfence-client", leaf + "extendedKeyUsage=clientAuth\n")
    return Pki(directory / "ca.pem", directory / "server.pem", directory / "server.key",
               directory / "client.pem", directory / "client.key")


class TlsProxy:
    """Accept TLS on 127.0.0.1:``port`` and forward the plain bytes to ``upstream``."""

    def __init__(self, upstream: tuple[str, int], pki: Pki, *, mutual: bool = True) -> None:
        self.upstream = upstream
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.server_cert, pki.server_key)
        context.set_alpn_protocols(["h2"])
        if mutual:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(pki.ca)
        self._context = context
        self.accepted = 0
        self._loop = asyncio.new_event_loop()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port: int = self._sock.getsockname()[1]
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tls-proxy", daemon=True)
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the TLS proxy did not start")

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def main() -> None:
            self._server = await asyncio.start_server(self._serve, sock=self._sock,
                                                      ssl=self._context,
                                                      ssl_handshake_timeout=5)
            self._started.set()
        self._loop.run_until_complete(main())
        self._loop.set_exception_handler(self._quiet)
        self._loop.run_forever()

    def _quiet(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        """A refused handshake (no client certificate, an unknown CA) is what the tests cause:
        no traceback for it."""
        if isinstance(context.get("exception"), (ssl.SSLError, ConnectionError, OSError)):
            return
        loop.default_exception_handler(context)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    def stop(self) -> None:
        async def close() -> None:
            self._server.close()
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    finally:
        try:
            writer.close()
        except (ConnectionError, ssl.SSLError, OSError, RuntimeError):
            pass
