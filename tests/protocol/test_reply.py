"""Reply encoding in RESP2 and RESP3."""

from __future__ import annotations

import pytest
from rill.protocol.reply import (
    NULL_ARRAY,
    OK,
    BigNumber,
    Double,
    Map,
    Push,
    ReplyError,
    Set,
    Status,
    Verbatim,
    encode,
    encode_into,
)


@pytest.mark.parametrize(
    "value,resp2,resp3",
    [
        (b"abc", b"$3\r\nabc\r\n", b"$3\r\nabc\r\n"),
        (bytearray(b"ab"), b"$2\r\nab\r\n", b"$2\r\nab\r\n"),
        (42, b":42\r\n", b":42\r\n"),
        (-1, b":-1\r\n", b":-1\r\n"),
        (None, b"$-1\r\n", b"_\r\n"),
        (NULL_ARRAY, b"*-1\r\n", b"_\r\n"),
        ([b"a", 1, None], b"*3\r\n$1\r\na\r\n:1\r\n$-1\r\n", b"*3\r\n$1\r\na\r\n:1\r\n_\r\n"),
        (Status(b"OK"), b"+OK\r\n", b"+OK\r\n"),
        (OK, b"+OK\r\n", b"+OK\r\n"),
        (ReplyError("ERR bad"), b"-ERR bad\r\n", b"-ERR bad\r\n"),
        (True, b":1\r\n", b"#t\r\n"),
        (False, b":0\r\n", b"#f\r\n"),
        (Double(1.5), b"$3\r\n1.5\r\n", b",1.5\r\n"),
        (Double(0.1), b"$19\r\n0.10000000000000001\r\n", b",0.10000000000000001\r\n"),
        (Double(float("inf")), b"$3\r\ninf\r\n", b",inf\r\n"),
        (Double(float("-inf")), b"$4\r\n-inf\r\n", b",-inf\r\n"),
        (Map([(b"a", 1)]), b"*2\r\n$1\r\na\r\n:1\r\n", b"%1\r\n$1\r\na\r\n:1\r\n"),
        (Set([b"x"]), b"*1\r\n$1\r\nx\r\n", b"~1\r\n$1\r\nx\r\n"),
        (Push([b"message"]), b"*1\r\n$7\r\nmessage\r\n", b">1\r\n$7\r\nmessage\r\n"),
        (Verbatim(b"hi"), b"$2\r\nhi\r\n", b"=6\r\ntxt:hi\r\n"),
        (BigNumber(b"123"), b"$3\r\n123\r\n", b"(123\r\n"),
        ([[b"a"], []], b"*2\r\n*1\r\n$1\r\na\r\n*0\r\n", b"*2\r\n*1\r\n$1\r\na\r\n*0\r\n"),
        # both sides of the ready-made small encodings' bounds
        (b"", b"$0\r\n\r\n", b"$0\r\n\r\n"),
        (b"y" * 1023, b"$1023\r\n" + b"y" * 1023 + b"\r\n", b"$1023\r\n" + b"y" * 1023 + b"\r\n"),
        (b"y" * 1024, b"$1024\r\n" + b"y" * 1024 + b"\r\n", b"$1024\r\n" + b"y" * 1024 + b"\r\n"),
        (0, b":0\r\n", b":0\r\n"),
        (1023, b":1023\r\n", b":1023\r\n"),
        (1024, b":1024\r\n", b":1024\r\n"),
        (-1024, b":-1024\r\n", b":-1024\r\n"),
        (2**63 - 1, b":9223372036854775807\r\n", b":9223372036854775807\r\n"),
    ],
)
def test_encodings(value, resp2, resp3):
    assert encode(value, resp3=False) == resp2
    assert encode(value, resp3=True) == resp3
    # the client's entry point takes shortcuts for the common types
    for resp3_, expected in ((False, resp2), (True, resp3)):
        out: list[bytes] = []
        encode_into(value, out, resp3_)
        assert b"".join(out) == expected


def test_error_text_never_breaks_framing():
    assert encode(ReplyError("ERR a\r\nb")) == b"-ERR a  b\r\n"


# The array writers: compiled, reply.pxd writes the whole reply into one buffer in C; pure,
# they return None and the callers join as before. Either way the bytes must be the generic
# encoder's (bulk strings, scores as format_double: Redis's %.17g).
_VALUES = [b"", b"x", b"xxx", b"a\r\nb", b"\x00" * 9, b"y" * 10, b"z" * 99, b"w" * 100, b"v" * 4095,
           b"u" * 4096, b"t" * 10000]
_SCORES = [1.0, -1.0, 0.0, -0.0, 0.5, -2.25, 1e16, 1e16 + 2, 2.0**53 - 1, -(2.0**53 - 1), 2.0**53, -(2.0**53),
           2.0**60, 1e17, 123456789.0, 1e300, 5e-324, float("inf"), float("-inf"), 3.0e-5, 7.0, 10.0, 99.0]


def test_bulk_array_is_the_generic_encoding():
    from rill.protocol import reply

    for values in ([b"only"], _VALUES, [b"xxx"] * 100, [b"m:%d" % i for i in range(1000)]):
        got = reply.bulk_array(list(values))
        if not reply.C_ARRAYS:
            assert got is None
            continue
        assert type(got) is reply.Raw
        assert got == encode(list(values))
    if reply.C_ARRAYS:
        assert reply.bulk_array([]) == b"*0\r\n"
        # anything but bytes is left to the caller's general path
        assert reply.bulk_array([b"a", bytearray(b"b")]) is None
        assert reply.bulk_array([b"a", "b"]) is None


def test_ranged_array_is_the_generic_encoding():
    from rill.protocol import reply

    calls = []

    def fmt(score):
        calls.append(score)
        return reply.format_double(score)

    members = [_VALUES[i % len(_VALUES)] for i in range(len(_SCORES))]
    items = list(zip(_SCORES, members, strict=True))
    for withscores in (False, True):
        got = reply.ranged_array(items, withscores, fmt)
        if not reply.C_ARRAYS:
            assert got is None
            continue
        flat = [x for s, m in items for x in ((m, reply.format_double(s)) if withscores else (m,))]
        assert type(got) is reply.Raw
        assert got == encode(flat)
    if reply.C_ARRAYS:
        # integral scores under 2**53 (but zero, which may be -0.0) are written as digits, no call
        assert sorted(map(repr, calls)) == sorted(
            repr(s) for s in _SCORES if s == 0 or not abs(s) < 2.0**53 or s != int(s))
        assert reply.ranged_array([], True, fmt) == b"*0\r\n"
        assert reply.ranged_array([(1.0, bytearray(b"m"))], True, fmt) is None
        assert reply.ranged_array([(1.0, b"m", 0)], False, fmt) is None
        assert reply.ranged_array([[1.0, b"m"]], False, fmt) is None
