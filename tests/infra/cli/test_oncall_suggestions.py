"""Every command ``schedfence oncall`` suggests is complete: run as printed (parsed with shlex),
on a copy of a scripted store holding every kind of on-call item, click accepts it.

Accepted means exit 0, or the CLI's documented refusal (exit 1, one ``error:
failed_precondition:`` line, nothing written). Exit 2 (a usage error: a missing required
flag, a bad choice) or ``invalid_argument`` means the suggestion was incomplete.
"""
from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path
from uuid import UUID

import pytest
from click.testing import CliRunner

from schedfence.domain.rollback import decide as d
from schedfence.domain.rollback.aggregate import Migration
from schedfence.domain.rollback.phases import PARK_MEANING
from schedfence.domain.ports import DestinationUnavailable, InvalidStartRequest
from schedfence.infra.cli.commands import cli
from schedfence.infra.demo.legacy import plant_legacy_v1
from schedfence.infra.application.service import MigrationService, open_service

from tests.helpers import NS, start_foreign

W = "w1"
# Parks written straight after a start whose answer proves nothing (what reconcile or a
# failover check parks on); the domain decides foreign_destination and start_rejected below.
UNPROVEN_PARKS = ("head_missing", "no_first_run_identity", "failover_unverified")


def _claimed(service: MigrationService, sid: str, answer: str = "unavailable") -> Migration:
    """A migration that consumed its claim, issued its start and heard ``answer``."""
    service.create_schedule(NS, sid)
    service.rollback(NS, sid, request_id=f"req-{sid}", actor="alice")
    m = service.app.repository.get(UUID(service.migration(NS, sid).migration_id))
    m.record(d.claim_facts(m.state, 1, W))
    error = InvalidStartRequest("bad policy") if answer == "rejected" else \
        DestinationUnavailable("timed out")
    facts, _ = d.decide_start_outcome(m.state, d.outcome_of_start(error), 1, W)
    m.record(facts)
    return m


def _script(service: MigrationService) -> None:
    for reason in UNPROVEN_PARKS:
        m = _claimed(service, reason)
        m.record([(Migration.MigrationParked, {"request_id": f"req-{reason}", "attempt": 1,
                                               "worker": W, "reason": reason})])
        service.app.save(m)
    service.app.save(_claimed(service, "start_rejected", answer="rejected"))
    m = _claimed(service, "deleted_unsettled")  # received, then its settle found it deleted
    m.record([(Migration.OwnershipAccepted, {"request_id": "req-deleted_unsettled",
                                             "destination_first_run_id": "run-1",
                                             "evidence": "start_created"}),
              (Migration.MigrationParked, {"request_id": "req-deleted_unsettled",
                                           "attempt": 2, "worker": W,
                                           "reason": "deleted_unsettled"})])
    service.app.save(m)
    service.create_schedule(NS, "foreign_destination")
    start_foreign(service.destination, "foreign_destination")
    service.rollback(NS, "foreign_destination", request_id="req-foreign", actor="alice")
    service.run_until_idle()  # parks foreign_destination
    for sid in ("legacy", "adopted"):
        service.create_schedule(NS, sid)
        plant_legacy_v1(service, NS, sid)
    service.recover("adopt", NS, "adopted", actor="dave", reason="t-7", request_id="req-adopt")
    service.create_schedule(NS, "stuck")
    service.rollback(NS, "stuck", request_id="req-stuck", actor="carol")  # no worker runs


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("oncall") / "scripted.db"
    with open_service(f"sqlite:///{path}", "sim", claim_grace=0, retry_for=0) as service:
        _script(service)
    return path


def run(path: Path, *args: str):
    return CliRunner().invoke(cli, ["--store", f"sqlite:///{path}", *args])


def oncall_items(path: Path) -> dict[str, dict]:
    result = run(path, "oncall", "--stuck-after", "0", "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return {i["migration"]["schedule_id"]: i for i in json.loads(result.stdout)["items"]}


def suggested(line: str) -> list[str]:
    """The command a line suggests (at its end, after ": "), without ``schedfence``."""
    assert line.count("schedfence ") <= 1, line
    if "schedfence " not in line:
        assert "recover " not in line and "--" not in line, f"a command in prose: {line}"
        return []
    prose, command = line.split("schedfence ", 1)
    assert prose.endswith(": ") and "recover " not in prose, line
    return shlex.split(command)


def test_the_scripted_store_has_every_kind_of_oncall_item(scripted: Path) -> None:
    items = oncall_items(scripted)
    parked = {i["migration"]["park_reason"] for i in items.values() if i["category"] == "parked"}
    assert parked == set(PARK_MEANING)  # every park reason the domain has
    assert items["legacy"]["category"] == "legacy" and items["stuck"]["category"] == "stuck"


def test_every_suggested_command_is_accepted(scripted: Path, tmp_path: Path) -> None:
    items = oncall_items(scripted)
    ran = 0
    for sid, item in items.items():
        commands = [c for line in item["actions"] for c in [suggested(line)] if c]
        assert commands or item["category"] == "stuck", f"{sid}: no command suggested"
        for args in commands:
            copy = tmp_path / f"{sid}-{ran}.db"
            shutil.copy(scripted, copy)
            result = run(copy, *args)
            assert result.exit_code != 2, f"{sid}: usage error for {args}: {result.stderr}"
            assert result.exit_code == 0 or result.stderr.startswith(
                "error: failed_precondition: "), f"{sid}: {args}: {result.stderr}"
            ran += 1
    assert ran >= 12


def test_the_advice_carries_the_flags_each_action_requires(scripted: Path,
                                                           tmp_path: Path) -> None:
    items = oncall_items(scripted)
    lines = {sid: [" ".join(suggested(a)) for a in i["actions"]] for sid, i in items.items()}
    [rearm] = [c for c in lines["adopted"] if c.startswith("recover rearm")]
    assert rearm.endswith("--confirm-no-destination-run"), rearm
    assert [c.split()[1] for c in lines["legacy"] if c] == ["adopt"]
    # start_rejected: one course (fix, then re-arm), abort only as the alternative to give up.
    situation = items["start_rejected"]["actions"][0]
    assert "then re-arm" in situation and "roll back again" not in situation
    # The adopted one's re-arm, run as suggested, is accepted, not refused for the flag.
    copy = tmp_path / "adopted.db"
    shutil.copy(scripted, copy)
    [rearm] = [suggested(a) for a in items["adopted"]["actions"] if "recover rearm" in a]
    result = run(copy, *rearm)
    assert result.exit_code == 0, result.stderr
    assert "confirm (--confirm-no-destination-run)" not in result.stderr


def test_a_start_rejected_migration_re_arms_as_suggested_and_completes(
        scripted: Path, tmp_path: Path) -> None:
    copy = tmp_path / "rejected.db"
    shutil.copy(scripted, copy)
    [rearm] = [suggested(a) for a in oncall_items(copy)["start_rejected"]["actions"]
               if "recover rearm" in a]
    assert run(copy, *rearm).exit_code == 0
    with open_service(f"sqlite:///{copy}", "sim", claim_grace=0, retry_for=0) as service:
        service.run_until_idle()
        assert service.migration(NS, "start_rejected").state == "completed"
