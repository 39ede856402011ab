"""Each request field's own rules, stated in the OpenAPI schema: the domain's limits
(domain/text.py, domain/bounds.py, domain/source/spec.py, domain/source/action.py) as lengths, patterns,
ranges and enumerations, so a body the schema takes is never refused ``invalid_argument`` for
one field alone. What a schema cannot state is listed in docs/operators.md ("The HTTP API",
"What the schema cannot say"): refusals that depend on the state or on several fields
together.

Types are strict: a JSON ``false`` is not a number, ``1`` is not a string, and an integer
field takes ``1`` or ``1.0`` (JSON Schema's integers) but not ``true``; a time is an RFC 3339
string (parsed by pydantic, then bounded by the domain). A value that does not fit is refused
with 422 (``invalid_argument``) before the route runs, and the domain checks every value
again on its own, as on the CLI and the Python API.
"""
from __future__ import annotations

from importlib import resources
from typing import Annotated, Any, Literal

from fastapi import Query
from pydantic import AwareDatetime, BeforeValidator, Field

from schedfence.domain.source.action import MAX_DURATION, MAX_NAME_LENGTH, MIN_CATCHUP_WINDOW
from schedfence.domain.bounds import MAX_RATE, MIN_RATE, TIME_RANGE
from schedfence.domain.job import MAX_BLOCKED_ROUNDS, MAX_BLOCKED_WAIT
from schedfence.domain.source.invoker import Overlap  # noqa: F401  (the API's overlap field)
from schedfence.domain.source.program import MAX_LIMIT
from schedfence.domain.source.spec import MAX_SECONDS
from schedfence.domain.text import (ID_PATTERN, MAX_ID_LENGTH, MAX_NOTES_LENGTH,
                                    MAX_REASON_LENGTH, NOTES_PATTERN, REASON_PATTERN)

MAX_ATTEMPTS = 10_000  # a drain's attempts in one request
ZONES = tuple(sorted({"UTC", *resources.files("tzdata").joinpath("zones")
                      .read_text(encoding="utf-8").split()}))  # the pinned database's names


def _whole(value: object) -> object:
    """A JSON integer: ``1`` or ``1.0`` (JSON Schema's integer), never ``true`` or ``"1"``."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be a whole number")
    return value


def whole(**limits: Any) -> Any:
    """An integer field with its range (kept in the schema as minimum and maximum)."""
    return Annotated[Annotated[int, Field(**limits)], BeforeValidator(_whole)]


def text(pattern: str, **limits: Any) -> Any:
    return Annotated[str, Field(strict=True, pattern=pattern, **limits)]


Id = text(ID_PATTERN, min_length=1, max_length=MAX_ID_LENGTH,
          description="An id: one line, no leading or trailing white space, no control, "
                      "invisible or bidirectional characters.")
Name = text(ID_PATTERN, min_length=1, max_length=MAX_NAME_LENGTH)
Reason = text(REASON_PATTERN, min_length=1, max_length=MAX_REASON_LENGTH,
              description="One line, not blank.")
NotesText = text(NOTES_PATTERN, max_length=MAX_NOTES_LENGTH,
                 description="Free text; line breaks and tabs allowed.")
Cron = Annotated[str, Field(strict=True, min_length=1, max_length=1000)]
Zone = Literal[ZONES]  # type: ignore[valid-type]  # the zone database's names, read at import
Flag = Annotated[bool, Field(strict=True)]
Whole = whole()
Attempts = whole(ge=1, le=MAX_ATTEMPTS)
Every = whole(ge=1, le=MAX_SECONDS, description="Seconds.")
Seconds = whole(ge=0, le=MAX_SECONDS, description="Seconds.")
CatchupWindow = whole(ge=MIN_CATCHUP_WINDOW, le=MAX_DURATION, description="Seconds.")
Limit = whole(ge=0, le=MAX_LIMIT, description="Actions left to take.")
Rate = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=MIN_RATE, le=MAX_RATE,
                              description="Requests a second.")]
BlockedRounds = whole(ge=0, le=MAX_BLOCKED_ROUNDS, description=(
    "Rounds that ask the job's blocked schedules again once its selection is decided, in "
    "all, counting an earlier run's (0: none)."))
BlockedWait = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0,
                                     le=MAX_BLOCKED_WAIT,
                                     description="Seconds before each such round.")]
Time = Annotated[AwareDatetime, Field(description=f"RFC 3339 with a zone, {TIME_RANGE} in "
                                                  "UTC.")]

# -- query parameters (reads) -----------------------------------------------------------------
UUID_PATTERN = "^[0-9a-fA-F]{8}(-?[0-9a-fA-F]{4}){3}-?[0-9a-fA-F]{12}$"
_ID = ID_PATTERN.removeprefix("^").removesuffix("$")
# ``NAMESPACE/SCHEDULE_ID`` (audit's ``schedule``): the namespace up to the first ``/``.
KEY_PATTERN = f"^{_ID.replace('[^', '[^/')}/{_ID}$"
QueryId = Annotated[str, Query(min_length=1, max_length=MAX_ID_LENGTH, pattern=ID_PATTERN)]
