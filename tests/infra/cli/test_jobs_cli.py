"""``schedfence migrate`` and ``schedfence job status|cancel|list`` on a store with the
simulator kept in it: runs, resumes, dry runs, the error contract, nothing written on a
refusal."""
from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from schedfence.domain.job import job_request_id
from schedfence.infra.cli import output as out
from schedfence.infra.cli.commands import cli
from schedfence.infra.cli.jobs import _Bar
from schedfence.infra.application.jobs import RunOptions, run_job
from schedfence.infra.application.service import MigrationService, open_service
from tests.infra.cli.cli_runs import subprocess_cli

NS = "batch"
MIGRATE = ["migrate", "--namespace", NS, "--to", "workflow", "--job-id", "j1", "--match", "s*"]


@pytest.fixture
def store(file_store_url: str) -> str:
    with open_service(file_store_url, "sim") as svc:
        for i in range(5):
            svc.create_schedule(NS, f"s{i}")
        svc.create_schedule(NS, "other")
    return file_store_url


def invoke(store: str, *args: str):
    return CliRunner().invoke(cli, ["--store", store, *args])


def ok(store: str, *args: str) -> dict:
    result = invoke(store, *args, "--json")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def events(store: str) -> int:
    with open_service(store, "sim") as svc:
        return svc.event_count()


def refused(store: str, code: str, *args: str) -> str:
    before = events(store)
    result = invoke(store, *args)
    assert result.exit_code == 1, result.stdout
    assert result.stderr.startswith(f"error: {code}: "), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert events(store) == before, "a refused command wrote events"
    return result.stderr


def test_migrate_runs_the_job_and_its_report_equals_the_store(store):
    doc = ok(store, *MIGRATE)
    assert doc["counts"]["completed"] == 5 and doc["phase"] == "done"
    assert doc["destination"].startswith("sim")
    with open_service(store, "sim") as svc:
        assert svc.stats()["by_state"]["completed"] == 5
        assert svc.migration(NS, "s3").request_id == job_request_id("j1", "workflow", "s3")
        assert not svc.schedule(NS, "other").closed
    text = invoke(store, *MIGRATE)  # the same command again: resumes, asks nothing
    assert text.exit_code == 0, text.stderr
    assert "completed 5, parked 0" in text.stdout and "this run: 0 request(s)" in text.stdout
    assert text.stderr == ""  # no progress bar off a terminal


def test_the_text_report_names_the_unfinished_by_reason(store):
    with open_service(store, "sim") as svc:
        svc.rollback(NS, "s1", "someone-else")
        svc.update_schedule(NS, "s2", delete=True)
    text = invoke(store, *MIGRATE, "--blocked-rounds", "0")  # the first answers, kept
    assert text.exit_code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert "completed 3, parked 0, aborted 0, in progress 0, blocked 1, skipped 1" in lines
    assert "  blocked migration_pending: s1" in lines and "  skipped closed: s2" in lines


def test_the_same_job_asks_its_blocked_schedules_again_and_fresh_processes_read_it(store):
    """``--blocked-rounds``/``--blocked-wait``: a rerun of the job asks its blocked schedule
    again (a round, ``job.BlockedAsked``); then ``job status`` and ``job list``, each in a
    process of its own, read the round, and ``audit`` and ``verify``, in processes that never
    import the job's code, decode it through the topic registry (domain/topics.py)."""
    with open_service(store, "sim") as svc:
        svc.rollback(NS, "s1", "someone-else")  # pending: the job's request is blocked
    first = ok(store, *MIGRATE, "--blocked-rounds", "0")  # drives someone-else's to its end
    assert first["counts"]["blocked"] == 1 and first["blocked_rounds"] == 0
    text = invoke(store, *MIGRATE, "--blocked-rounds", "2", "--blocked-wait", "0")
    assert text.exit_code == 0, text.stderr
    # Asked again, s1 is closed now (the other rollback moved it): skipped, not blocked.
    assert "blocked ones asked again in 1 round(s)" in text.stdout
    assert "1 round(s) asked blocked schedules again, 0 unblocked" in text.stdout
    assert "  skipped closed: s1" in text.stdout
    status = cli_json(store, "job", "status", "--job-id", "j1")
    assert (status["blocked_rounds"], status["counts"]["blocked"]) == (1, 0)
    assert status["reasons"]["skipped"] == {"closed": 1}
    assert [(r["job_id"], r["blocked_rounds"]) for r in cli_json(store, "job", "list")] == \
        [("j1", 1)]
    assert cli_json(store, "verify")["ok"] is True
    [entry] = cli_json(store, "audit", "--type", "schedfence.job.BlockedAsked")["entries"]
    assert (entry["type"], entry["topic"]) == ("BlockedAsked", "schedfence.job.BlockedAsked")
    usage = invoke(store, *MIGRATE, "--blocked-wait", "301")
    assert usage.exit_code == 2 and "--blocked-wait" in usage.stderr
    helped = invoke(store, "migrate", "--help").stdout
    assert "--blocked-rounds" in helped and "--blocked-wait SECONDS" in helped


def cli_json(store: str, *args: str) -> Any:
    """One command in a process of its own (a fresh interpreter): its JSON answer."""
    done = subprocess_cli(store, *args, "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_status_list_and_cancel(store):
    ok(store, *MIGRATE, "--no-wait")
    status = ok(store, "job", "status", "--job-id", "j1")
    assert status["counts"]["in_progress"] == 5
    rows = ok(store, "job", "list")
    assert [(r["job_id"], r["phase"], r["counts"]["requested"]) for r in rows] == \
        [("j1", "selected", 5)]
    listing = invoke(store, "job", "list")
    assert listing.stdout.splitlines()[0].split()[:4] == ["JOB", "TO", "NAMESPACE", "PHASE"]
    refused(store, "failed_precondition", "job", "cancel", "--job-id", "j1", "--actor", "bob")
    with open_service(store, "sim") as svc:
        svc.run_until_idle(retry_for=0)  # its migrations finish
    assert [r["phase"] for r in ok(store, "job", "list")] == ["done"]  # as its report says
    assert ok(store, "job", "status", "--job-id", "j1")["phase"] == "done"
    refused(store, "not_found", "job", "status", "--job-id", "nope")
    refused(store, "not_found", "job", "cancel", "--job-id", "nope", "--actor", "bob")


def test_cancel_a_job_cut_mid_selection_and_the_rerun_requests_nothing_more(store):
    def crash(point: str) -> None:
        if point == "job_page.before_append":
            raise RuntimeError("killed")

    with open_service(store, "sim", crash_hook=crash) as svc, pytest.raises(RuntimeError):
        run_job(svc, "j1", NS, "workflow", match="s*", options=RunOptions(page_size=2))
    doc = ok(store, "job", "cancel", "--job-id", "j1", "--actor", "bob", "--reason", "oops")
    assert (doc["phase"], doc["decided"], doc["cancel_reason"]) == ("cancelled", 0, "oops")
    again = ok(store, *MIGRATE)
    # The two requests the cut page made finish and are the job's; nothing more is asked.
    assert again["this_run"]["asked"] == 0 and again["phase"] == "cancelled"
    assert (again["requested"], again["counts"]["completed"]) == (2, 2)
    with open_service(store, "sim") as svc:
        assert {k: v for k, v in svc.stats()["by_state"].items() if v} == {"completed": 2}


def test_a_dry_run_writes_nothing_and_says_what_it_would_do(store):
    with open_service(store, "sim") as svc:
        svc.rollback(NS, "s1", "someone-else")
    before = events(store)
    doc = ok(store, *MIGRATE, "--dry-run")
    assert doc["would"] == {"requested": 4, "skipped": 0, "blocked": 1}
    assert doc["dry_run"] is True and len(doc["decisions"]) == 5
    text = invoke(store, *MIGRATE, "--dry-run")
    assert "nothing written" in text.stdout and "blocked migration_pending: s1" in text.stdout
    assert events(store) == before


def test_refusals_follow_the_error_contract_and_write_nothing(store, monkeypatch):
    ok(store, *MIGRATE, "--no-wait")
    assert "another definition" in refused(
        store, "already_exists", "migrate", "--namespace", NS, "--to", "workflow",
        "--job-id", "j1")
    refused(store, "invalid_argument", *MIGRATE[:-4], "--job-id", "j2", "--rate", "fast")
    refused(store, "invalid_argument", *MIGRATE[:-4], "--job-id", "bad\tid")
    monkeypatch.setattr(MigrationService, "forward", None, raising=False)
    assert "not available in this build" in refused(
        store, "invalid_argument", "migrate", "--namespace", NS, "--to", "source",
        "--job-id", "f1")
    as_json = invoke(store, "migrate", "--namespace", NS, "--to", "source", "--job-id", "f1",
                     "--json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.stdout)["error"]["code"] == "invalid_argument"


def test_a_usage_error_exits_2(store):
    result = invoke(store, "migrate", "--namespace", NS, "--to", "sideways", "--job-id", "j")
    assert result.exit_code == 2


def test_the_progress_line_shows_counts_and_rate(capsys, monkeypatch):
    """The CLI's one progress style (rich, infra/cli/output.py) on a terminal's stderr."""
    monkeypatch.setattr(out, "stderr_is_terminal", lambda: True)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich draws on the captured stderr as on a terminal
    monkeypatch.setenv("COLUMNS", "200")
    counts = {"requested": 3, "skipped": 1, "blocked": 0}

    def at(settled: int, total: int | None, driven: int, completed: int) -> dict:
        return {"decided": 4, "total": total, "counts": counts, "requested": 3,
                "driven": driven, "completed": completed, "settled": settled, "rate": 2.5}

    with _Bar(enabled=True) as bar:
        bar.update(at(2, None, 1, 1))
    err = capsys.readouterr().err
    assert "migrating" in err and "2/?" in err
    assert "driven 1, completed 1; skip 1" in err  # blocked 0: not shown (80 columns)
    with _Bar(enabled=True) as bar:  # a known total: settled of total, the rate and the ETA
        bar.update(at(4, 9, 3, 2))
        bar.update(at(9, 9, 8, 8))
    err = capsys.readouterr().err
    assert "9/9" in err and "settled/s" in err and "ETA" in err
    with _Bar(enabled=False) as off:
        off.update(at(4, 9, 3, 2))
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(out, "stderr_is_terminal", lambda: False)
    with _Bar(enabled=True) as piped:  # not a terminal: nothing drawn
        piped.update(at(4, 9, 3, 2))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("wait", [True, False])
def test_progress_counts_driven_and_completed_migrations(store, wait):
    """What the bar is fed: schedules settled of the selection reaches the total once every
    requested migration was driven to an end (without waiting: once every one is decided)."""
    with open_service(store, "sim") as svc:
        svc.create_schedule(NS, "s-fenced")
        svc.rollback(NS, "s-fenced", "R-other")  # the job's request for it is blocked
        seen: list[dict] = []
        doc = run_job(svc, "jp", NS, "workflow", match="s*", on_progress=seen.append,
                      options=RunOptions(wait=wait, page_size=2, blocked_wait=0.0))
    last = seen[-1]
    assert last["total"] == 6 and last["decided"] == 6 and last["requested"] == 5
    assert (last["driven"], last["completed"]) == ((5, 5) if wait else (0, 0))
    assert last["settled"] == 6  # 5 driven and 1 blocked, or 6 decided
    assert [p["settled"] for p in seen] == sorted(p["settled"] for p in seen)
    assert doc["phase"] == ("done" if wait else "selected")


def test_job_reads_never_create_a_store_and_migrate_needs_a_destination(tmp_path, store,
                                                                        monkeypatch):
    missing = f"sqlite:///{tmp_path / 'missing.db'}"
    result = invoke(missing, "job", "list")
    assert result.exit_code == 1 and result.stderr.startswith("error: invalid_argument: ")
    assert not (tmp_path / "missing.db").exists()
    monkeypatch.delenv("SCHEDFENCE_DESTINATION", raising=False)
    assert "no destination chosen" in refused(store, "invalid_argument", *MIGRATE)
