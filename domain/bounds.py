"""The bounds every caller-supplied value passes before anything is written (with
``domain/text.py`` for ids and free text): JSON values, times and rates. Every entry point
(the Python API, the CLI, HTTP) reaches these through the domain's own constructors
(``make_action``, ``make_spec``, ``backfill``, ``parse_rate``), so a value is refused the same
way on every path, as one ``invalid_argument`` naming the field, before the first append.

| value        | bound                                                                          |
|--------------|--------------------------------------------------------------------------------|
| JSON value   | at most ``MAX_JSON_DEPTH`` nested arrays/objects; ``MAX_JSON_BYTES`` encoded;  |
|              | integers within int64; floats finite; strings and keys valid UTF-8 (no lone    |
|              | surrogate); keys strings; only null, booleans, numbers, strings, arrays, objects |
| time         | carries a zone; ``MIN_TIME`` to ``MAX_TIME`` in UTC, checked before any        |
|              | arithmetic (a zone offset, a second added or taken) can leave Python's range   |
| rate         | ``MIN_RATE`` to ``MAX_RATE`` per second, finite                                |

Why these numbers: Temporal's server takes a proto ``Timestamp`` from year 1 to 9999
(tests/contract/test_server_accepts.py) and Python's ``datetime`` holds the same years; the
source takes a second off a start and adds one to a backfill's, so a day is kept at each end.
JSON numbers beyond int64 or not finite are read differently (or refused) by the SDKs that
decode an action's input; a depth above 64 is refused before any recursive encoder sees it
(Python's json recurses per level). A rate is at least one request in 1000 seconds: a job
paces its requests by sleeping 1/rate, which at 1e-300/s overflowed the platform's clock after
the job and a first fence were written (issue 28), and any sleep much longer than 1000 s is a
job no operator waits for.
"""
from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any

from schedfence.domain.errors import InvalidArgument

MAX_JSON_DEPTH = 64
MAX_JSON_BYTES = 256 * 1024
MIN_JSON_INT, MAX_JSON_INT = -2**63, 2**63 - 1
MIN_TIME = datetime(1, 1, 2, tzinfo=timezone.utc)
MAX_TIME = datetime(9999, 12, 30, 23, 59, 59, tzinfo=timezone.utc)
MIN_RATE = 0.001  # requests per second: one in 1000 seconds
MAX_RATE = 10_000.0  # requests per second
TIME_RANGE = "0001-01-02T00:00:00Z to 9999-12-30T23:59:59Z"


def check_json(field: str, value: Any, max_bytes: int = MAX_JSON_BYTES) -> int:
    """``value``'s encoded size in bytes if it is a JSON value within the bounds, else
    ``invalid_argument`` naming ``field``. Walks without recursion, so no depth of nesting
    can exhaust the stack before the depth is refused."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            if depth > MAX_JSON_DEPTH:
                raise InvalidArgument(f"{field}: nested deeper than {MAX_JSON_DEPTH} levels")
            if isinstance(item, dict):
                for key in item:
                    if not isinstance(key, str):
                        raise InvalidArgument(f"{field}: an object key is not a string")
                    _text(field, key, "an object key")
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
        else:
            _scalar(field, item)
    size = len(json.dumps(value, allow_nan=False).encode())
    if size > max_bytes:
        raise InvalidArgument(f"{field}: {size} bytes of JSON, more than {max_bytes}")
    return size


def _scalar(field: str, item: Any) -> None:
    if item is None or isinstance(item, bool):
        return
    if isinstance(item, int):
        if not MIN_JSON_INT <= item <= MAX_JSON_INT:
            raise InvalidArgument(f"{field}: an integer outside the 64-bit range")
    elif isinstance(item, float):
        if not math.isfinite(item):
            raise InvalidArgument(f"{field}: a number that is not finite (NaN or infinity)")
    elif isinstance(item, str):
        _text(field, item, "a string")
    else:
        raise InvalidArgument(f"{field}: must be JSON (not {type(item).__name__})")


def _text(field: str, text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(f"{field}: {what} is not valid UTF-8 (lone surrogate "
                              f"U+{ord(text[exc.start]):04X} at position {exc.start})") from None


def bounded_time(field: str, value: object) -> datetime:
    """``value`` in UTC if it is a time with a zone within ``MIN_TIME`` to ``MAX_TIME``,
    else ``invalid_argument`` naming ``field`` (an offset that takes it past year 1 or 9999
    is refused here, never an ``OverflowError`` later)."""
    if not isinstance(value, datetime) or value.tzinfo is None or value.utcoffset() is None:
        raise InvalidArgument(f"{field}: must carry a time zone (e.g. 2026-12-03T07:00:00Z)")
    try:
        utc = value.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        utc = None
    if utc is None or not MIN_TIME <= utc <= MAX_TIME:
        raise InvalidArgument(f"{field}: must be from {TIME_RANGE}")
    return utc


def parse_time(text: object, field: str) -> datetime | None:
    """An RFC 3339 time as given on the CLI or in a request body (None stays None), bounded
    by ``bounded_time``."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise InvalidArgument(f"{field}: must be an RFC 3339 time")
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{field}: not an RFC 3339 time (e.g. 2026-12-03T07:00:00Z)") \
            from None
    bounded_time(field, moment)
    return moment


def check_rate(field: str, rate: object) -> float:
    """Requests a second: a finite number from ``MIN_RATE`` to ``MAX_RATE``."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or \
            not MIN_RATE <= rate <= MAX_RATE:  # also refuses nan
        raise InvalidArgument(f"{field} must be N/s with N from {MIN_RATE:g} to {MAX_RATE:g}")
    return float(rate)
