"""The request parser: Redis's framing rules and exact protocol errors, fed any way."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rill.protocol.numbers import string2ll
from rill.protocol.parser import ProtocolError, RequestParser, split_args


def enc(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def feed_all(parser: RequestParser, chunks) -> list:
    out = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    return out


def chunked(data: bytes, sizes: list[int]) -> list[bytes]:
    """``data`` cut into reads of the given sizes, repeated as needed."""
    chunks, i, k = [], 0, 0
    while i < len(data):
        n = sizes[k % len(sizes)]
        chunks.append(data[i : i + n])
        i += n
        k += 1
    return chunks


def errors(out: list) -> list[bytes]:
    return [x.message for x in out if isinstance(x, ProtocolError)]


@pytest.mark.parametrize("hiredis", [True, False])
def test_multibulk_and_inline(hiredis):
    p = RequestParser()
    if not hiredis:
        p._reader = None
    out = p.feed(enc(b"SET", b"k", b"v") + b"PING\r\n" + enc(b"GET", b"k") + b"ECHO \"a b\"\n")
    assert out == [[b"SET", b"k", b"v"], [b"PING"], [b"GET", b"k"], [b"ECHO", b"a b"]]


def test_byte_by_byte():
    data = enc(b"SET", b"key", b"x" * 300) + b"PING\r\n" + enc(b"GET", b"key")
    p = RequestParser()
    out = feed_all(p, [data[i : i + 1] for i in range(len(data))])
    assert out == [[b"SET", b"key", b"x" * 300], [b"PING"], [b"GET", b"key"]]
    assert p.pending_bytes() == 0


def test_ten_thousand_command_pipeline():
    cmds = [[b"SET", b"k%d" % i, b"v" * (i % 50)] for i in range(10_000)]
    data = b"".join(enc(*c) for c in cmds)
    p = RequestParser()
    out = feed_all(p, [data[i : i + 4096] for i in range(0, len(data), 4096)])
    assert out == cmds


def test_empty_and_negative_multibulk_are_skipped():
    p = RequestParser()
    assert p.feed(b"*0\r\n*-1\r\n" + enc(b"PING") + b"\r\n\r\n") == [[b"PING"]]


@given(st.lists(st.lists(st.binary(max_size=40), min_size=1, max_size=5), min_size=1, max_size=20),
       st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=50))
@settings(max_examples=200, deadline=None)
def test_any_chunking_gives_the_same_commands(cmds, sizes):
    data = b"".join(enc(*c) for c in cmds)
    chunks = chunked(data, sizes)
    assert feed_all(RequestParser(), chunks) == cmds


@given(st.lists(st.lists(st.binary(max_size=3000), min_size=1, max_size=6), min_size=1, max_size=40),
       st.lists(st.integers(min_value=4097, max_value=12000), min_size=1, max_size=10), st.integers(1, 4096))
@settings(max_examples=100, deadline=None)
def test_big_chunks_continuing_a_command_give_the_same_commands(cmds, sizes, first):
    # Past _RESUME_MIN, once the reference parser completes the command a chunk continues,
    # the rest of the chunk goes back to the fast path (compiled, the scan; interpreted, hiredis).
    data = b"".join(enc(*c) for c in cmds)
    chunks = [data[:first]] + chunked(data[first:], sizes)
    assert feed_all(RequestParser(), chunks) == cmds


def test_a_big_chunk_continuing_a_command_keeps_inline_commands_and_errors_in_place():
    cmds = [[b"SET", b"k%d" % i, b"v" * 200] for i in range(60)]
    data = b"".join(enc(*c) for c in cmds) + b"PING x\r\n" + enc(b"GET", b"k") + b"*1\r\n:5\r\n" + enc(b"GET", b"z")
    p = RequestParser()
    out = p.feed(data[:100]) + p.feed(data[100:])
    assert out[:-1] == cmds + [[b"PING", b"x"], [b"GET", b"k"]]
    assert type(out[-1]) is ProtocolError and out[-1].message == b"ERR Protocol error: expected '$', got ':'"


@pytest.mark.parametrize(
    "data,message",
    [
        (b"*3000000000\r\n", b"invalid multibulk length"),
        (b"*abc\r\n", b"invalid multibulk length"),
        (b"*+1\r\n", b"invalid multibulk length"),
        (b"*01\r\n", b"invalid multibulk length"),
        (b"*1\r\nfoo\r\n", b"expected '$', got 'f'"),
        (b"*1\r\n:5\r\n", b"expected '$', got ':'"),
        (b"*1\r\n+PING\r\n", b"expected '$', got '+'"),
        (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n", b"invalid bulk length"),
        (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$2000000000\r\n", b"invalid bulk length"),
        (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n", b"invalid bulk length"),
        (b"*20\r\n$" + b"1" * 70000, b"too big bulk count string"),
        (b"*" + b"1" * 70000, b"too big mbulk count string"),
        (b"x" * 70000, b"too big inline request"),
        (b"SET k \"unbalanced\r\n", b"unbalanced quotes in request"),
        (b"SET k \"a\"b\r\n", b"unbalanced quotes in request"),
        (b"SET k 'a\r\n", b"unbalanced quotes in request"),
    ],
)
def test_protocol_errors(data, message):
    for split in (False, True):
        p = RequestParser()
        out = feed_all(p, [data[i : i + 7] for i in range(0, len(data), 7)] if split else [data])
        assert errors(out) == [b"ERR Protocol error: " + message]
        assert p.feed(b"PING\r\n") == []  # nothing is parsed after a protocol error


def test_commands_before_an_error_are_kept():
    out = RequestParser().feed(enc(b"PING") + b"*1\r\nfoo\r\n" + enc(b"PING"))
    assert out[0] == [b"PING"]
    assert isinstance(out[1], ProtocolError) and len(out) == 2


def test_bulk_limit_follows_proto_max_bulk_len():
    p = RequestParser(max_bulk_len=1024 * 1024)
    out = p.feed(b"*2\r\n$3\r\nGET\r\n$2000000\r\n")
    assert errors(out) == [b"ERR Protocol error: invalid bulk length"]


def test_unauthenticated_limits():
    p = RequestParser()
    p.auth_required = True
    assert errors(p.feed(b"*11\r\n")) == [b"ERR Protocol error: unauthenticated multibulk length"]
    p = RequestParser()
    p.auth_required = True
    assert errors(p.feed(b"*2\r\n$4\r\nAUTH\r\n$20000\r\n")) == [
        b"ERR Protocol error: unauthenticated bulk length"
    ]


@pytest.mark.parametrize(
    "line,args",
    [
        (b"set a b", [b"set", b"a", b"b"]),
        (b"  set   a\tb  ", [b"set", b"a", b"b"]),
        (b'set "a b" c', [b"set", b"a b", b"c"]),
        (b'set "\\x41\\n\\t\\"" x', [b"set", b"A\n\t\"", b"x"]),
        (b"set 'a \\' b' c", [b"set", b"a ' b", b"c"]),
        (b'set ""', [b"set", b""]),
        (b"", []),
    ],
)
def test_split_args(line, args):
    assert split_args(line) == args


@pytest.mark.parametrize(
    "args",
    [
        [b"SET", b"k", b"+OK"],  # '+' and '=' inside data are not simple-string lines
        [b"SET", b"a=b", b"x+y"],
        [b"SET", b"k", b"x\n+OK\r\n"],  # a line start inside data only costs the fast path
        [b"SET", b"k", b"*1234567"],
        [b"SET", b"k", b"1234567890"],
    ],
)
def test_guarded_bytes_inside_data_parse_the_same(args):
    data = enc(*args) + enc(b"GET", b"k")
    for hiredis in (True, False):
        p = RequestParser()
        if not hiredis:
            p._reader = None
        assert p.feed(data) == [args, [b"GET", b"k"]]
        assert p.pending_bytes() == 0


@pytest.mark.parametrize("tail", [b"*1\r\n:5\r\n", b"*2\r\n$3\r\nGET\r\n$-1\r\n", b"*1\r\n*1\r\n$1\r\nx\r\n",
                                  b"*1\r\n-ERR\r\n", b"*1\r\n+PING\r\n", b"*1\r\n_\r\n"])
@pytest.mark.parametrize("size", [10, 100_000])
def test_non_bulk_elements_after_good_commands(tail, size):
    # Small and big chunks take different element checks on the hiredis path;
    # both hand the odd command to the reference parser at its first byte.
    good = enc(b"SET", b"k", b"v" * size)
    out = RequestParser().feed(good + tail)
    assert out[0] == [b"SET", b"k", b"v" * size]
    assert len(out) == 2 and isinstance(out[1], ProtocolError)


def test_huge_multibulk_header_waits_without_allocating():
    p = RequestParser()
    assert p.feed(enc(b"PING") + b"*2000000000\r\n$3\r\nSET\r\n") == [[b"PING"]]
    # the reference parser holds the partial command (hiredis would have sized a
    # two-billion-slot list for it)
    assert p._argv == [b"SET"] and p._remaining == 2_000_000_000 - 1


def test_split_args_keeps_vertical_tab_and_form_feed_inside_an_argument():
    # sdssplitargs skips any isspace() byte between arguments, but an unquoted argument
    # ends only at space, tab, CR, LF or NUL.
    assert split_args(b"ECHO\x0cs1\x0c\"v w\" ") == [b"ECHO\x0cs1\x0cv w"]
    assert split_args(b"\x0b\x0cECHO\x0b  a") == [b"ECHO\x0b", b"a"]
    assert split_args(b'ECHO "a"\x0b') == [b"ECHO", b"a"]


def test_inline_line_with_a_nul_before_its_newline_is_incomplete():
    p = RequestParser()
    assert p.feed(b"PING\x00\r\nPING\r\n") == []
    assert errors(p.feed(b"x" * 70000)) == [b"ERR Protocol error: too big inline request"]


def test_a_chunk_after_a_bulk_length_continues_that_command():
    # The first chunk ends right after "$2\r\n": the reference parser holds the command
    # with nothing buffered, and the next chunk's "*1" is that bulk's data, not a header.
    for hiredis in (True, False):
        p = RequestParser()
        if not hiredis:
            p._reader = None
        assert p.feed(b"*2\r\n$3\r\nGET\r\n$2\r\n") == []
        assert p.feed(b"*1\r\n$4\r\nPING\r\n") == [[b"GET", b"*1"], [b"$4"], [b"PING"]]


@pytest.mark.parametrize("args", [[b"XRANGE", b"s", b"-", b"+"], [b"ZRANGEBYSCORE", b"z", b"-inf", b"+inf"],
                                  [b"SET", b"+", b"\n+"]])
def test_bulk_arguments_starting_with_plus_parse_the_same(args):
    # A bulk "+" starts a line with '+' as a simple-string element would: hiredis may
    # parse the chunk, and the size of what it returned tells the two apart.
    data = enc(*args) + enc(b"GET", b"k")
    for hiredis in (True, False):
        p = RequestParser()
        if not hiredis:
            p._reader = None
        assert p.feed(data) == [args, [b"GET", b"k"]]
    out = RequestParser().feed(data + b"*2\r\n$3\r\nGET\r\n+OK\r\n" + enc(b"PING"))
    assert out[:2] == [args, [b"GET", b"k"]]
    assert errors(out[2:]) == [b"ERR Protocol error: expected '$', got '+'"]


_HEADERS = [
    b"0", b"1", b"-1", b"-0", b"01", b"+1", b" 1", b"1 ", b"", b"-", b"12a", b"9" * 19, b"1" + b"0" * 19,
    b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808", b"-9223372036854775809",
    b"18446744073709551616", b"-18446744073709551616", b"99999999999999999999",
]


@pytest.mark.parametrize("header", _HEADERS)
def test_length_headers_follow_string2ll(header):
    """The parser reads length headers in place (compiled: a C loop); what it accepts is
    exactly what string2ll does."""
    value = string2ll(header)

    def parse(data: bytes) -> list:  # a byte at a time: the reference path, not hiredis's
        return feed_all(RequestParser(), [data[i : i + 1] for i in range(len(data))])

    out = parse(b"*" + header + b"\r\n" + enc(b"PING"))
    if value is None or value > 2**31 - 1:
        assert errors(out) == [b"ERR Protocol error: invalid multibulk length"]
    elif value <= 0:
        assert out == [[b"PING"]]  # an empty or null multibulk is skipped
    else:
        assert parse(b"*" + header + b"\r\n") == []  # waits for its arguments
    out = parse(b"*2\r\n$3\r\nGET\r\n$" + header + b"\r\n")
    if value is None or value < 0 or value > 512 * 1024 * 1024:
        assert errors(out) == [b"ERR Protocol error: invalid bulk length"]
    else:
        assert out == []  # waits for the argument's bytes


def reference(chunks, max_bulk_len: int = 512 * 1024 * 1024) -> tuple[list, tuple]:
    """What the reference parser alone (``_parse``, no hiredis, no scan) makes of ``chunks``,
    and the state it is left in."""
    p = RequestParser(max_bulk_len)
    out: list = []
    for chunk in chunks:
        if p.failed:
            break
        p._buf += chunk
        p._parse(out)
    return out, (bytes(p._buf), p._argv, p._remaining, p._bulklen, p._argv_bytes)


def fed(chunks, max_bulk_len: int = 512 * 1024 * 1024) -> tuple[list, tuple]:
    p = RequestParser(max_bulk_len)
    out = feed_all(p, chunks)
    return out, (bytes(p._buf), p._argv, p._remaining, p._bulklen, p._argv_bytes)


def same(a: list, b: list) -> bool:
    return [x.message if type(x) is ProtocolError else x for x in a] == [
        x.message if type(x) is ProtocolError else x for x in b]


# Pieces of a request stream: whole commands, and what the scan must leave to the reference
# parser (inline lines, empty and null multibulks, non-canonical or over-limit lengths,
# elements other than bulk strings, a missing LF, a huge count).
_ODD = [b"PING\r\n", b"GET 'a b'\n", b"*0\r\n", b"*-1\r\n", b"*01\r\n$1\r\nx\r\n", b"*1\r\n$01\r\nx\r\n",
        b"*1\r\n$-1\r\n", b"*1\r\n:5\r\n", b"*1\r\n+OK\r\n", b"*1\r\n=5\r\n", b"*1\rX$1\r\nx\r\n",
        b"*1\r\n$1\rXx\r\n", b"*1\r\n$1\r\nxAB", b"*1\r\n$100\r\n" + b"y" * 102, b"*12345678\r\n",
        b"*2\r\n$3\r\nGET\r\n", b"\r\n", b"*1\r\n$0\r\n\r\n", b"*1\r\n$" + b"9" * 19 + b"\r\n"]


@given(st.lists(st.one_of(st.lists(st.binary(max_size=30), min_size=1, max_size=4).map(lambda a: enc(*a)),
                          st.sampled_from(_ODD)), min_size=1, max_size=12),
       st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=20))
@settings(max_examples=300, deadline=None)
def test_feed_matches_the_reference_parser_on_any_chunking(pieces, sizes):
    # Compiled, feed() scans whole commands straight from each read and leaves the rest to
    # the reference parser; whatever it does, commands, errors and the state left for the
    # next read are the reference's (a max bulk length of 50 puts the limit in reach).
    data = b"".join(pieces)
    chunks = chunked(data, sizes)
    got, state = fed(chunks, 50)
    want, want_state = reference(chunks, 50)
    assert same(got, want)
    if not want or type(want[-1]) is not ProtocolError:
        assert state == want_state


@pytest.mark.parametrize("data,taken", [
    (enc(b"GET", b"k") + enc(b"PING"), 2),
    (enc(b"GET", b"k") + b"PING\r\n", 1),
    (enc(b"GET", b"k") + b"*1\r\n$4\r\nPIN", 1),
    (enc(b"GET", b"k") + b"*0\r\n" + enc(b"PING"), 1),
    (b"*1\r\n$04\r\nPING\r\n", 0),
    (enc(b"SET", b"k", b"v" * 11), 0),  # past max_bulk
])
def test_the_scan_stops_at_the_first_command_it_leaves_to_the_reference(data, taken):
    from rill.protocol.parser import _scan
    out: list = []
    pos = _scan(data, 0, 10, out)
    assert len(out) == taken
    assert pos == sum(len(enc(*c)) for c in out)
