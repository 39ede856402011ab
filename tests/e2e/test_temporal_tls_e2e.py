"""``temporal://...?tls=1&ca=&cert=&key=`` against a real dev server behind a TLS proxy that
requires a client certificate (tests/tls_proxy.py; ``temporal server start-dev`` has no TLS).

Every command runs as an operator runs it: the CLI in a subprocess, the destination from
SCHEDFENCE_DESTINATION and an API key in SCHEDFENCE_TEMPORAL_API_KEY (the dev server ignores
it, so only its absence from every output is checked). A TLS setup the server refuses is a
one-line ``unavailable`` error for an admin call and a back-off for the worker: the migration
stays pending with its claim re-armed, never parked, and completes once the setup is fixed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from schedfence.domain.ids import WORKFLOW_ID_PREFIX
from schedfence.infra.adapters.destination.temporal_connect import connect_error
from tests.contract.temporal_env import (NS, TemporalEnv, start_destination_worker,  # noqa: F401
                                         stop_process, temporal_env)
from tests.e2e.test_destination_worker_namespaces_e2e import sentinel_finishes
from tests.temporal_server import free_port
from tests.tls_proxy import Pki, TlsProxy, make_pki

REPO = Path(__file__).resolve().parents[2]
API_KEY = "sf-test-api-key-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A second CA and client certificate, which the proxy does not trust."""
    return make_pki(tmp_path_factory.mktemp("other-pki"), "another CA")


@pytest.fixture
def proxy(temporal_env: TemporalEnv, pki: Pki) -> TlsProxy:
    server = temporal_env.server
    proxy = TlsProxy((server.host, server.port), pki, mutual=True)
    yield proxy
    proxy.stop()


def tls_url(proxy: TlsProxy, ca: Path, client: Pki | None) -> str:
    url = f"temporal://{proxy.target}/{NS}?tls=1&ca={ca}"
    return url + (f"&cert={client.client_cert}&key={client.client_key}" if client else "")


class Cli:
    """The CLI on one store; every output kept, to look for secrets in all of them."""

    def __init__(self, store: str) -> None:
        self.store, self.outputs = store, []

    def run(self, url: str, *args: str) -> subprocess.CompletedProcess:
        env = dict(os.environ, SCHEDFENCE_STORE=self.store, SCHEDFENCE_DESTINATION=url,
                   SCHEDFENCE_TEMPORAL_API_KEY=API_KEY, SCHEDFENCE_LOG_LEVEL="info")
        done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", *args], env=env,
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        self.outputs += [done.stdout, done.stderr]
        return done

    def ok(self, url: str, *args: str) -> dict:
        done = self.run(url, *args, "--json")
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return json.loads(done.stdout)

    def error(self, url: str, *args: str) -> dict:
        """A refused command: exit 1 and one line of JSON, its error."""
        done = self.run(url, *args, "--json")
        assert done.returncode == 1 and done.stdout.count("\n") == 1, (args, done.stdout,
                                                                        done.stderr)
        return json.loads(done.stdout)["error"]

    def assert_no_secret(self, *pkis: Pki) -> None:
        secrets = [API_KEY] + [line for p in pkis for f in (p.client_key, p.server_key)
                               for line in f.read_text().splitlines() if "-----" not in line]
        for output in self.outputs:
            assert "PRIVATE KEY" not in output
            for secret in secrets:
                assert secret not in output


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(f"sqlite:///{tmp_path / 'fence.db'}")


@pytest.fixture
def sid() -> str:
    return f"tls-{uuid.uuid4().hex[:10]}"


def test_a_rollback_over_mutual_tls_completes(temporal_env: TemporalEnv, proxy: TlsProxy,
                                              pki: Pki, cli: Cli, sid: str) -> None:
    url = tls_url(proxy, pki.ca, pki)
    cli.ok(url, "schedule", "create", NS, sid, "--paused")
    accepted = cli.ok(url, "rollback", NS, sid)
    assert accepted["destination"] == f"temporal://{proxy.target}/{NS} (TLS)"  # no paths
    assert cli.ok(url, "worker", "--until-idle")["drained"] is True
    migration = cli.ok(url, "status", NS, sid)["migration"]
    assert migration["state"] == "completed"
    cli.ok(url, "history", NS, sid)
    assert proxy.accepted >= 2  # the admin's and the worker's connections went through it
    # The Temporal Schedule is on the server (asked over the plain port, not through us): its
    # scheduler workflow is the run the migration's receipt names.
    temporal_env.ops.describe_schedule(sid)
    scheduler = temporal_env.ops.describe(f"{WORKFLOW_ID_PREFIX}{sid}")
    assert scheduler.run_id == migration["destination_first_run_id"]
    cli.assert_no_secret(pki)


@pytest.mark.parametrize("setup", ["no client certificate", "a CA that did not sign"])
def test_a_refused_tls_setup_is_one_line_and_parks_nothing(
        temporal_env: TemporalEnv, proxy: TlsProxy, pki: Pki, other_pki: Pki, cli: Cli,
        sid: str, setup: str) -> None:
    good = tls_url(proxy, pki.ca, pki)
    bad = (tls_url(proxy, pki.ca, None) if setup == "no client certificate"
           else tls_url(proxy, other_pki.ca, pki))
    hint = ("client certificate" if setup == "no client certificate"
            else "not signed by the CA given")
    for schedule in (sid, sid + "-b"):
        cli.ok(good, "schedule", "create", NS, schedule, "--paused")
    cli.ok(good, "rollback", NS, sid)
    # An admin call: refused at once, one line, nothing written.
    error = cli.error(bad, "rollback", NS, sid + "-b")
    assert error["code"] == "unavailable" and hint in error["message"], error
    assert cli.ok(good, "status", NS, sid + "-b")["migration"] is None
    # The worker backs off: pending, claim re-armed, never parked.
    blocked = cli.run(bad, "worker", "--until-idle", "--retry-for", "1", "--json")
    assert blocked.returncode == 1 and json.loads(blocked.stdout)["drained"] is False
    migration = cli.ok(good, "status", NS, sid)["migration"]
    assert migration["state"] == "pending" and migration["park_reason"] is None, migration
    assert migration["claim_armed"] is True
    cli.ok(good, "history", NS, sid)  # the answers recorded: the connect errors, no secret
    assert cli.ok(good, "worker", "--until-idle")["drained"] is True
    assert cli.ok(good, "status", NS, sid)["migration"]["state"] == "completed"
    cli.assert_no_secret(pki, other_pki)


def test_the_destination_worker_over_tls(temporal_env: TemporalEnv, proxy: TlsProxy, pki: Pki,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDFENCE_TEMPORAL_API_KEY", API_KEY)
    queue = f"tls-queue-{uuid.uuid4().hex[:8]}"
    proc, started = start_destination_worker(tls_url(proxy, pki.ca, pki), "--task-queue", queue)
    try:
        assert started["tls"] is True and started["namespaces"] == [NS]
        assert API_KEY not in json.dumps(started)
        assert sentinel_finishes(temporal_env, NS, queue, 10.0)
    finally:
        assert stop_process(proc) == 0
    refused = subprocess.run(
        [sys.executable, "-m", "schedfence.infra.cli", "--destination",
         tls_url(proxy, pki.ca, None), "destination-worker", "--connect-wait", "0"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.startswith("error: unavailable: cannot connect to ")
    assert refused.stderr.count("\n") == 1 and API_KEY not in refused.stderr


def test_a_connect_error_is_one_line_and_never_holds_the_api_key() -> None:
    exc = RuntimeError("Failed client connect:\n  bearer sekrit-1\n "
                       "InvalidCertificate(UnknownIssuer)")
    text = connect_error("h:1", exc, tls=True, api_key="sekrit-1")
    assert "\n" not in text and "sekrit-1" not in text and "[api key]" in text
    assert text.startswith("cannot connect to h:1 (TLS): the server's certificate is not signed")


def test_an_api_key_is_never_sent_in_plain_text_unless_the_url_says_so(tmp_path: Path) -> None:
    target = f"127.0.0.1:{free_port()}"
    down = f"temporal://{target}/{NS}"
    cli = Cli(f"sqlite:///{tmp_path / 'fence.db'}")
    error = cli.error(down, "rollback", NS, "s")
    assert error["code"] == "invalid_argument" and "?tls=1" in error["message"], error
    assert not (tmp_path / "fence.db").exists()  # refused before the store was opened
    worker = cli.run(down, "destination-worker", "--connect-wait", "0")
    assert worker.returncode == 1 and worker.stderr.count("\n") == 1
    assert worker.stderr.startswith("error: invalid_argument: SCHEDFENCE_TEMPORAL_API_KEY is set")
    # tls=0 says plain text on purpose: past the check, to a server that is not there.
    plain = cli.run(down + "?tls=0", "destination-worker", "--connect-wait", "0")
    assert plain.returncode == 1
    assert plain.stderr.startswith(f"error: unavailable: cannot connect to {target} "
                                   "(plain text)"), plain.stderr
    cli.assert_no_secret()
