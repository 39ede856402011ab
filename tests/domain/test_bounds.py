"""domain/bounds.py: JSON values, times and rates, each refused as ``invalid_argument`` before
anything can overflow or recurse; and domain/text.py's schema patterns, which must take a
string exactly when ``validate_text`` does (the HTTP schema states the domain's rule)."""
from __future__ import annotations

import itertools
import re
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schedfence.domain import bounds, text
from schedfence.domain.errors import InvalidArgument
from schedfence.domain.source.spec import MAX_SECONDS, make_spec, times_after

UTC = timezone.utc


GOOD = [None, True, 0, -2**63, 2**63 - 1, 1.5, "é😀", [1, {"a": [None]}],
        {"k": {"n": 1}}, "[" * 64]
BAD = {
    "deep": (lambda: _nested(bounds.MAX_JSON_DEPTH + 1), "nested deeper"),
    "very deep": (lambda: _nested(100_000), "nested deeper"),
    "big int": (lambda: 2**63, "64-bit"),
    "small int": (lambda: -2**63 - 1, "64-bit"),
    "huge int": (lambda: 10**5000, "64-bit"),
    "nan": (lambda: float("nan"), "not finite"),
    "inf": (lambda: [float("-inf")], "not finite"),
    "surrogate": (lambda: ["a\udc80"], "lone surrogate U+DC80"),
    "surrogate key": (lambda: {"\ud800x": 1}, "object key is not valid UTF-8"),
    "int key": (lambda: {1: 1}, "key is not a string"),
    "not json": (lambda: {"a": object()}, "must be JSON"),
    "bytes": (lambda: b"x", "must be JSON"),
    "too big": (lambda: "x" * bounds.MAX_JSON_BYTES, "bytes of JSON"),
}


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("value", GOOD)
def test_json_within_the_bounds_is_taken(value: object) -> None:
    assert bounds.check_json("input", value) > 0
    assert bounds.check_json("input", _nested(bounds.MAX_JSON_DEPTH)) > 0


@pytest.mark.parametrize("name", list(BAD))
def test_json_outside_the_bounds_is_refused_naming_the_field(name: str) -> None:
    make, says = BAD[name]
    with pytest.raises(InvalidArgument) as refused:
        bounds.check_json("memo", make())
    assert refused.value.message.startswith("memo: ") and says in refused.value.message


@pytest.mark.parametrize("moment", [
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-14))),
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
    datetime(1, 1, 1, 23, 59, 59, tzinfo=UTC), datetime(9999, 12, 31, tzinfo=UTC)])
def test_times_past_the_bounds_are_refused_before_any_arithmetic(moment: datetime) -> None:
    with pytest.raises(InvalidArgument, match="start: must be from 0001-01-02"):
        bounds.bounded_time("start", moment)
    with pytest.raises(InvalidArgument, match="end: must be from"):
        make_spec(intervals=[(60, 0)], end_at=moment)


def test_times_at_the_bounds_are_taken_and_iterate_without_overflow() -> None:
    assert bounds.bounded_time("t", bounds.MIN_TIME) == bounds.MIN_TIME
    assert bounds.parse_time("9999-12-31T09:59:59+10:00", "t") is not None
    spec = make_spec(intervals=[(MAX_SECONDS, 0)], start_at=bounds.MIN_TIME,
                     cron=["0 0 * * *"])
    late = list(itertools.islice(times_after(spec, bounds.MAX_TIME - timedelta(days=3)), 10))
    assert late and all(t <= bounds.MAX_TIME for t in late)
    assert next(times_after(spec, bounds.MIN_TIME - timedelta(seconds=1))) == bounds.MIN_TIME
    assert list(times_after(spec, bounds.MAX_TIME)) == []


@pytest.mark.parametrize("text_value", ["yesterday", "2026-02-30T00:00:00Z", 5, ""])
def test_a_time_that_is_not_rfc_3339_is_refused(text_value: object) -> None:
    with pytest.raises(InvalidArgument, match="end: "):
        bounds.parse_time(text_value, "end")


@pytest.mark.parametrize("rate", [1e-300, 0.0009, 0, -1, float("nan"), float("inf"), 10_001,
                                  True, "1"])
def test_rates_outside_the_range_are_refused(rate: object) -> None:
    with pytest.raises(InvalidArgument, match="rate must be N/s with N from 0.001 to 10000"):
        bounds.check_rate("rate", rate)


def test_rates_at_the_range_are_taken() -> None:
    assert bounds.check_rate("rate", bounds.MIN_RATE) == bounds.MIN_RATE
    assert bounds.check_rate("rate", 10_000) == bounds.MAX_RATE


# -- the schema's patterns state validate_text's rules --------------------------------------------
SPECIAL = st.sampled_from(["\x00", "\t", "\n", "\r", "\x1f", "\x7f", "\x85", "\x9f", "\u2028",
                           "\u2029", " ", "\xa0", "\u1680", "\u2000", "\u200a", "\u202f",
                           "\u205f", "\u3000", *sorted(text.INVISIBLE), "a", "é", "😀", "-",
                           "\u2061", "\u180e"])
STRINGS = st.lists(st.one_of(SPECIAL, st.characters(exclude_categories=["Cs"])),
                   max_size=8).map("".join)
RULES = {
    "id": (text.ID_PATTERN, dict(identifier=True)),
    "reason": (text.REASON_PATTERN, {}),
    "notes": (text.NOTES_PATTERN, dict(multiline=True, required=False)),
}


def _takes(value: str, **rules: object) -> bool:
    try:
        text.validate_text("x", value, 100, **rules)  # type: ignore[arg-type]  # flags, as bools
    except InvalidArgument:
        return False
    return True


@pytest.mark.parametrize("kind", list(RULES))
@settings(max_examples=300, deadline=None)
@given(value=STRINGS)
def test_a_pattern_takes_a_string_exactly_when_the_domain_does(kind: str, value: str) -> None:
    pattern, rules = RULES[kind]
    # ``fullmatch``: the schema's readers anchor ``$`` at the very end (no trailing newline)
    assert bool(re.fullmatch(pattern.removeprefix("^").removesuffix("$"), value)) == \
        _takes(value, **rules), repr(value)
