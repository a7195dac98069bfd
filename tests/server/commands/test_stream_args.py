"""stream_args.parse_id (and parse_ids, its batch form), whichever mode runs (CI runs both): compiled, its common case is
stream_args.pxd's C loop, which must accept and refuse exactly what the interpreted form
does (partition, isdigit, int, then the general parser for anything else)."""

from __future__ import annotations

import random

import pytest
from rill.protocol.reply import ReplyError
from rill.server.commands.stream_args import _parse_id_slow, parse_id, parse_ids

M = (1 << 64) - 1


def _reference(arg: bytes, missing_seq: int, strict: bool) -> int:
    """The interpreted form of parse_id."""
    ms, dash, seq = arg.partition(b"-")
    if ms.isdigit() and len(arg) < 128:
        if dash:
            if seq.isdigit() and int(ms) <= M and int(seq) <= M:
                return (int(ms) << 64) | int(seq)
        elif int(ms) <= M:
            return (int(ms) << 64) | missing_seq
    return _parse_id_slow(arg, missing_seq, strict, False)[0]


def _outcome(f, arg: bytes, missing_seq: int, strict: bool) -> int | str:
    try:
        return f(arg, missing_seq, strict)
    except ReplyError as e:
        return str(e)


EDGES = [
    b"", b"-", b"+", b"0", b"0-0", b"1-", b"-1", b"1--1", b"1-1-1", b"1-*", b"1.5", b"1e5",
    b"18446744073709551615-18446744073709551615", b"18446744073709551616-0", b"0-18446744073709551616",
    b"18446744073709551615", b"18446744073709551616", b"99999999999999999999",
    b"00000000000000000000000000001-0001", b" 1-1", b"1-1 ", b"+1-1", b"1-+1", b"1\x00-1",
    b"1-1\x00x", b"1a", b"\xd9\xa1", b"1" * 127, b"1" * 128, b"1-" + b"0" * 125, b"1-" + b"0" * 126,
    b"1700000000000-1",
]


@pytest.mark.parametrize("arg", EDGES)
def test_parse_id_edges(arg: bytes) -> None:
    for missing_seq in (0, M):
        for strict in (True, False):
            assert _outcome(parse_id, arg, missing_seq, strict) == _outcome(_reference, arg, missing_seq, strict)


def test_parse_id_exact_values() -> None:
    assert parse_id(b"1700000000000-7") == (1700000000000 << 64) | 7
    assert parse_id(b"5", M) == (5 << 64) | M
    assert parse_id(b"18446744073709551615-18446744073709551615") == (M << 64) | M
    assert parse_id(b"0-0") == 0
    with pytest.raises(ReplyError):
        parse_id(b"18446744073709551616-0")


def test_parse_id_random() -> None:
    rng = random.Random(24)
    alphabet = b"0123456789-+ \x00a*"
    args = [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 24))) for _ in range(20000)]
    args += [b"%d-%d" % (rng.randint(0, M + 5), rng.randint(0, M + 5)) for _ in range(5000)]
    for arg in args:
        for missing_seq in (0, M):
            assert _outcome(parse_id, arg, missing_seq, True) == _outcome(_reference, arg, missing_seq, True)


def test_parse_ids_is_parse_id_of_each() -> None:
    """XACK's batch form: each ID as parse_id reads it (strict, missing seq 0), and the
    first bad one in argument order raises parse_id's error."""
    good = [e for e in EDGES if not isinstance(_outcome(_reference, e, 0, True), str)]
    assert parse_ids(good) == [parse_id(e) for e in good]
    assert parse_ids([]) == []
    for bad in (e for e in EDGES if isinstance(_outcome(_reference, e, 0, True), str)):
        with pytest.raises(ReplyError) as got:
            parse_ids([b"1-1", bad, b"x"])
        assert str(got.value) == _outcome(_reference, bad, 0, True)
