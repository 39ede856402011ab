"""``schedfence owners`` on the simulator, from fresh processes: one key of each kind, its
exit code and JSON; the recorded audit read back by ``oncall`` (each drift with the command
that resolves it), the gauge and ``GET /v1/owners``; each resolution run as printed leaves
the next audit clean and the checker clean; errors are one line."""
from __future__ import annotations

import json
import shlex

from schedfence.infra.application.service import open_service
from tests.infra.cli.cli_runs import store, subprocess_cli  # noqa: F401
from tests.infra.cli.owners_world import KINDS, NS, make_world


def owners(store: str, *args: str):
    return subprocess_cli(store, "--destination", "sim", "owners", "--namespace", NS, *args)


def rows_of(doc: dict) -> dict[str, dict]:
    return {r["schedule_id"]: r for r in doc["rows"]}


def test_each_kind_is_found_and_the_audit_fails_on_drift(store: str) -> None:
    make_world(store)
    done = owners(store, "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    rows = rows_of(doc)
    assert {sid: r["kind"] for sid, r in rows.items()} == KINDS
    assert {sid: r["owner"] for sid, r in rows.items()} == {
        "handed": "temporal", "gone": "none", "both": "source", "closed": "temporal",
        "paused": "temporal", "plain": "source", "native": "temporal"}
    assert rows["handed"]["migration_id"] and rows["gone"]["migration_id"]
    assert rows["handed"]["next_run"] and rows["native"]["next_run"]
    assert rows["plain"]["next_run"] is None
    assert doc["counts"]["kind"]["two_owners"] == 1 and doc["failing"] == 4
    # one listing; a describe only for each row whose listing claimed drift
    assert doc["calls"] == {"list": 1, "describe": 4}
    text = owners(store)
    assert text.returncode == 1 and "missing_at_destination" in text.stdout
    assert "handed" not in text.stdout.split("calls:")[0].split("\n", 1)[1]  # drift only


def test_the_last_audit_is_read_by_oncall_the_gauge_and_reads(store: str) -> None:
    make_world(store)
    assert owners(store).returncode == 1
    done = subprocess_cli(store, "oncall", "--json")  # no destination: from the log alone
    assert done.returncode == 0, done.stderr
    drift = {d["schedule_id"]: d for d in json.loads(done.stdout)["ownership"]}
    assert set(drift) == {"gone", "both", "closed", "paused"}
    assert drift["both"]["resolve"] == [
        "temporal schedule delete --namespace ns --schedule-id both"]
    assert drift["closed"]["resolve"][1] == "schedfence forward ns closed"
    assert drift["paused"]["resolve"] == [
        "temporal schedule delete --namespace ns --schedule-id paused"]
    assert drift["gone"]["resolve"] == [
        "schedfence schedule create ns gone --interval 60 --workflow-type Report "
        "--task-queue q --workflow-id act-gone --input '{\"key\":\"gone\"}'"]
    text = subprocess_cli(store, "oncall").stdout
    assert "ns/gone (missing_at_destination" in text and "resolve: temporal schedule" in text
    metrics = subprocess_cli(store, "metrics").stdout
    for kind, n in (("missing_at_destination", 1), ("two_owners", 1),
                    ("unexplained_at_destination", 2), ("changed_at_destination", 0)):
        assert f'schedfence_ownership_drift{{kind="{kind}"}} {n}.0' in metrics


def run_as_printed(store: str, command: str) -> None:
    """A resolution: ``schedfence`` commands through the CLI; ``temporal schedule delete``,
    which has no server here, through the simulator's own delete."""
    words = shlex.split(command)
    if words[0] == "temporal":
        with open_service(store, "sim") as svc:
            svc.destination.delete_schedule(words[words.index("--namespace") + 1],
                                            words[words.index("--schedule-id") + 1])
        return
    done = subprocess_cli(store, "--destination", "sim", *words[1:])
    assert done.returncode == 0, (command, done.stdout, done.stderr)


def test_each_resolution_leaves_the_next_audit_and_the_checker_clean(store: str) -> None:
    make_world(store)
    assert owners(store).returncode == 1
    drift = json.loads(subprocess_cli(store, "oncall", "--json").stdout)["ownership"]
    for item in drift:  # the last one printed for "closed": the forward takes it in
        run_as_printed(store, item["resolve"][-1])
    done = owners(store, "--json")
    assert done.returncode == 0, done.stdout
    rows = rows_of(json.loads(done.stdout))
    assert {r["kind"] for r in rows.values()} == {"none", "native"}
    assert rows["gone"]["owner"] == "source" and rows["closed"]["owner"] == "source"
    assert json.loads(subprocess_cli(store, "oncall", "--json").stdout)["ownership"] == []
    verified = subprocess_cli(store, "verify", "--json")
    assert verified.returncode == 0, verified.stdout


def test_recreating_a_hand_deleted_handover_is_allowed_and_shown(store: str) -> None:
    make_world(store)
    assert owners(store).returncode == 1
    created = subprocess_cli(store, "--destination", "sim", "schedule", "create", NS, "gone",
                             "--paused", "--notes", "by hand")
    assert created.returncode == 0, created.stderr
    rows = rows_of(json.loads(owners(store, "--json").stdout))
    assert (rows["gone"]["owner"], rows["gone"]["store"], rows["gone"]["kind"]) == \
        ("source", "source", "none")


def test_deep_describes_every_schedule_and_finds_changes(store: str) -> None:
    make_world(store)
    with open_service(store, "sim") as svc:  # someone edits the handed-over schedule
        sim = svc.destination
        with sim._state.session() as tx:
            runs = tx.runs(NS, "temporal-sys-scheduler:handed")
            runs[-1]["input"]["handover"]["spec"]["intervals"][0]["every"] = 120
            runs[0]["input"]["handover"]["spec"]["intervals"][0]["every"] = 120
    done = owners(store, "--deep", "--json")
    doc = json.loads(done.stdout)
    assert rows_of(doc)["handed"]["kind"] == "changed_at_destination"
    assert doc["calls"]["describe"] == 6  # every listed schedule, and the missing one
    assert done.returncode == 1  # for the other drift; the change alone does not fail
    once = doc["exactly_once"]  # the same listing verify --against-destination judges
    assert once["schedules"] == 6 and once["ok"] is True, once  # seconds old: none due yet


def test_errors_are_one_line_and_record_nothing(store: str) -> None:
    make_world(store)
    with open_service(store, "sim") as svc:
        before = svc.event_count()
    for args in (("--concurrency", "0"), ("--namespace", "")):
        done = owners(store, *args)
        assert done.returncode != 0 and "Traceback" not in done.stderr
    for destination in ("temporal://127.0.0.1:1/ns", "sim+sqlite:///:memory:"):
        done = subprocess_cli(store, "--destination", destination, "owners", "--namespace",
                              NS, "--json")  # Temporal unreachable; a destination refused
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert json.loads(done.stdout)["error"]["code"] in ("unavailable", "invalid_argument")
    line = subprocess_cli(store, "--destination", "temporal://127.0.0.1:1/ns", "owners",
                          "--namespace", NS)
    assert line.stderr.startswith("error: unavailable: ") and line.stderr.count("\n") == 1
    with open_service(store, "sim") as svc:
        assert svc.event_count() == before


def test_a_describe_timed_out_is_asked_again_and_a_lasting_outage_records_nothing(
        tmp_path) -> None:
    from schedfence.domain.errors import Unavailable
    from schedfence.infra.application.owners import AuditOptions, run_audit
    store = f"sqlite:///{tmp_path / 's.db'}"
    make_world(store)
    with open_service(store, "sim") as svc:
        svc.destination.inject("describe", "unavailable", times=3)  # then it answers
        state = run_audit(svc, NS, AuditOptions(concurrency=1))
        assert state.counts["kind"]["missing_at_destination"] == 1
        before = svc.event_count()
        svc.destination.inject("describe", "unavailable", times=4)
        try:
            run_audit(svc, NS, AuditOptions(concurrency=1))
            raise AssertionError("an audit through a lasting outage must fail")
        except Unavailable as exc:
            assert "ownership audit of ns" in exc.message
        assert svc.event_count() == before
