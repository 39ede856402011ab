"""The rules every caller-supplied id and free-text value passes before it is written.

The event log is append-only, so a value accepted once is stored forever: every entry point
(the Python API, and the CLI through it) calls these functions before anything is appended, and
every accepted value fits the projection's columns (``projections/tables.py``: ids and actors
are ``VARCHAR(1000)``, free text is ``TEXT``) and decodes everywhere it is read back.

| value                                       | max chars | line breaks | identifier rules |
|---------------------------------------------|-----------|-------------|------------------|
| ids (namespace, schedule id, request id, …) | 1000      | no          | yes              |
| actor (operator identity)                   | 200       | no          | yes              |
| worker id                                   | 200       | no          | yes              |
| reason                                      | 1000      | no          | no (must not be blank) |
| notes                                       | 10,000    | ``\\n`` and ``\\t`` only | no (may be empty) |

Everywhere: a ``str`` that encodes to UTF-8 (no lone surrogates: invalid UTF-8 bytes on a
command line arrive in Python as surrogateescape surrogates, so those are refused too), and no
control characters (C0, C1, DEL, U+2028/U+2029); NUL among them. Identifier rules: no leading
or trailing white space, no bidirectional formatting characters (U+061C, U+200E/U+200F,
U+202A–U+202E, U+2066–U+2069), no zero-width characters (U+200B–U+200D, U+2060) and no BOM
(U+FEFF): each would make two different ids look the same. Lengths are in characters (what
PostgreSQL's ``VARCHAR(n)`` counts); ids sent to Temporal also have byte limits (domain/ids.py).
Messages never echo the value, only its length or the offending code point and position.
"""
from __future__ import annotations

import unicodedata

from schedfence.domain.errors import InvalidArgument

MAX_ID_LENGTH = 1000
MAX_ACTOR_LENGTH = 200
MAX_WORKER_ID_LENGTH = 200
MAX_REASON_LENGTH = 1000
MAX_NOTES_LENGTH = 10_000

CONTROL_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
MULTILINE_ALLOWED = frozenset("\n\t")
INVISIBLE = frozenset(
    ["\u061c", "\u200e", "\u200f", "\ufeff", "\u2060"]
    + [chr(c) for c in range(0x200B, 0x200E)]     # zero width space, non-joiner, joiner
    + [chr(c) for c in range(0x202A, 0x202F)]     # bidi embeddings and overrides
    + [chr(c) for c in range(0x2066, 0x206A)])    # bidi isolates


def validate_text(kind: str, value: object, max_length: int, *, multiline: bool = False,
                  identifier: bool = False, required: bool = True) -> str:
    """Return ``value`` if it is acceptable ``kind`` text, else raise InvalidArgument.

    ``multiline`` keeps ``\\n`` and ``\\t``; ``identifier`` adds the identifier rules;
    ``required`` refuses an empty (or, for free text, blank) value."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{kind} is required" if value is None and required
                              else f"{kind} must be a string")
    if value == "" or (not identifier and not value.strip()):
        if required:
            raise InvalidArgument(f"{kind} is required")
        if value == "":
            return value  # blank optional text still passes the checks below ("\r" does not)
    if len(value) > max_length:
        raise InvalidArgument(f"{kind} is longer than {max_length} characters ({len(value)})")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{kind} is not valid UTF-8 text (undecodable byte or lone "
                              f"surrogate U+{ord(value[exc.start]):04X} at position "
                              f"{exc.start})") from None
    for i, c in enumerate(value):
        if unicodedata.category(c) in CONTROL_CATEGORIES and not (
                multiline and c in MULTILINE_ALLOWED):
            raise InvalidArgument(f"{kind} contains a control character (U+{ord(c):04X} at "
                                  f"position {i})")
        if identifier and c in INVISIBLE:
            raise InvalidArgument(f"{kind} contains an invisible or bidirectional formatting "
                                  f"character (U+{ord(c):04X} at position {i})")
    if identifier and value != value.strip():
        raise InvalidArgument(f"{kind} has leading or trailing white space")
    return value


def validate_id(kind: str, value: object) -> str:
    """Namespace, schedule id, request id, run id, …: at most 1000 characters, one line."""
    return validate_text(kind, value, MAX_ID_LENGTH, identifier=True)


def validate_actor(value: object, kind: str = "actor") -> str:
    return validate_text(kind, value, MAX_ACTOR_LENGTH, identifier=True)


def validate_worker_id(value: object) -> str:
    return validate_text("worker id", value, MAX_WORKER_ID_LENGTH, identifier=True)


def validate_reason(value: object) -> str:
    return validate_text("reason", value, MAX_REASON_LENGTH)


def validate_notes(value: object) -> str:
    return validate_text("notes", value, MAX_NOTES_LENGTH, multiline=True, required=False)


# -- any text made to fit one line of a message (shown, never stored) -------------------------
def one_line(text: object, limit: int | None = None) -> str:
    """Any text on one line: the one definition for every message, terminal and log line.

    Without ``limit``: every character kept, the non-printable ones escaped (a newline reads
    ``\\n``), for a value echoed whole. With ``limit``: an exception's text, whose line breaks
    carry nothing (a driver error spreads SQL and values over many lines), flattened (each run
    of white space one space) and cut after ``limit`` characters with `` ...``."""
    if limit is None:
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit] + " ..."


def error_line(exc: BaseException) -> str:
    """An error as one line: its type and the first line of its text."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


# -- the same rules as regular expressions, for the HTTP API's schema ----------------------------
# (the JSON Schema ``pattern`` of each field; tests/domain/test_bounds.py checks that a
# string matches exactly when ``validate_text`` takes it). A lone surrogate is not in them: no
# pattern engine of the schema's readers takes one, and the HTTP layer refuses such a string
# before any pattern (pydantic: not a valid string).
def _class(chars: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in chars)


_CONTROL = "\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029"
_CONTROL_MULTILINE = "\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u2028\\u2029"
_SPACE = "\\u0020\\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000"  # what str.strip() takes
_INVISIBLE = _class("".join(sorted(INVISIBLE)))
ID_PATTERN = (f"^[^{_CONTROL}{_INVISIBLE}{_SPACE}]"
              f"(?:[^{_CONTROL}{_INVISIBLE}]*[^{_CONTROL}{_INVISIBLE}{_SPACE}])?$")
REASON_PATTERN = f"^[^{_CONTROL}]*[^{_CONTROL}{_SPACE}][^{_CONTROL}]*$"
NOTES_PATTERN = f"^[^{_CONTROL_MULTILINE}]*$"


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``1 key``, ``2 keys``, ``0 migrations``: a count and its noun, agreed."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"
