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


@contextmanager
def private_cluster() -> Iterator[Cluster]:
    bindir = _bindir()
    if bindir is None:
        message = "no PostgreSQL server binaries (initdb) on this machine"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    base = Path(tempfile.mkdtemp(prefix="schedfence-pg-"))
    datadir = base / "data"
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
    cluster = Cluster(bindir, datadir, free_port())
    cluster._run("initdb", "-D", str(datadir), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    with open(datadir / "postgresql.conf", "a") as conf:
        conf.write(f"\nport = {cluster.port}\nlisten_addresses = '127.0.0.1'\n"
                   f"unix_socket_directories = '{base}'\nfsync = off\n")
    cluster.start()
    try:
        yield cluster
    finally:
        try:
            cluster.stop("immediate")
        except subprocess.CalledProcessError:
            pass  # already down
        shutil.rmtree(base, ignore_errors=True)
