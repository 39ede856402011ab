"""``schedfence metrics``: the Prometheus text ``GET /metrics`` serves, on stdout or written
atomically to a file (node_exporter's textfile collector reads ``*.prom`` files: a reader
never sees half a file, because the text is written to a temporary file beside it and renamed
over it)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from schedfence.domain.errors import InvalidArgument

from schedfence.infra.cli.commands import cli_state, existing

FILE_MODE = 0o644  # the collector usually runs as another user


@click.command()
@click.option("--store", "metrics_store", default=None,
              help="Event store URL (default: the group's --store / SCHEDFENCE_STORE).")
@click.option("--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to FILE (atomically: a temporary file renamed over it) instead of "
                   "stdout, e.g. /var/lib/node_exporter/textfile/schedfence.prom.")
def metrics(metrics_store: str | None, output: str | None) -> None:
    """Print the Prometheus metrics of a store (the text GET /metrics serves).

    Counters are counted from the events (exact, from any process); the destination call
    latency is per process, so it is empty here. Needs no destination and never creates a
    store."""
    if metrics_store is not None:
        cli_state().store = metrics_store
    from schedfence.infra.adapters.observability.metrics import render_metrics  # SQLAlchemy

    service = existing()
    from schedfence.projections.oncall import STUCK_AFTER
    body, _content_type = render_metrics(service.views, service.app, service.destination,
                                         service.schedules_due, service.failing_schedules,
                                         stuck=lambda: service.stuck_counts(STUCK_AFTER),
                                         stuck_after=STUCK_AFTER)
    if output is None:
        click.echo(body.decode(), nl=False)
        return
    write_atomically(Path(output), body)


def write_atomically(path: Path, body: bytes) -> None:
    """Write ``body`` to a temporary file in ``path``'s directory, then rename it over
    ``path``; nothing is left behind on a failure."""
    directory = path.parent
    if not directory.is_dir():
        raise InvalidArgument(f"--output: directory {str(directory)!r} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise InvalidArgument(f"--output: cannot write in {str(directory)!r}: "
                              f"{exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InvalidArgument(f"--output: cannot write {str(path)!r}: "
                                  f"{exc.strerror}") from None
        raise
