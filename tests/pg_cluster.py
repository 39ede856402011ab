"""A private PostgreSQL cluster for one test: its own data directory and port, so the test may
restart or stop it without touching the shared server on 5432.

The server binaries come from the machine's PostgreSQL (``/usr/lib/postgresql/*/bin``, the
newest). ``initdb`` refuses to run as root, so as root the cluster is
made and run as the ``postgres`` user. Outside CI a machine without the binaries skips; in CI
it fails.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from tests.pgtools import free_port


def _bindir() -> Path | None:
    found = [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    return next((p for p in found if (p / "initdb").exists()), None)


class Cluster:
    def __init__(self, bindir: Path, datadir: Path, port: int) -> None:
        self.bindir, self.datadir, self.port = bindir, datadir, port

    def _run(self, *args: str) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def init(self, socket_dir: Path, *conf: str) -> None:
        """``initdb`` (trust auth), then our settings: port, loopback only, no fsync (a
        SIGKILL of the server keeps what it wrote: the kernel has it), ``conf`` lines."""
        self._run("initdb", "-D", str(self.datadir), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8")
        self.configure(socket_dir, "fsync = off", *conf)

    def configure(self, socket_dir: Path, *conf: str) -> None:
        """Append settings to postgresql.conf (a later line wins), with this port."""
        with open(self.datadir / "postgresql.conf", "a") as out:
            out.write("\n" + "\n".join((f"port = {self.port}", "listen_addresses = '127.0.0.1'",
                                        f"unix_socket_directories = '{socket_dir}'", *conf))
                      + "\n")

    def postmaster_pid(self) -> int | None:
        """The running server's pid: the first line of postmaster.pid (None: no file)."""
        try:
            return int((self.datadir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.datadir), "-w", "-l",
                  str(self.datadir / "server.log"), "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.datadir), "-w", "-m", mode, "stop")

    def restart(self) -> None:
        """What ``pg_ctlcluster ... restart`` does: every connection is cut."""
        self.stop()
        self.start()

    def create_database(self, name: str) -> str:
        import psycopg
        with psycopg.connect(self.url(), autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def server_bindir() -> Path:
    """The server binaries; skips without them (fails in CI)."""
    bindir = _bindir()
    if bindir is None:
        message = "no PostgreSQL server binaries (initdb) on this machine"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return bindir


def private_base() -> Path:
    """A new temporary directory the server's user owns (for data directories, sockets)."""
    base = Path(tempfile.mkdtemp(prefix="schedfence-pg-"))
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
    return base


@contextmanager
def private_cluster() -> Iterator[Cluster]:
    bindir = server_bindir()
    base = private_base()
    cluster = Cluster(bindir, base / "data", free_port())
    cluster.init(base)
    cluster.start()
    try:
        yield cluster
    finally:
        try:
            cluster.stop("immediate")
        except subprocess.CalledProcessError:
            pass  # already down
        shutil.rmtree(base, ignore_errors=True)
