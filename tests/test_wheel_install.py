"""The wheel works as a user installs it: built from a copy of the repository's files, installed
with its pinned dependencies into a new virtual environment, then run from an unrelated
directory (nothing of the repository on the path). Every command's ``--help`` prints, and a
rollback, a worker drain, a scheduler pass, ``oncall``, ``metrics`` and ``verify`` run on a
SQLite file store with the simulator destination.

The build prints no setuptools warning (a data folder or a subpackage absent from the package
list), and every module and data file of the tree is in the wheel (setup.py finds the packages
on disk: the list cannot drift from the tree).

Dependencies come through pip's configured index and its cache (the venv ``make`` built has
downloaded them already), so a run costs the copy, the build and the install: well under a
minute on an idle machine.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("domain", "projections", "infra")
SOURCES = ("pyproject.toml", "setup.py", "README.md", "schedfence", *ROOMS)
# Every command and subcommand, walked in the installed environment (a group's commands are
# imported there, from the wheel: a module missing from it fails here).
HELP_PROBE = """
import json, click
from click.testing import CliRunner
from schedfence.infra.cli.commands import cli

def every(group, path=()):
    for name in sorted(group.commands):
        command = group.commands[name]
        yield [*path, name]
        if isinstance(command, click.Group):
            yield from every(command, (*path, name))

failed = {}
paths = [[], *every(cli)]
for path in paths:
    done = CliRunner().invoke(cli, [*path, "--help"])
    if done.exit_code != 0 or "Usage:" not in done.output:
        failed[" ".join(path)] = (done.exit_code, done.output[-300:], repr(done.exception))
print(json.dumps({"commands": len(paths), "failed": failed}))
"""


def _copy_sources(to: Path) -> Path:
    """The files a wheel is built from, copied (the repository's build/ and egg-info are not
    read: a stale build/lib would hide a missing package)."""
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, to / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, to / name)
    return to


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The wheel, and the build's output (``-v``: setuptools' warnings are in it)."""
    where = tmp_path_factory.mktemp("wheel")
    (where / "src").mkdir()
    source = _copy_sources(where / "src")
    done = _pip("wheel", "-v", "--no-deps", "--wheel-dir", str(where / "dist"), str(source))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [wheel] = (where / "dist").glob("schedule_fence-*.whl")
    return wheel, done.stdout + done.stderr


@pytest.fixture(scope="module")
def installed(built: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv holding the wheel and its pinned dependencies; its bin directory."""
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    venv.create(env_dir, with_pip=False)  # this interpreter's pip installs into it
    python = env_dir / "bin" / "python"
    done = _pip("--python", str(python), "install", "--quiet", str(built[0]))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return env_dir / "bin"


def test_the_build_warns_about_nothing(built: tuple[Path, str]) -> None:
    _, output = built
    assert "Created wheel for schedule-fence" in output  # the verbose output was read
    flagged = [line for line in output.splitlines()
               if "absent from the `packages`" in line or "SetuptoolsDeprecationWarning" in line
               or "!!" in line.strip()[:2]]
    assert flagged == []


def test_the_wheel_holds_every_module_and_data_file_of_the_tree(built: tuple[Path, str]) -> None:
    with zipfile.ZipFile(built[0]) as wheel:
        names = set(wheel.namelist())
    expected = {"schedfence/__init__.py", "schedfence/py.typed"}
    for room in ROOMS:
        for path in (ROOT / room).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                expected.add(f"schedfence/{path.relative_to(ROOT).as_posix()}")
    assert "schedfence/domain/owners/__init__.py" in expected  # the scan found the subpackages
    assert "schedfence/infra/web/templates/index.html" in expected
    assert sorted(expected - names) == []


def _run(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("SCHEDFENCE_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([str(bin_dir / "schedfence"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


def test_every_command_prints_its_help_from_the_installed_wheel(installed: Path,
                                                                 tmp_path: Path) -> None:
    done = subprocess.run([str(installed / "python"), "-c", HELP_PROBE], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["commands"] > 30 and found["failed"] == {}


def test_the_installed_commands_run_a_rollback_end_to_end(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run([str(installed / "python"), "-c",
                            "import schedfence.domain.owners as o; print(o.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(installed.parent)  # the wheel's, not ours
    store = ["--store", f"sqlite:///{tmp_path / 'fence.db'}", "--destination", "sim"]
    steps = [
        ["schedule", "create", "ns", "a", "--interval", "1h", "--workflow-type", "W",
         "--task-queue", "q"],
        ["rollback", "ns", "a"],
        ["worker", "--until-idle"],
        ["scheduler", "--once"],
        ["oncall"],
        ["verify", "--json"],
    ]
    outputs = []
    for step in steps:
        done = _run(installed, tmp_path, *store, *step)
        assert done.returncode == 0, (step, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, (step, done.stderr)
        outputs.append(done.stdout)
    verified = json.loads(outputs[-1])
    assert (verified["ok"], verified["migrations"]) == (True, 1)
    status = _run(installed, tmp_path, *store, "status", "ns", "a", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["migration"]["state"] == "completed"
    metrics = _run(installed, tmp_path, *store, "metrics")
    assert metrics.returncode == 0, metrics.stderr
    assert "# TYPE" in metrics.stdout and "schedfence_" in metrics.stdout
