"""Long commands (worker --until-idle, replicate, verify) draw a progress bar with rate and ETA
on stderr, and only when stderr is a terminal: piped or --json output never carries it."""
from __future__ import annotations

import json
import re
import os
import pty
import subprocess
import sys

from schedfence.infra.application.service import open_service
from schedfence.infra.cli.output import rate_and_eta
from schedfence.infra.engines.drain import drain, reporting

from tests.infra.cli.cli_runs import ROOT, run, store  # noqa: F401 (store: a fixture)


def _fill(store: str, n: int = 3) -> None:  # noqa: F811 (the fixture's value)
    with open_service(store, "sim") as service:
        for i in range(n):
            service.create_schedule("ns", f"s{i}")
            service.rollback("ns", f"s{i}", request_id=f"req-{i}", actor="admin")


def _on_a_terminal(store: str, *args: str, columns: int = 160) -> tuple[str, str]:  # noqa: F811
    """Run the CLI with stderr on a pseudo-terminal; its stdout (a pipe) and what the
    terminal showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                             *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=slave,
                            env=dict(os.environ, COLUMNS=str(columns)))
    os.close(slave)
    shown = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown.append(chunk)
    stdout = proc.stdout.read().decode()
    assert proc.wait(timeout=60) == 0, stdout
    os.close(master)
    return stdout, b"".join(shown).decode(errors="replace")


def test_nothing_on_stderr_when_it_is_not_a_terminal(store: str, tmp_path) -> None:  # noqa
    _fill(store)
    for args in (["worker", "--until-idle", "--json"], ["verify", "--json"],
                 ["replicate", "--from", store, "--to", f"sqlite:///{tmp_path / 'b.db'}",
                  "--json"]):
        result = run(store, *args)
        assert result.exit_code == 0, result.stderr
        assert result.stderr == "", args
        for line in ([result.stdout] if args[0] != "replicate" else
                     result.stdout.splitlines()):
            json.loads(line)  # valid JSON, nothing mixed in


def test_a_terminal_sees_rate_and_eta_and_stdout_stays_json(store: str, tmp_path) -> None:  # noqa
    _fill(store)
    # --max-attempts: every migration goes through the drain (no batch pass before it)
    stdout, shown = _on_a_terminal(store, "worker", "--until-idle", "--max-attempts", "1000",
                                   "--json")
    assert json.loads(stdout)["migrations"] == {"completed": 3}
    assert "draining" in shown and "migrations/s" in shown and "ETA" in shown
    assert "3/3" in shown  # every migration settled when the bar ends
    stdout, shown = _on_a_terminal(store, "replicate", "--from", store, "--to",
                                   f"sqlite:///{tmp_path / 'standby.db'}", "--json")
    copied = json.loads(stdout)["copied"]
    assert "copying" in shown and "events/s" in shown and f"{copied}/{copied}" in shown
    stdout, shown = _on_a_terminal(store, "projection", "rebuild", "--json")
    applied = json.loads(stdout)["applied"]
    assert "rebuilding the projection" in shown and "events/s" in shown
    assert f"{applied}/{applied}" in shown
    stdout, shown = _on_a_terminal(store, "verify")
    assert stdout.startswith("invariants: OK") and "checking invariants" in shown
    events = stdout.split("(")[1].split()[0]
    assert "events/s" in shown and "ETA" in shown and f"{events}/" in shown
    assert "checking invariants" not in stdout


def test_drain_reports_settled_migrations_per_pass() -> None:
    open_now = [["a", "b", "c"], ["b", "c"], ["c"], []]
    seen: list[tuple[int, int]] = []

    def attempt(_mid: str) -> str:
        return "progress"

    with reporting(lambda settled, total: seen.append((settled, total))):
        report = drain(attempt, lambda: open_now.pop(0) if open_now else [])
    assert seen == [(0, 3), (1, 3), (2, 3), (3, 3), (3, 3)]
    assert report.drained
    explicit: list[tuple[int, int]] = []
    drain(lambda _m: "progress", lambda: [], progress=lambda s, t: explicit.append((s, t)))
    assert explicit == [(0, 0), (0, 0)]


def test_verify_reports_the_events_it_has_checked(store: str, monkeypatch) -> None:  # noqa
    _fill(store)
    monkeypatch.setattr("schedfence.infra.application.log_reads.PROGRESS_EVERY", 1)
    seen: list[int] = []
    with open_service(store, "sim") as service:
        assert service.verify(progress=seen.append) == []
        assert seen == list(range(1, service.event_count() + 1))


def test_migrate_on_a_terminal_counts_driven_and_completed(store: str) -> None:  # noqa: F811
    """``migrate`` draws the same bar: schedules settled of the selection with the rate and a
    labelled ETA, and the counts of migrations driven and completed; a finished job reads
    ``done``."""
    with open_service(store, "sim") as service:
        for i in range(4):
            service.create_schedule("ns", f"m{i}")
    stdout, shown = _on_a_terminal(store, "--destination", "sim", "migrate", "--namespace",
                                   "ns", "--to", "workflow", "--job-id", "jt", "--json")
    doc = json.loads(stdout)
    assert doc["phase"] == "done" and doc["counts"]["completed"] == 4
    assert "migrating" in shown and "settled/s" in shown and "ETA" in shown
    assert "4/4" in shown and "driven 4, completed 4" in shown


def test_the_rate_and_eta_move_from_the_first_update() -> None:
    """Over the run so far, not a window of samples: a job whose pages settle tens of seconds
    apart still shows a rate and an ETA from its first settled schedule."""
    assert rate_and_eta(0, 100, 5.0, "settled") == ("- settled/s", "-:--:--")
    assert rate_and_eta(10, 100, 2.0, "settled") == ("5 settled/s", "0:00:18")
    assert rate_and_eta(100, 10_000, 70.0, "settled") == ("1.4 settled/s", "1:55:30")
    assert rate_and_eta(5_000, 10_000, 2.0, "settled") == ("2,500 settled/s", "0:00:02")
    assert rate_and_eta(3, None, 1.0, "events") == ("3 events/s", "-:--:--")


def test_migrate_on_an_80_column_terminal_shows_every_count(store: str) -> None:  # noqa: F811
    with open_service(store, "sim") as service:
        for i in range(4):
            service.create_schedule("ns", f"m{i}")
    _, shown = _on_a_terminal(store, "--destination", "sim", "migrate", "--namespace", "ns",
                              "--to", "workflow", "--job-id", "jt", "--json", columns=80)
    last = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown).replace("\r", "\n").split("\n")
    line = [ln for ln in last if "4/4" in ln][-1]  # the bar when the job ended, on one line
    assert line.rstrip().endswith("settled/s ETA 0:00:00 driven 4, completed 4"), line
    assert len(line.rstrip()) <= 80
