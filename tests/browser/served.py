"""``schedfence serve`` as operators run it: a process on a free loopback port, over a store
file, with a tokens file; ready once ``/healthz`` answers."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

READY_SECONDS = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


@contextmanager
def schedfence_serve(store: str, tokens: list[tuple[str, str, str]], workdir: Path,
                     *serve_options: str) -> Iterator[str]:
    """Serve ``store`` until the block ends; yields the base URL. ``tokens``: (name, role,
    secret) lines of the tokens file; ``serve_options``: more options of ``serve``."""
    tokens_file = workdir / "tokens.txt"
    tokens_file.write_text("".join(f"{n} {r} {s}\n" for n, r, s in tokens))
    tokens_file.chmod(0o600)
    base = f"http://127.0.0.1:{free_port()}"
    log_path = workdir / "serve.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "schedfence.infra.cli", "--store", store,
             "--destination", "sim", "serve", "--listen", base.removeprefix("http://"),
             "--tokens", str(tokens_file), *serve_options], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_SECONDS
        while not _ready(base):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"schedfence serve did not come up on {base}:\n"
                                   f"{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
