"""A Temporal namespace that does not exist (issue 28, item 6), on a real dev server: every
command that asks the destination before it writes answers ``not_found`` (one line, or one
JSON error), never ``unavailable`` ("retry later"), and writes nothing. The same commands
against a namespace the server has succeed, so the refusal is the namespace's alone."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from schedfence.domain.ports import DestinationUnavailable, NamespaceNotFound, command_error
from tests.contract.temporal_env import NS, TemporalEnv, temporal_env  # noqa: F401
from tests.infra.cli.cli_runs import events_in, subprocess_cli


def _refused(store: str, destination: str, *args: str) -> dict:
    """``args`` in a fresh process, as text and as JSON: both refuse ``not_found`` in one
    line, and neither writes an event."""
    before = events_in(store)
    text = subprocess_cli(store, "--destination", destination, *args)
    assert text.returncode == 1 and text.stdout == "", text
    [line] = text.stderr.splitlines()  # one line, no traceback
    assert line.startswith("error: not_found: the destination has no such namespace"), line
    as_json = subprocess_cli(store, "--destination", destination, *args, "--json")
    assert as_json.returncode == 1 and as_json.stderr == "", as_json
    [line] = as_json.stdout.splitlines()
    error = json.loads(line)["error"]
    assert error["code"] == "not_found" and "is not found" in error["message"], error
    assert events_in(store) == before
    return error


def test_a_missing_namespace_is_not_found_and_writes_nothing(
        temporal_env: TemporalEnv, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'fence.db'}"
    missing = f"nowhere-{uuid.uuid4().hex[:8]}"
    target = temporal_env.server.target
    there, nowhere = f"temporal://{target}/{NS}", f"temporal://{target}/{missing}"
    # a schedule's create asks the destination what holds its workflow id
    error = _refused(store, nowhere, "schedule", "create", missing, "a")
    assert "create check" in error["message"] and missing in error["message"]
    # a rollback asks it too (the sentinel check), before its fence
    assert subprocess_cli(store, "--destination", "sim", "schedule", "create", missing,
                          "a").returncode == 0
    assert "sentinel check" in _refused(store, nowhere, "rollback", missing, "a")["message"]
    # the control: the same commands where the namespace exists
    for args in (("schedule", "create", NS, "a"), ("rollback", NS, "a")):
        done = subprocess_cli(store, "--destination", there, *args, "--json")
        assert done.returncode == 0, done


@pytest.mark.parametrize("exc, code", [(NamespaceNotFound("describe: NOT_FOUND: x"), "not_found"),
                                       (DestinationUnavailable("describe: timeout"),
                                        "unavailable")])
def test_a_worker_backs_off_but_a_command_says_not_found(exc: Exception, code: str) -> None:
    assert isinstance(exc, DestinationUnavailable)  # what every worker catches: it backs off
    assert command_error(exc, "the create check").code == code
