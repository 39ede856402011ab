"""A namespace the destination URL does not serve is a configuration error (issue 45, item 7):
a command answers ``invalid_argument`` in one line, exit 1, and writes nothing, never
``unavailable`` (which reads as retryable). Nothing leaves the process, so no server is needed:
the check runs before any call (infra/adapters/destination/temporal.py)."""
from __future__ import annotations

import pytest

from schedfence.domain.ports import (DestinationNotReached, NamespaceNotServed,
                                     command_error)
from schedfence.domain.errors import InvalidArgument
from tests.infra.cli.cli_runs import events_in, subprocess_cli
from tests.pgtools import free_port


def test_command_error_of_a_namespace_not_served_is_invalid_argument() -> None:
    exc = NamespaceNotServed("this destination serves namespace(s) default, not 'payments'")
    assert isinstance(exc, DestinationNotReached)  # a worker still backs off, never parks
    refused = command_error(exc, "the rollback check")
    assert isinstance(refused, InvalidArgument) and "temporal://HOST:PORT/NS1" in str(refused)


@pytest.mark.parametrize("command", [("rollback", "payments", "nightly"),
                                     ("forward", "payments", "on-temporal"),
                                     ("migrate", "--namespace", "payments", "--to", "workflow",
                                      "--job-id", "move")])
def test_a_command_for_a_namespace_not_served_is_invalid_argument(file_store_url: str,
                                                                  command: tuple) -> None:
    made = subprocess_cli(file_store_url, "--destination", "sim", "schedule", "create",
                          "payments", "nightly", "--interval", "1h", "--workflow-type", "W",
                          "--task-queue", "q")
    assert made.returncode == 0, made.stderr
    before = events_in(file_store_url)
    # nothing listens there: a call that left the process would be unavailable, not this
    temporal = f"temporal://127.0.0.1:{free_port()}/default"
    done = subprocess_cli(file_store_url, "--destination", temporal, *command)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr[-800:]
    assert lines[0].startswith("error: invalid_argument: "), lines[0]
    assert "serves namespace(s) default, not 'payments'" in lines[0], lines[0]
    assert events_in(file_store_url) == before
