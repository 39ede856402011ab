"""Command-line input that used to escape as ``error: internal`` or worse: raw invalid UTF-8 in
argv, non-finite or overflowing numbers and times, store URLs that are misread (a bad port, an
unencoded ``@`` in the password, sqlite ``?`` options, an in-memory store), and a closed pipe.
Each is one ``error: invalid_argument: ...`` line and writes nothing (or, for the pipe, a quiet
exit)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from schedfence.infra.cli.commands import cli
from schedfence.infra.application.service import open_service
from schedfence.infra.adapters.destination.simulator import SimulatedDestination

ROOT = Path(__file__).resolve().parents[3]


def run(store: str, *args: str):
    return CliRunner().invoke(cli, ["--store", store, *args])


def one_error_line(result, code: str = "invalid_argument") -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, (result.stdout, result.stderr)
    assert lines[0].startswith(f"error: {code}: "), lines
    return lines[0]


def events_in(store: str) -> int:
    with open_service(store, SimulatedDestination()) as service:
        return sum(1 for _ in service.app.notifications())


def cli_process(store: str, *args: str | bytes, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("stdout", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store, *args],
                          cwd=ROOT, stderr=subprocess.PIPE, timeout=60, **kw)


@pytest.mark.parametrize("args,field", [
    ([b"schedule", b"create", b"ns", b"b", b"--notes", b"\xff"], b"notes"),
    ([b"--worker-id", b"w\xff", b"schedule", b"create", b"ns", b"b"], b"worker id"),
    ([b"abort", b"ns", b"a", b"--reason", b"\xff", b"--actor", b"ops"], b"reason"),
    ([b"schedule", b"create", b"ns", b"\xffb"], b"schedule id"),
    ([b"status", b"ns", b"\xc3"], b"schedule id"),
])
def test_invalid_utf8_bytes_in_argv_are_refused(file_store_url, args, field):
    assert run(file_store_url, "schedule", "create", "ns", "a").exit_code == 0
    assert run(file_store_url, "rollback", "ns", "a").exit_code == 0
    before = events_in(file_store_url)
    done = cli_process(file_store_url, *args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith(b"error: invalid_argument: ") and field in lines[0], lines
    assert events_in(file_store_url) == before


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "1e300"])
def test_oncall_stuck_after_must_be_finite_and_sane(file_store_url, value):
    assert "stuck-after" in one_error_line(run(file_store_url, "oncall", "--stuck-after", value))


@pytest.mark.parametrize("option,value", [
    ("--since", "99999999999d"), ("--until", "1" + "0" * 400 + "d"),
    ("--since", "9999-12-31T23:59:59-05:00")])
def test_audit_times_out_of_range(file_store_url, option, value):
    run(file_store_url, "schedule", "create", "ns", "a")  # audit reads an existing store
    assert "out of range" in one_error_line(run(file_store_url, "audit", option, value))


@pytest.mark.parametrize("url,secret", [
    ("postgresql://u:s3cr3t@127.0.0.1:abc/x", "s3cr3t"),
    ("postgresql://u:p@ss:w0rd@127.0.0.1:5432/x", "w0rd"),
    ("postgresql://u:p@ssw0rd@127.0.0.1:5432/x", "ssw0rd"),
    ("postgresql://u:s3cr3t@127.0.0.1:99999/x", "s3cr3t"),
])
def test_misread_postgresql_urls_never_echo_the_password(url, secret):
    line = one_error_line(run(url, "list"))
    assert secret not in line and "w0rd" not in line


def test_sqlite_url_options_are_refused_not_made_part_of_the_file_name(tmp_path):
    db = tmp_path / "x.db"
    line = one_error_line(run(f"sqlite:///{db}?mode=ro", "schedule", "create", "ns", "a"))
    assert "'?' options" in line
    assert list(tmp_path.iterdir()) == []


def test_in_memory_store_is_refused_on_the_command_line():
    line = one_error_line(run("sqlite:///:memory:", "schedule", "create", "ns", "a"))
    assert "vanish" in line


def test_a_closed_pipe_exits_quietly(file_store_url):
    for i in range(50):
        assert run(file_store_url, "schedule", "create", "ns", f"s{i}").exit_code == 0
    read, write = os.pipe()
    os.close(read)  # the reader (`| head`) is gone before the command writes
    try:
        done = cli_process(file_store_url, "list", stdout=write)
    finally:
        os.close(write)
    assert done.returncode != 0
    assert done.stderr == b"", done.stderr
