"""``--help`` opens no database: ``schedfence --help`` lists every command from its registered
summary (commands.COMMANDS) without importing a command's module, and ``schedfence COMMAND
--help`` imports that command's module only. Checked on ``sys.modules`` of a fresh interpreter
that runs the console entry point, as a ``schedfence`` process does."""
from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner
from click.utils import _make_default_short_help

from schedfence.infra.cli.commands import COMMANDS, LazyCommands, cli

from tests.infra.cli.cli_runs import ROOT

DRIVERS = ("sqlite3", "_sqlite3", "psycopg", "psycopg_binary", "psycopg_c", "sqlalchemy",
           "eventsourcing.sqlite", "eventsourcing.postgres")
PROBE = ("import json, sys\nsys.argv = ['schedfence', *{argv!r}]\n"
         "from schedfence.infra.cli import main\ntry:\n    main()\nexcept SystemExit as exc:\n"
         "    assert exc.code in (0, None), exc.code\n"
         "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")


def _loaded(*argv: str) -> tuple[str, set[str]]:
    """What ``schedfence ARGV`` printed, and every module its process loaded."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=list(argv))], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout, set(json.loads(done.stderr.strip().splitlines()[-1]))


def _drivers(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m in DRIVERS or m.split(".")[0] in DRIVERS)


def test_help_loads_no_database_driver_and_no_command_module() -> None:
    shown, modules = _loaded("--help")
    assert "Commands:" in shown and "  status " in shown  # the help really printed
    assert _drivers(modules) == []
    assert "eventsourcing.persistence" not in modules
    assert not any(m.startswith("pydantic") for m in modules)  # nor the domain's models
    loaded_commands = {m.rsplit(".", 1)[-1] for m in modules
                       if m.startswith("schedfence.infra.cli.")}
    assert loaded_commands <= {"commands", "emitting"}


def _every_command(group: click.Group = cli, path: tuple[str, ...] = ()) -> list[list[str]]:
    """Every command and subcommand as its argv, groups too (loaded in this process only)."""
    found = []
    for name in sorted(group.commands):
        command = group.commands[name]
        found.append([*path, name])
        if isinstance(command, click.Group):
            found += _every_command(command, (*path, name))
    return found


EVERY_COMMAND = _every_command()


def test_every_command_is_listed_subcommands_too() -> None:
    names = {" ".join(argv) for argv in EVERY_COMMAND}
    assert {*COMMANDS, "demo", "replicate", "promote", "job status", "projection follow",
            "schedule create"} <= names


@pytest.mark.parametrize("argv", EVERY_COMMAND, ids=" ".join)
def test_a_command_help_loads_no_database_driver(argv: list[str]) -> None:
    shown, modules = _loaded(*argv, "--help")
    assert shown.startswith(f"Usage: schedfence {' '.join(argv)} ")
    assert _drivers(modules) == []


def test_the_help_listing_is_the_same_with_every_command_loaded() -> None:
    """The lazy listing (registered summaries) is byte-identical to click's own listing from
    the loaded commands, at any terminal width."""
    for width in (50, 80, 200):
        lazy = CliRunner().invoke(cli, ["--help"], terminal_width=width, prog_name="schedfence")
        loaded = click.Group(name=cli.name, params=cli.params, help=cli.help,
                             context_settings=cli.context_settings,
                             commands={n: cli.commands[n] for n in cli.commands})
        eager = CliRunner().invoke(loaded, ["--help"], terminal_width=width,
                                   prog_name="schedfence")
        assert lazy.exit_code == eager.exit_code == 0
        assert lazy.output == eager.output


def test_every_registered_summary_is_its_command_help_first_sentence() -> None:
    fresh = LazyCommands(COMMANDS)
    for name, (_module, _attribute, summary) in COMMANDS.items():
        assert fresh.summary(name) == summary
        command = fresh[name]
        assert fresh.summary(name) is None  # loaded: its own help is used from now on
        for limit in range(10, 400, 7):
            assert _make_default_short_help(summary, limit) == command.get_short_help_str(limit)


def test_version_prints_the_installed_version_and_loads_no_driver() -> None:
    """``--version`` reads the distribution's metadata: no store, no driver, no command."""
    from importlib.metadata import version

    from schedfence.infra.cli.commands import DISTRIBUTION
    shown, modules = _loaded("--version")
    assert shown == f"schedfence {version(DISTRIBUTION)}\n"
    assert _drivers(modules) == []
    assert "eventsourcing.persistence" not in modules
    assert not any(m.startswith("pydantic") for m in modules)
    assert {m.rsplit(".", 1)[-1] for m in modules
            if m.startswith("schedfence.infra.cli.")} <= {"commands", "emitting"}
