"""string2ll against a plain reference, and against storage's copy (lpStringToInt64)."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rill.protocol.numbers import INT64_MAX, INT64_MIN, string2ll
from rill.storage.listpack import string_to_int64

_CANONICAL = re.compile(rb"0|-?[1-9][0-9]*")


def reference(s: bytes) -> int | None:
    """What Redis's string2ll accepts, spelled as plainly as possible."""
    if _CANONICAL.fullmatch(s) is None:
        return None
    v = int(s)
    return v if INT64_MIN <= v <= INT64_MAX else None


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        (b"0", 0),
        (b"7", 7),
        (b"-7", -7),
        (b"9223372036854775807", INT64_MAX),
        (b"-9223372036854775808", INT64_MIN),
        (b"9223372036854775808", None),
        (b"-9223372036854775809", None),
        (b"", None),
        (b"-", None),
        (b"-0", None),
        (b"00", None),
        (b"01", None),
        (b"+1", None),
        (b" 1", None),
        (b"1 ", None),
        (b"1\n", None),
        (b"1.0", None),
        (b"1e3", None),
        (b"0x10", None),
        (b"1_000", None),
        (b"\xd9\xa3", None),  # ARABIC-INDIC DIGIT THREE in UTF-8
        (b"1" * 21, None),
        (b"-" + b"0" * 19 + b"1", None),
    ],
)
def test_examples(s, expected):
    assert string2ll(s) == expected
    assert string_to_int64(s) == expected


@given(st.binary(max_size=22) | st.from_regex(rb"\A-?[0-9]{1,21}\Z"))
def test_matches_reference(s):
    assert string2ll(s) == reference(s)


@given(st.binary(max_size=22) | st.from_regex(rb"\A-?[0-9]{1,21}\Z"))
def test_storage_copy_agrees(s):
    """storage/ may not import protocol/, so it keeps lpStringToInt64: the same function."""
    assert string_to_int64(s) == string2ll(s)


@given(st.integers(INT64_MIN, INT64_MAX))
def test_every_int64_round_trips(v):
    assert string2ll(b"%d" % v) == v
