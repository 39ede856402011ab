"""What the benchmark scripts share: timing, the machine they ran on, throwaway stores.

Not a timed test and not a library: each script prints its own figures.
"""
from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def timed_ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = fn()
    return (time.perf_counter() - t0) * 1000, result


def median(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float]) -> str:
    """``median (min–max, n runs)`` as one cell."""
    return f"{median(values):.2f} ({min(values):.2f}–{max(values):.2f}, {len(values)} runs)"


def machine() -> str:
    """CPU count and model, Python, PostgreSQL server (if reachable): the RESULTS.md header."""
    model = platform.processor() or "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        model = next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                      if ln.startswith("Model name")), model)
    except (OSError, subprocess.SubprocessError):
        pass
    return (f"{os.cpu_count()} cores, {model}; Python {platform.python_version()}; "
            f"PostgreSQL {pg_server_version() or 'unreachable'}")


def pg_server_version(url: str = DEFAULT_PG) -> str | None:
    try:
        with _admin(url) as conn:
            return str(conn.execute("SHOW server_version").fetchone()[0])
    except Exception:  # noqa: BLE001 - any failure means "no PostgreSQL here"
        return None


def _admin(url: str) -> Any:
    import psycopg

    from schedfence.infra.adapters.store.pg import parse_pg_url
    t = parse_pg_url(url)
    return psycopg.connect(host=t.host, port=t.port, user=t.user, password=t.password or None,
                           dbname=t.dbname, autocommit=True, connect_timeout=5)


@contextmanager
def sqlite_store() -> Iterator[str]:
    """A store URL on a new SQLite file, removed afterwards."""
    directory = tempfile.mkdtemp(prefix="schedfence-bench-")
    try:
        yield f"sqlite:///{os.path.join(directory, 'bench.db')}"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def pg_store(url: str = DEFAULT_PG) -> Iterator[str]:
    """A store URL on a new schema of ``url``'s database, dropped afterwards."""
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in url else "?"
    try:
        yield f"{url}{sep}schema={schema}"
    finally:
        with _admin(url) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextmanager
def env_var(name: str, value: str | None) -> Iterator[None]:
    """Set (or unset) one environment variable for the block."""
    old = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
