"""``schedfence metrics``: the same text as ``render_metrics``, on stdout or written atomically
for node_exporter's textfile collector; no destination needed, no store created."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import stat
from pathlib import Path

from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from schedfence.infra.cli.commands import cli
from tests.helpers import NS, SID

RUN = CliRunner()


def _store_with_a_completed_rollback(url: str) -> None:
    for args in (["schedule", "create", NS, SID], ["rollback", NS, SID],
                 ["worker", "--until-idle"]):
        result = RUN.invoke(cli, ["--store", url, *args])
        assert result.exit_code == 0, result.stderr


def _values(text: str) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if "_lag_" not in s.name}


def test_metrics_prints_what_the_store_holds_without_a_destination(file_store_url, monkeypatch):
    _store_with_a_completed_rollback(file_store_url)
    monkeypatch.delenv("SCHEDFENCE_DESTINATION")
    result = RUN.invoke(cli, ["--store", file_store_url, "metrics"])
    assert result.exit_code == 0, result.stderr
    values = _values(result.stdout)
    assert values[("schedfence_migrations_completed_total", (("direction", "rollback"),))] == 1
    assert values[("schedfence_migrations", (("direction", "rollback"), ("namespace", NS),
                                              ("state", "completed")))] == 1
    again = RUN.invoke(cli, ["metrics", "--store", file_store_url])  # the command's own option
    assert again.exit_code == 0 and _values(again.stdout) == values


def test_output_is_written_atomically_and_readable_by_the_collector(file_store_url,
                                                                    tmp_path: Path) -> None:
    _store_with_a_completed_rollback(file_store_url)
    target = tmp_path / "textfile" / "schedfence.prom"
    target.parent.mkdir()
    target.write_text("old contents\n")
    result = RUN.invoke(cli, ["--store", file_store_url, "metrics", "--output", str(target)])
    assert result.exit_code == 0 and result.stdout == "", result.stderr
    printed = RUN.invoke(cli, ["--store", file_store_url, "metrics"]).stdout
    assert _values(target.read_text()) == _values(printed)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert os.listdir(target.parent) == ["schedfence.prom"]  # no temporary file left


def test_a_missing_output_directory_is_refused_and_nothing_is_written(file_store_url,
                                                                      tmp_path: Path) -> None:
    _store_with_a_completed_rollback(file_store_url)
    target = tmp_path / "nowhere" / "schedfence.prom"
    result = RUN.invoke(cli, ["--store", file_store_url, "metrics", "--output", str(target)])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: invalid_argument: --output: directory ")
    assert not target.parent.exists()


def test_metrics_never_creates_a_store(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    result = RUN.invoke(cli, ["--store", f"sqlite:///{missing}", "metrics"])
    assert result.exit_code == 1 and result.stderr.startswith("error: invalid_argument: ")
    assert not missing.exists()


def test_the_schedulers_start_lag_and_due_backlog_read_from_a_fresh_process(file_store_url):
    sim = ["--store", file_store_url, "--destination", "sim"]
    for sid in ("a", "b"):
        result = RUN.invoke(cli, [*sim, "schedule", "create", NS, sid, "--interval", "1s",
                                  "--workflow-type", "W", "--task-queue", "q",
                                  "--workflow-id", f"{sid}-act"])
        assert result.exit_code == 0, result.stderr
    time.sleep(2.1)  # their first times have come
    assert RUN.invoke(cli, [*sim, "scheduler", "--once"]).exit_code == 0
    done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store",
                           file_store_url, "metrics"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    samples = {s.name: s for f in text_string_to_metric_families(done.stdout)
               for s in f.samples if s.name.startswith("schedfence_action_start_lag")}
    started = samples["schedfence_action_start_lag_seconds_count"].value
    assert started >= 2  # each schedule's times that came due, started once
    assert 0 < samples["schedfence_action_start_lag_seconds_sum"].value < started * 5
    gauges = {s.name: s.value for f in text_string_to_metric_families(done.stdout)
              for s in f.samples}
    assert gauges["schedfence_schedules_due"] >= 0
