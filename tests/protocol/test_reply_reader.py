"""The RESP2 reply reader the outgoing links use."""

from __future__ import annotations

import pytest
from rill.protocol.reply_reader import INCOMPLETE, ErrorReply, ReplyProtocolError, ReplyReader


def read_all(data: bytes) -> list:
    r = ReplyReader()
    r.feed(data)
    out = []
    while (v := r.gets()) is not INCOMPLETE:
        out.append(v)
    return out


def test_every_reply_type():
    got = read_all(b"+OK\r\n-ERR no\r\n:-42\r\n$3\r\na\r\n\r\n$-1\r\n*-1\r\n*2\r\n:1\r\n*1\r\n$0\r\n\r\n")
    assert got == [b"OK", b"ERR no", -42, b"a\r\n", None, None, [1, [b""]]]
    assert type(got[1]) is ErrorReply and type(got[0]) is bytes


def test_replies_split_anywhere_come_out_whole_and_in_order():
    data = b"*2\r\n:7\r\n$5\r\n1:3,2\r\n:8\r\n+OK\r\n"
    for cut in range(len(data) + 1):
        r = ReplyReader()
        out = []
        for part in (data[:cut], data[cut:]):
            r.feed(part)
            while (v := r.gets()) is not INCOMPLETE:
                out.append(v)
        assert out == [[7, b"1:3,2"], 8, b"OK"], cut


@pytest.mark.parametrize("data", [b"!3\r\nabc\r\n", b":x\r\n", b"$3\r\nabcd\r\n", b"*1\r\n" * 9 + b":1\r\n"])
def test_what_is_not_resp2_is_refused(data):
    with pytest.raises(ReplyProtocolError):
        read_all(data)


def test_integers_take_the_integer_replies_in_front_and_gets_goes_on():
    data = b":1\r\n:-2\r\n:3\r\n+OK\r\n:4\r\n:5"
    for cut in range(len(data) + 1):
        r = ReplyReader()
        out = []
        for part in (data[:cut], data[cut:]):
            r.feed(part)
            while True:
                ints = r.integers()
                out += ints
                if ints:
                    continue
                v = r.gets()
                if v is INCOMPLETE:
                    break
                out.append(v)
        assert out == [1, -2, 3, b"OK", 4], cut
    r = ReplyReader()
    r.feed(b":x\r\n")
    with pytest.raises(ReplyProtocolError):
        r.integers()
