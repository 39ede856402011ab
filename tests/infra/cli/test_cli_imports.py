"""The CLI imports what a command needs when that command runs: importing the package, or running
``status``, never loads Temporal's SDK, the HTTP stack or another command's module. Checked on
``sys.modules`` of a fresh interpreter (what a ``schedfence`` process loads), not by timing."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click

from schedfence.infra.cli.commands import COMMANDS, cli

from tests.infra.cli.cli_runs import ROOT, ok

HEAVY = ("temporalio", "fastapi", "starlette", "uvicorn", "rich", "jinja2")
OTHER_COMMANDS = ("admin", "jobs", "forward", "projections", "recovery", "replay", "replicate",
                  "scheduler", "serve", "metrics")
REPORT = ("import json, sys\n"
          "print(json.dumps(sorted(n for n in sys.modules if n.split('.')[0] in {heavy} or "
          "n.startswith('schedfence.infra.'))))\n")


def _loaded(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code + REPORT.format(heavy=repr(set(HEAVY)))],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_cli_loads_no_temporal_http_or_rich() -> None:
    loaded = _loaded("import schedfence.infra.cli\n")
    assert "schedfence.infra.cli.commands" in loaded  # the import really ran
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []


def test_status_loads_its_own_command_module_only(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'status.db'}"
    ok(store, "--destination", "sim", "schedule", "create", "ns", "s1")
    code = ("from click.testing import CliRunner\n"
            "from schedfence.infra.cli.commands import cli\n"
            f"done = CliRunner().invoke(cli, ['--store', {store!r}, 'status', 'ns', 's1'])\n"
            "assert done.exit_code == 0 and 'schedule ns/s1' in done.output, done.output\n")
    loaded = _loaded(code)
    assert "schedfence.infra.cli.reads" in loaded
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []
    assert [m for m in loaded
            if m.removeprefix("schedfence.infra.cli.") in OTHER_COMMANDS] == []
    assert [m for m in loaded if m.startswith(("schedfence.infra.http",
                                               "schedfence.infra.web"))] == []


def test_every_registered_name_loads_the_command_of_that_name() -> None:
    assert set(cli.commands) == {*COMMANDS, "demo"}
    for name in cli.commands:
        command = cli.commands[name]
        assert isinstance(command, click.Command) and command.name == name
    assert cli.list_commands(click.Context(cli)) == sorted(cli.commands)
