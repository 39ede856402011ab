"""A destination that answers every call 6 s late (issue 45, item 7): a dev server behind
tests/delay_proxy.py, and ``migrate --to workflow`` at the job's concurrency with the deadline
set on the URL (``?rpc_timeout=15s``). Every rollback completes with no call past its deadline
and no claim-grace wait: no ``no answer within`` and no ``start not sent`` line in the job's
log, one claim per migration and no re-arm in the log. Before, the deadline was a fixed 5 s:
each start ran it out (an unknown outcome) and its migration waited out the claim grace.

``SCHEDFENCE_SLOW_COUNT`` (default 4, for CI) sets how many schedules the job moves; the
figures are printed (run with ``-s``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.contract.temporal_env import NS, TemporalEnv, temporal_env  # noqa: F401
from tests.delay_proxy import DelayProxy

REPO = Path(__file__).resolve().parents[2]
DELAY = 6.0
COUNT = int(os.environ.get("SCHEDFENCE_SLOW_COUNT", "4"))


def cli(store: str, url: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, SCHEDFENCE_STORE=store, SCHEDFENCE_DESTINATION=url,
               SCHEDFENCE_LOG_LEVEL="info")
    return subprocess.run([sys.executable, "-m", "schedfence.infra.cli", *args], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


def audit_count(store: str, url: str, event_type: str) -> int:
    done = cli(store, url, "audit", "--type", event_type, "--limit", "1000", "--json")
    assert done.returncode == 0, done.stderr[-500:]
    return len(json.loads(done.stdout)["entries"])


@pytest.fixture
def proxy(temporal_env: TemporalEnv):  # noqa: F811
    server = temporal_env.server
    proxy = DelayProxy((server.host, server.port), DELAY)
    yield proxy
    proxy.stop()


def test_rollbacks_through_a_slow_server_finish_without_a_timeout(
        temporal_env: TemporalEnv, proxy: DelayProxy, tmp_path: Path) -> None:  # noqa: F811
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    direct = f"temporal://{temporal_env.server.target}/{NS}"
    slow = f"temporal://{proxy.target}/{NS}?rpc_timeout=15s"
    tag = uuid.uuid4().hex[:8]
    for n in range(COUNT):
        made = cli(store, direct, "schedule", "create", NS, f"slow-{tag}-{n}", "--paused")
        assert made.returncode == 0, made.stderr[-500:]
    started = time.monotonic()
    done = cli(store, slow, "migrate", "--namespace", NS, "--to", "workflow", "--job-id",
               f"slow-{tag}", "--concurrency", "4", "--json", timeout=3600)
    took = time.monotonic() - started
    assert done.returncode == 0, (done.stdout[-800:], done.stderr[-1500:])
    timeouts = done.stderr.count("no answer within")
    grace_waits = done.stderr.count("start not sent")
    claims = audit_count(store, direct, "StartClaimConsumed")
    rearms = audit_count(store, direct, "StartClaimRearmed")
    completed = audit_count(store, direct, "SourceClosed")
    print(f"\n{COUNT} rollbacks through a {DELAY:g} s proxy: {took:.0f} s "
          f"({COUNT / took:.2f}/s); timeouts {timeouts}, claim-grace waits {grace_waits}, "
          f"claims {claims}, re-arms {rearms}, completed {completed}")
    assert (timeouts, grace_waits, rearms) == (0, 0, 0), done.stderr[-1500:]
    assert claims == COUNT and completed == COUNT
