"""The README's embedding example runs as printed: its ``python`` block under "Embedding" is read
from README.md (never copied here) and run in a fresh interpreter, in an empty directory, so
its SQLite file store (``sqlite:///fence.db``) and the simulator destination (``"sim"``) are
new. The block's own asserts check the outcome; a README that drifts from the code fails here.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.contract.temporal_env import temporal_env  # noqa: F401  (the dev server)
from tests.temporal_server import temporal_binary, wait_ready

ROOT = Path(__file__).resolve().parents[1]


def embedding_block() -> str:
    """The first ```python block of the README's "## Embedding" section."""
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"^## Embedding\n(.*?)(?=^## )", readme, re.M | re.S)
    assert section, "README.md has no '## Embedding' section"
    block = re.search(r"^```python\n(.*?)^```", section.group(1), re.M | re.S)
    assert block, "README.md's 'Embedding' section has no python block"
    return block.group(1)


def test_the_block_uses_the_public_import_path_a_file_store_and_the_simulator() -> None:
    code = embedding_block()
    assert "from schedfence import " in code
    assert 'open_service("sqlite:///fence.db", "sim")' in code
    assert "cron=" in code


def test_the_readme_embedding_example_runs(tmp_path: Path) -> None:
    script = tmp_path / "embedding.py"
    script.write_text(embedding_block())
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "fence.db").is_file()
    # svc.upcoming(...), printed: three nominal times, 06:30 in Berlin (05:30Z in winter,
    # 04:30Z in summer), on weekdays, as aware UTC datetimes.
    times = re.findall(r"^(\d{4}-\d\d-\d\dT\d\d:30:00\+00:00)$", done.stdout, re.M)
    assert len(times) == 3, done.stdout


def test_the_public_names_are_the_documented_objects() -> None:
    import schedfence
    from schedfence.domain import ports
    from schedfence.domain.source import action
    from schedfence.domain.source import spec
    from schedfence.infra.application import service

    assert schedfence.open_service is service.open_service
    assert schedfence.MigrationService is service.MigrationService
    assert schedfence.make_spec is spec.make_spec
    assert schedfence.make_action is action.make_action
    assert schedfence.make_policies is action.make_policies
    assert schedfence.Destination is ports.Destination
    assert set(schedfence.__all__) <= set(dir(schedfence))


def test_importing_the_package_loads_none_of_the_api() -> None:
    # Every schedfence command imports the package first: the re-exports must stay lazy.
    probe = ("import sys, schedfence\n"
             "print(sorted(m for m in sys.modules if m.startswith('schedfence.')))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- what a user's type checker sees ------------------------------------------------------------
# The public API's types, as a user's program states them: closed sets are Literals, times are
# datetimes, the errors are importable from the package. Type-checked with the block above
# (never run).
TYPED_USE = '''
from datetime import datetime
from typing import Literal, assert_type

from schedfence import DomainError, InvalidArgument, MigrationPending, NotFound

assert_type(svc.upcoming("payments", "nightly", 1), list[datetime])
assert_type(svc.rollback("payments", "nightly").outcome,
            Literal["accepted", "already_pending", "already_completed"])
assert issubclass(InvalidArgument, DomainError) and issubclass(NotFound, DomainError)
assert issubclass(MigrationPending, DomainError)
'''


def _mypy_strict(program: str, where: Path) -> subprocess.CompletedProcess[str]:
    """``mypy --strict`` on ``program`` as a user runs it: in the venv this test runs in (the
    one ``make`` builds), from a directory of the user's own (no project configuration)."""
    (where / "user.py").write_text(program)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-color-output",
                           "--cache-dir", str(where / ".cache"), "user.py"],
                          cwd=where, env=env, capture_output=True, text=True, timeout=600)


def test_mypy_strict_checks_the_embedding_program_against_the_package(tmp_path: Path) -> None:
    done = _mypy_strict(embedding_block() + TYPED_USE, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found"), done.stdout


def test_mypy_strict_refuses_an_overlap_outside_the_closed_set(tmp_path: Path) -> None:
    program = embedding_block().replace('make_policies(overlap="skip")',
                                        'make_policies(overlap="skipp")')
    assert program != embedding_block()
    done = _mypy_strict(program, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'Argument "overlap" to "make_policies" has incompatible type' in done.stdout
    assert "Cannot find implementation or library stub" not in done.stdout


def test_the_errors_the_api_raises_are_importable_from_the_package() -> None:
    import schedfence
    from schedfence.domain import errors, ports

    for name in ("DomainError", "InvalidArgument", "NotFound", "MigrationPending", "Closed",
                 "AlreadyExists", "Unavailable", "RecoveryRefused"):
        assert getattr(schedfence, name) is getattr(errors, name) and name in schedfence.__all__
    for name in ("DestinationError", "AlreadyStarted", "DestinationUnavailable",
                 "DestinationNotReached", "DestinationNotFound"):
        assert getattr(schedfence, name) is getattr(ports, name) and name in schedfence.__all__
    with schedfence.open_service("sqlite:///:memory:", "sim") as svc:
        try:
            svc.rollback("payments", "none")
        except schedfence.DomainError as refused:  # caught by the public name
            assert isinstance(refused, schedfence.NotFound), refused
        else:
            raise AssertionError("a rollback of a missing schedule was accepted")


def test_the_readme_embedding_example_runs_against_a_dev_server(temporal_env: Any,  # noqa: F811
                                                                tmp_path: Path) -> None:
    """The same block with its destination a dev server serving the block's namespace
    (issue 45, item 7): ``"sim"`` becomes ``"temporal://HOST:PORT/payments"``, nothing else."""
    target = temporal_env.server.target
    made = subprocess.run([temporal_binary(), "operator", "namespace", "create", "--address",
                           target, "--namespace", "payments"], capture_output=True, text=True,
                          timeout=60)
    assert made.returncode == 0 or "already" in made.stderr.lower(), made.stderr
    wait_ready(target, namespace="payments")
    code = embedding_block()
    assert code.count('"sim")') == 1
    script = tmp_path / "embedding.py"
    script.write_text(code.replace('"sim")', f'"temporal://{target}/payments")'))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert len(re.findall(r"^(\d{4}-\d\d-\d\dT\d\d:30:00\+00:00)$", done.stdout, re.M)) == 3, \
        done.stdout
    # the same block on a URL for another namespace: a configuration error, not an outage
    script.write_text(code.replace('"sim")', f'"temporal://{target}/default")')
                      .replace("fence.db", "other.db"))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("schedfence.domain.errors.InvalidArgument: ") and \
        "serves namespace(s) default, not 'payments'" in last, last
