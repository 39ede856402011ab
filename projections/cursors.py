"""Page cursors: one definition of a page for the CLI and the HTTP API. A page is at most
``limit`` rows in a fixed order and, while more match, an opaque cursor naming the last row
returned (keyset paging: the next page starts after it, so a row is returned once across pages
however the log grows). Light on purpose (no SQLAlchemy): ``list`` reads its page from the
projection's rows through a plain DB-API connection and must name the same cursors."""
from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from schedfence.domain.errors import InvalidArgument

MAX_CURSOR = 10_000  # characters: a list cursor holds a key (two ids of up to 1000 characters)


def encode_cursor(kind: str, *values: Any) -> str:
    raw = json.dumps([kind, *values], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(kind: str, token: str, types: tuple[type, ...]) -> list[Any]:
    """The values ``encode_cursor(kind, ...)`` put in ``token``; anything else is refused."""
    value: Any = None
    if isinstance(token, str) and token.isascii() and 0 < len(token) <= MAX_CURSOR:
        try:
            value = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        except (ValueError, binascii.Error, UnicodeDecodeError):
            value = None
    if not (isinstance(value, list) and len(value) == len(types) + 1 and value[0] == kind
            and all(type(v) is t for v, t in zip(value[1:], types))):
        raise InvalidArgument(f"cursor {str(token)[:40]!r} was not returned by a {kind} page "
                              "(pass next_cursor back unchanged, with the same filters)")
    return value[1:]


def keys_after(after: str) -> int:
    """The log position of the last key a schedules page returned, from the page's cursor;
    a cursor of anything else is refused."""
    position: int = decode_cursor("schedules", after, (int,))[0]
    return position
