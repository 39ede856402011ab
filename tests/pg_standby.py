"""A PostgreSQL primary and its hot standby, both private to one test: streaming replication.

The primary is a new cluster (``wal_level = replica``, WAL senders; initdb's pg_hba.conf already
trusts replication connections on loopback). The standby is ``pg_basebackup -R`` of it, in its
own data directory on its own port, streaming under ``application_name = standby1``.

- ``synchronous=True``: the primary's ``synchronous_standby_names`` names the standby and
  ``synchronous_commit`` is ``on`` (the default), so a commit returns only once the standby has
  flushed its WAL: nothing acknowledged is lost with the primary.
- ``synchronous=False``: the standby streams asynchronously; what the primary committed and
  had not yet sent is lost with it.

``kill_primary`` SIGKILLs the primary's postmaster (the pid on the first line of its
``postmaster.pid``); ``promote`` promotes the standby (``pg_ctl promote``). Both clusters are
stopped and their directories removed when the block ends, whatever happened.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import psycopg

from tests.pg_cluster import Cluster, private_base, server_bindir
from tests.pgtools import free_port

STANDBY_NAME = "standby1"


def _children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (the server's backends and helpers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


class StandbyPair:
    def __init__(self, base: Path, synchronous: bool) -> None:
        bindir = server_bindir()
        self.base, self.synchronous = base, synchronous
        self.primary = Cluster(bindir, base / "primary", free_port())
        self.standby = Cluster(bindir, base / "standby", free_port())
        self.paused: int | None = None  # a WAL sender stopped by pause_sending

    def create(self) -> None:
        names = f"'{STANDBY_NAME}'" if self.synchronous else "''"
        self.primary.init(self.base, "wal_level = replica", "max_wal_senders = 4",
                          "wal_sender_timeout = 5s", f"synchronous_standby_names = {names}")
        self.primary.start()
        self.primary._run("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port),
                          "-U", "postgres", "-D", str(self.standby.datadir), "-R",
                          "-X", "stream", "--checkpoint=fast")
        (self.standby.datadir / "postmaster.pid").unlink(missing_ok=True)
        # A promoted standby must not wait for a synchronous standby of its own.
        self.standby.configure(self.base, "synchronous_standby_names = ''")
        with open(self.standby.datadir / "postgresql.auto.conf", "a") as out:
            out.write(f"primary_conninfo = 'host=127.0.0.1 port={self.primary.port} "
                      f"user=postgres application_name={STANDBY_NAME}'\n")
        self.standby.start()
        self.wait_streaming()

    def wait_streaming(self, timeout: float = 30) -> None:
        """Until the primary sees the standby streaming (as its synchronous standby, if so)."""
        want = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + timeout
        while True:
            with psycopg.connect(self.primary.url(), autocommit=True) as conn:
                row = conn.execute("SELECT state, sync_state FROM pg_stat_replication WHERE "
                                   "application_name = %s", (STANDBY_NAME,)).fetchone()
            if row == ("streaming", want):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the standby is not streaming ({want}): {row}")
            time.sleep(0.05)

    def wait_replayed(self, timeout: float = 30) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            lsn = conn.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.standby.url(), autocommit=True) as conn:
            while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
                                   (lsn,)).fetchone()[0]:
                if time.monotonic() > deadline:
                    raise AssertionError(f"the standby did not replay up to {lsn}")
                time.sleep(0.02)

    def pause_sending(self) -> None:
        """SIGSTOP the primary's WAL sender: the standby falls behind from now on, as over a
        slow link (in synchronous mode, commits wait for it)."""
        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            row = conn.execute("SELECT pid FROM pg_stat_replication WHERE application_name "
                               "= %s", (STANDBY_NAME,)).fetchone()
        assert row is not None, "no WAL sender for the standby"
        self.paused = int(row[0])
        os.kill(self.paused, signal.SIGSTOP)

    def kill_primary(self) -> None:
        """SIGKILL the primary's postmaster, as a crash would; then wait for its backends,
        which notice their postmaster is gone and exit (any left after 10 s are killed too).
        A paused WAL sender dies with it, sending nothing more."""
        pid = self.primary.postmaster_pid()
        assert pid is not None, "the primary is not running"
        children = _children(pid)
        if self.paused is not None:
            os.kill(self.paused, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(map(alive, [pid, *children])) and time.monotonic() < deadline:
            time.sleep(0.02)
        for child in filter(alive, children):
            os.kill(child, signal.SIGKILL)

    def promote(self) -> None:
        """``pg_ctl promote -w``: returns once the standby accepts writes."""
        self.standby._run("pg_ctl", "-D", str(self.standby.datadir), "-w", "promote")

    def restart_dead_primary(self) -> None:
        """Start the killed primary's data directory again, alone (crash recovery replays its
        own WAL), to read what it had committed. Its synchronous standby is gone: it is
        started without one, and no one writes to it."""
        (self.primary.datadir / "postmaster.pid").unlink(missing_ok=True)
        (self.base / f".s.PGSQL.{self.primary.port}.lock").unlink(missing_ok=True)
        self.primary.configure(self.base, "synchronous_standby_names = ''")
        self.primary.start()

    def close(self) -> None:
        for cluster in (self.standby, self.primary):
            try:
                cluster.stop("immediate")
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                pass  # not running
            pid = cluster.postmaster_pid()
            if pid is not None and alive(pid):
                for child in _children(pid):
                    os.kill(child, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)


@contextmanager
def standby_pair(synchronous: bool) -> Iterator[StandbyPair]:
    """A streaming primary and hot standby for the block, stopped and removed at its end."""
    pair = StandbyPair(private_base(), synchronous)
    try:
        pair.create()
        yield pair
    finally:
        try:
            pair.close()
        finally:
            shutil.rmtree(pair.base, ignore_errors=True)
