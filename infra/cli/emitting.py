"""How every command prints: JSON documents, JSON Lines, plain lines and the one-line error.

Light on purpose (click, json and domain/text.py only): the group (commands.py) prints errors
and documents through it, and ``--help`` and ``status`` must not pay for the rest of
``output`` (the domain's models, the service). ``output`` re-exports these four."""
from __future__ import annotations

import json
import sys
from typing import Any, Iterable

import click

from schedfence.domain.text import one_line


def emit_json(doc: Any) -> None:
    click.echo(json.dumps(doc, indent=2, default=str))


def emit_json_line(event: str, doc: dict[str, Any]) -> None:
    """One object of a streaming command's ``--json`` output (JSON Lines): compact, on one
    line, flushed at once, its kind under ``event`` (a follower reads line by line)."""
    click.echo(json.dumps(dict(doc, event=event), default=str))
    sys.stdout.flush()


def emit_error(code: str, message: str, as_json: bool) -> None:
    """The error contract: JSON object on stdout under --json, else one stderr line."""
    if as_json:
        click.echo(json.dumps({"error": {"code": code, "message": message}}))
    else:
        click.echo(f"error: {code}: {one_line(message)}", err=True)


def emit_lines(lines: Iterable[str]) -> None:
    for line in lines:
        click.echo(line)
