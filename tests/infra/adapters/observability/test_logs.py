"""Structured logs: one JSON object per line on stderr with the fields where known, a text
form, worker errors as records (not prints), and no password or token anywhere."""
from __future__ import annotations

import json
import logging
import threading

import pytest
from click.testing import CliRunner

from schedfence.infra.cli.commands import cli
from schedfence.infra.adapters.observability import logs
from tests.helpers import NS, SID, start_foreign

SECRETS = ("s3cr3t-pw", "tok-abc.DEF_123", "hunter2", "api-key-value")


@pytest.fixture(autouse=True)
def restore_logging():
    """Every test configures the ``schedfence`` logger; put back the library's default."""
    yield
    logger = logging.getLogger(logs.ROOT)
    for handler in [h for h in logger.handlers if not isinstance(h, logging.NullHandler)]:
        logger.removeHandler(handler)
    logger.setLevel(logging.NOTSET)
    logger.propagate = True


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_a_workers_appends_are_json_records_with_what_they_name(world, capsys) -> None:
    logs.configure("json", "info")
    world.service.create_schedule(NS, SID)
    result = world.service.rollback(NS, SID, "R1")
    world.service.run_until_idle()
    out, err = capsys.readouterr()
    assert out == ""  # stdout stays the commands' own
    found = records(err)
    migration_events = [r for r in found if r.get("migration_id") == result.migration_id]
    stored = world.migration_events()  # the migration's events, in log order
    assert [r["event_type"] for r in migration_events if r["event_type"] in stored] == stored
    # ... and the source's events that name the migration (its fence and its close)
    assert {"FencedForMigration", "ClosedByMigration"} <= {r["event_type"]
                                                           for r in migration_events}
    for r in migration_events:
        assert r["request_id"] == "R1" and r["namespace"] == NS and r["schedule_id"] == SID
        assert r["level"] == "info" and r["worker"] and r["time"].endswith("Z")
        assert r["message"].startswith(f"appended {r['event_type']} v")


def test_below_the_level_nothing_is_logged(world, capsys) -> None:
    logs.configure("json", "warning")
    world.service.create_schedule(NS, SID)
    world.service.rollback(NS, SID)
    world.service.run_until_idle()
    assert capsys.readouterr().err == ""


def test_a_worker_pool_error_is_a_log_record_not_a_print(world, capsys) -> None:
    logs.configure("json", "warning")
    world.service.create_schedule(NS, SID)
    world.service.rollback(NS, SID)
    real, calls = world.service.due.due, []

    def flaky(limit: int = 100):
        calls.append(limit)
        if len(calls) == 1:
            raise RuntimeError("the database went away")
        return real(limit)

    world.service.due.due = flaky
    world.service.run_workers(threading.Event(), until_idle=True)
    out, err = capsys.readouterr()
    [record] = records(err)
    assert record["level"] == "warning" and record["logger"] == "schedfence.worker.pool"
    assert record["message"] == ("worker thread 0: error: internal: RuntimeError: the "
                                 "database went away (retrying)")
    assert record["worker"].startswith("w1#") and record["worker_thread"] == 0
    assert out == ""


def test_text_is_the_message_then_the_fields(capsys) -> None:
    logs.configure("text", "info")
    logs.get_logger("test").info("hello %s", "there", extra={"worker": "w9", "namespace": "n"})
    assert capsys.readouterr().err == "hello there [namespace=n worker=w9]\n"


def test_context_fields_reach_every_record_inside_the_block(capsys) -> None:
    logs.configure("json", "info")
    log = logs.get_logger("test")
    with logs.log_context(request_id="req-1", namespace=None):
        log.info("inside")
    log.info("outside")
    inside, outside = records(capsys.readouterr().err)
    assert inside["request_id"] == "req-1" and "namespace" not in inside
    assert "request_id" not in outside


@pytest.mark.parametrize("fmt", logs.FORMATS)
def test_passwords_and_tokens_never_appear(fmt: str, capsys) -> None:
    logs.configure(fmt, "debug")
    log = logs.get_logger("test")
    log.warning("cannot reach postgresql://fence:s3cr3t-pw@db:5432/fence?schema=x, "
                "sent Authorization: Bearer tok-abc.DEF_123 with password=hunter2, then "
                "bearer tok-abc.DEF_123 alone",
                extra={"password": "hunter2", "api_key": "api-key-value",
                       "store": "postgres://u:s3cr3t-pw@h/db"})
    try:
        raise RuntimeError("connect failed for postgresql://fence:s3cr3t-pw@db/fence")
    except RuntimeError:
        log.exception("store failed")
    err = capsys.readouterr().err
    assert "postgresql://fence:***@db" in err and "password=***" in err
    for secret in SECRETS:
        assert secret not in err, (secret, err)


def test_the_cli_logs_json_on_stderr_and_keeps_stdout_one_json_document(file_store_url):
    runner = CliRunner()
    base = ["--log-format", "json", "--log-level", "info", "--store", file_store_url]
    assert runner.invoke(cli, [*base, "schedule", "create", NS, SID]).exit_code == 0
    assert runner.invoke(cli, [*base, "rollback", NS, SID]).exit_code == 0
    result = runner.invoke(cli, [*base, "worker", "--until-idle", "--json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["migrations"]  # one document, nothing else on stdout
    found = records(result.stderr)
    assert found and {r["event_type"] for r in found} >= {"StartClaimConsumed", "SourceClosed"}


def test_the_cli_never_logs_a_store_password(tmp_path) -> None:
    url = "postgresql://fence:s3cr3t-pw@127.0.0.1:1/nowhere"
    result = CliRunner().invoke(cli, ["--log-format", "json", "--log-level", "debug",
                                      "--store", url, "status", NS, SID])
    assert result.exit_code == 1
    opening = json.loads(result.stderr.splitlines()[0])  # then the one error line
    assert opening["message"] == "opening store postgresql://fence:***@127.0.0.1:1/nowhere"
    assert result.stderr.splitlines()[1].startswith("error: ")
    assert "s3cr3t-pw" not in result.stderr + result.stdout


def test_the_pool_error_line_in_text_starts_as_it_always_did(world, capsys) -> None:
    logs.configure("text", "warning")
    world.service.create_schedule(NS, SID)
    start_foreign(world.dest)
    world.service.rollback(NS, SID)
    world.service.due.due = lambda limit=100: (_ for _ in ()).throw(RuntimeError("gone"))
    world.service.run_workers(threading.Event(), until_idle=True)
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("worker thread 0: error: internal: RuntimeError: gone (retrying) [")


@pytest.mark.parametrize("args", [["--log-format", "xml"], ["--log-level", "loud"]])
def test_a_bad_log_option_is_a_usage_error(args: list[str]) -> None:
    result = CliRunner().invoke(cli, [*args, "list"])
    assert result.exit_code == 2 and "Invalid value" in result.stderr
