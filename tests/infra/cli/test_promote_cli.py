"""``schedfence promote`` and ``verify --also``: a standby refuses to act until promoted, a
promotion stops replication into it, and the two copies are checked together."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from schedfence.infra.cli.commands import cli
from schedfence.infra.application.service import open_service
from tests.replica_helpers import populate


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_a_standby_acts_only_after_promote(tmp_path: Path) -> None:
    source, standby = f"sqlite:///{tmp_path}/a.db", f"sqlite:///{tmp_path}/b.db"
    dest = "sim+sqlite:///" + str(tmp_path / "dest.db")
    populate(source, 2, complete=False, destination=dest)  # the one both stores share
    assert invoke("replicate", "--from", source, "--to", standby).exit_code == 0
    with open_service(standby, "sim") as svc:
        before = svc.event_count()
    refused = invoke("--store", standby, "--destination", dest, "worker", "--until-idle")
    assert refused.exit_code != 0
    assert "error: failed_precondition:" in refused.stderr and "promote" in refused.stderr
    refused = invoke("--store", standby, "schedule", "create", "ns", "new", "--json")
    assert json.loads(refused.stdout or refused.stderr)["error"]["code"] == \
        "failed_precondition"
    with open_service(standby, "sim") as svc:
        assert svc.event_count() == before  # nothing written on a refusal

    missing = invoke("--store", standby, "promote", "--actor", "ann")
    assert missing.exit_code == 2 and "--reason" in missing.stderr
    done = invoke("--store", standby, "promote", "--actor", "ann", "--reason", "INC-1", "--json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout) == {"epoch": 1, "actor": "ann", "reason": "INC-1"}
    again = invoke("replicate", "--from", source, "--to", standby)  # its log now holds an
    assert again.exit_code != 0 and "failed_precondition" in again.stderr  # uncopied event

    run = invoke("--store", standby, "--destination", dest, "worker", "--until-idle",
                 "--retry-for", "0.5")
    # A start from before the failover may still land: the run waits, then says so.
    assert run.exit_code == 1 and "error: not_drained: 2 migration(s)" in run.stderr
    with open_service(standby, "sim") as svc:
        states = {svc.migration("ns", f"s{i:03d}").park_reason for i in range(2)}
    assert states == {None}
    run = invoke("--store", standby, "--destination", dest, "worker", "--until-idle",
                 "--claim-grace", "0")
    assert run.exit_code == 0, run.stderr
    with open_service(standby, "sim") as svc:
        states = {svc.migration("ns", f"s{i:03d}").park_reason for i in range(2)}
    # Never started on the active, but nothing proves the lost tail did not: an operator.
    assert states == {"failover_unverified"}
    ok = invoke("--store", standby, "verify", "--also", source, "--json")
    assert ok.exit_code == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["ok"] is True


def test_verify_also_refuses_a_store_that_is_not_there(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/a.db"
    populate(store, 1)
    result = invoke("--store", store, "verify", "--also", f"sqlite:///{tmp_path}/nope.db")
    assert result.exit_code != 0 and "invalid_argument" in result.stderr
    assert not (tmp_path / "nope.db").exists()
