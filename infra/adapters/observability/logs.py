"""Structured logs: the standard library's ``logging`` with a formatter of our own.

Why not structlog: the records come from a handful of places (the worker's appends, a worker
pool's errors, the scheduler's refusals, the CLI), every library we use already logs through
``logging``, and an embedding application configures ``logging`` anyway; a JSON formatter and
one context variable are all this needs, and no second logging system has to be bridged.
The JSON formatter is our own because no dependency we already have ships one (uvicorn's and
rich's log formatters write text), and python-json-logger would be a new dependency for the
dozen lines of ``JsonFormatter``, whose secret scrubbing we would keep around it anyway.

- Every record of the ``schedfence`` loggers goes to stderr (stdout stays the commands' own
  output, machine-readable under ``--json``), as one JSON object per line (``json``) or as its
  message followed by its fields (``text``, the default, as the CLI printed before).
- The fields, where known: ``migration_id``, ``request_id``, ``namespace``, ``schedule_id``,
  ``worker``, ``event_type``; any other ``extra=`` key of a record is kept too. Fields come from
  ``extra=`` or from ``log_context`` (a context variable: a request handler binds its request
  id once, and every record under it carries it).
- Secrets never appear: a URL's password, a bearer token and a ``password=``/``token=``-style
  value (``schedfence_token=``, ``access_token=`` and ``Cookie:`` too) are replaced with
  ``***`` in every message and field, a field whose *name* says secret is dropped to ``***``
  whatever it holds, and every secret handed to ``hide`` (the tokens ``serve`` accepts) is
  blanked wherever it appears. Callers still log ``StoreURL.redacted``; this is the net under it.
- Another library's records can be sent through the same handler (``adopt``): ``serve`` sends
  uvicorn's start-up, error and access records (the request line, its query included), so
  they are JSON under ``--log-format json`` and scrubbed like ours.
- A library does not configure logging: without ``configure`` (which the CLI calls), the
  ``schedfence`` logger has only a ``NullHandler``.
"""
from __future__ import annotations

import json
import logging
import re
import sys
import traceback
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator

ROOT = "schedfence"
FORMATS = ("text", "json")
LEVELS = ("debug", "info", "warning", "error")
FIELDS = ("migration_id", "request_id", "namespace", "schedule_id", "worker", "event_type")
MAX_ERROR = 2000  # characters of a formatted exception kept on a record

_context: ContextVar[dict[str, Any]] = ContextVar("schedfence_log_context", default={})
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

_URL_PASSWORD = re.compile(r"([a-z][a-z0-9+.-]*://[^:@/\s]*):[^@/\s]*@", re.I)
_BEARER = re.compile(r"\b(bearer)\s+[^\s,;\"']+", re.I)
_SECRET_NAME = r"(?:password|passwd|pwd|token|secret|api[_-]?key|authorization|cookie)"
# The name may have a prefix: ``schedfence_token=``, ``access_token=``, ``X-Api-Key:``.
_KEY_VALUE = re.compile(rf"\b([\w-]*{_SECRET_NAME})(\s*[=:]\s*)[^\s&,;\"']+", re.I)
_SECRET_KEY = re.compile(_SECRET_NAME, re.I)
_IGNORED = {"color_message"}  # uvicorn's copy of a message with terminal colours
_hidden: frozenset[str] = frozenset()  # literal secrets blanked wherever they appear

logging.getLogger(ROOT).addHandler(logging.NullHandler())


def get_logger(name: str) -> logging.Logger:
    """The logger ``schedfence.<name>``."""
    return logging.getLogger(f"{ROOT}.{name}")


def hide(secrets: Iterable[str]) -> None:
    """Blank each of ``secrets`` (each at least a few characters long) in every record from
    now on, wherever it appears: a token in a path, a header, a message."""
    global _hidden
    _hidden = _hidden | {s for s in secrets if isinstance(s, str) and len(s) >= 8}


def redact(text: str) -> str:
    """``text`` with every password, bearer token and secret-looking value replaced."""
    for secret in _hidden:
        text = text.replace(secret, "***")
    text = _URL_PASSWORD.sub(r"\1:***@", text)
    text = _BEARER.sub(r"\1 ***", text)
    return _KEY_VALUE.sub(r"\1\2***", text)


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Fields every record inside the block carries (``None`` values are left out)."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items()
                                               if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's fields: the context's, then its own ``extra=``; the known ones first."""
    fields = dict(_context.get())
    fields.update((k, v) for k, v in vars(record).items()
                  if k not in _STANDARD and k not in _IGNORED)
    fields = {k: v for k, v in fields.items() if v is not None}
    ordered = {k: fields.pop(k) for k in FIELDS if k in fields}
    ordered.update(sorted(fields.items()))
    return {k: "***" if _SECRET_KEY.search(k) else _clean(v) for k, v in ordered.items()}


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return redact(str(value))


def _error(record: logging.LogRecord) -> str | None:
    if not record.exc_info:
        return None
    text = "".join(traceback.format_exception(*record.exc_info)).strip()
    return redact(text[-MAX_ERROR:])


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, message, the fields, ``error``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="microseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(), "logger": record.name,
            "message": redact(record.getMessage())}
        doc.update(record_fields(record))
        if (error := _error(record)) is not None:
            doc["error"] = error
        return json.dumps(doc, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The message, then ``key=value`` fields in brackets (and the error, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        line = redact(record.getMessage())
        fields = record_fields(record)
        if fields:
            line += " [" + " ".join(f"{k}={v}" for k, v in fields.items()) + "]"
        error = _error(record)
        return line if error is None else f"{line}\n{error}"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted (a test runner swaps
    it), and is recognisable, so ``configure`` replaces it instead of adding another."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure(fmt: str = "text", level: str = "warning") -> logging.Handler:
    """Send the ``schedfence`` loggers' records of ``level`` and above to stderr in ``fmt``."""
    if fmt not in FORMATS:
        raise ValueError(f"log format {fmt!r} is not one of {', '.join(FORMATS)}")
    if level.lower() not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    logger = logging.getLogger(ROOT)
    for old in [h for h in logger.handlers if isinstance(h, _StderrHandler)]:
        logger.removeHandler(old)
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    return handler


def adopt(name: str, level: str = "info") -> str:
    """Send the records of another library's logger ``name`` (and its children's) through the
    handler ``configure`` installed: stderr, the same format, the same redaction. It logs from
    ``level`` or the configured level, whichever is less severe; returns that level's name."""
    root = logging.getLogger(ROOT)
    ours: list[logging.Handler] = [h for h in root.handlers if isinstance(h, _StderrHandler)]
    ours = ours or [configure()]
    logger = logging.getLogger(name)
    for old in list(logger.handlers):
        logger.removeHandler(old)
    logger.addHandler(ours[0])
    logger.propagate = False
    chosen = min(logging.getLevelName(level.upper()), root.getEffectiveLevel())
    logger.setLevel(chosen)
    return logging.getLevelName(chosen).lower()


# The name of the token a request was authorized with, while its response starts (set by the
# HTTP app's ``RequestActor``): the actor its events record, named on its access record.
request_actor: ContextVar[str | None] = ContextVar("schedfence_request_actor", default=None)


class AccessFields(logging.Filter):
    """uvicorn's access records as fields: ``client``, ``method``, ``path`` (scrubbed by the
    formatter, as every field is), ``status``, and ``actor`` (the token's name) when the
    request was authorized."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            record.client, record.method, record.path, _, record.status = args
            actor = request_actor.get()
            if actor is not None:
                record.actor = actor
        return True


@contextmanager
def appending(logger: logging.Logger, aggregates: Iterable[Any], worker: str) -> Iterator[None]:
    """Around a save of ``aggregates``: once it succeeded, one ``info`` record per event it
    appended, with the migration, request id and key its event or aggregate names."""
    if not logger.isEnabledFor(logging.INFO):
        yield
        return
    aggregates = list(aggregates)  # read before the save, which clears the pending events
    events = [e for a in aggregates for e in getattr(a, "pending_events", ())]
    states = {str(a.id): getattr(a, "state", None) for a in aggregates}
    yield
    for event in events:
        st = states.get(str(event.originator_id))
        fields = {name: getattr(event, name, None) or getattr(st, name, None)
                  for name in FIELDS[:4]}
        logger.info("appended %s v%d", type(event).__name__, event.originator_version,
                    extra={**{k: str(v) for k, v in fields.items() if v is not None},
                           "worker": worker, "event_type": type(event).__name__})
