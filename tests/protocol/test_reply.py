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
