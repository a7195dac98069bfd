"""Stream entry replies: both encoders of protocol/stream_entries.py give the bytes the
general reply encoder gives for ``[id, [f1, v1, ...]]``, in RESP2 and RESP3."""

from __future__ import annotations

import pytest
from rill.protocol.reply import encode
from rill.protocol.stream_entries import RESP_ENTRIES, array_head, encode_entry, entries_bytes

MASK64 = (1 << 64) - 1


def reference(sid: int, fv: list[bytes], resp3: bool = False) -> bytes:
    """The entry through the general encoder, without the trailing CRLF."""
    return encode([b"%d-%d" % (sid >> 64, sid & MASK64), list(fv)], resp3)[:-2]


FIELD_VALUES = [
    [],
    [b"f", b"v"],
    [b"a", b"1", b"b", b""],
    [b"x", b"y" * 1500, b"z" * 70, b"-12"],
    [b"k%d" % i for i in range(1100)],
]


@pytest.mark.parametrize("resp3", [False, True])
@pytest.mark.parametrize("fv", FIELD_VALUES, ids=len)
@pytest.mark.parametrize("sid", [0, (1 << 64) | 7, (MASK64 << 64) | MASK64])
def test_encode_entry_is_the_general_encoding(sid, fv, resp3):
    assert encode_entry(sid, fv) == reference(sid, fv, resp3)


def test_entries_bytes_is_an_array_of_entries():
    ents = [(1 << 64, [b"f", b"v"]), (2 << 64, [b"f", b"w", b"g", b"x"])]
    assert entries_bytes(ents) == encode([[b"1-0", [b"f", b"v"]], [b"2-0", [b"f", b"w", b"g", b"x"]]])[:-2]
    assert entries_bytes([]) == b"*0"
    assert array_head(3) == b"*3" and array_head(5000) == b"*5000"


def test_small_integer_pieces_are_complete_bulk_strings():
    ints = RESP_ENTRIES.ints
    assert len(ints) == 8192
    for v in range(-4096, 4096):
        assert ints[v & 0x1FFF] == encode(b"%d" % v)[:-2]


def test_string_heads_are_bulk_headers():
    for n in range(64):
        assert RESP_ENTRIES.str_heads[n] + b"x" * n == encode(b"x" * n)[:-2]
    assert RESP_ENTRIES.value_head(100000) + b"x" * 100000 == encode(b"x" * 100000)[:-2]


def pieces_of(sid: int, fields: list[bytes], values: list[bytes], same: bool) -> bytes:
    """An entry assembled from the pieces as a node reader appends them."""
    enc = RESP_ENTRIES
    idb = b"%d-%d" % (sid >> 64, sid & MASK64)
    out = [enc.id_heads[len(idb)], idb]
    if same:
        pre = enc.field_heads(fields)
        if not fields:
            out.append(pre[0])
        for head, v in zip(pre[: len(fields)], values, strict=True):
            out += [head, enc.value_head(len(v)), v]
    else:
        out.append(enc.fields_values([x for pair in zip(fields, values, strict=True) for x in pair]))
    return b"".join(out)


@pytest.mark.parametrize("same", [False, True])
@pytest.mark.parametrize("n", [0, 1, 3])
def test_pieces_join_into_the_entry_with_a_leading_crlf(same, n):
    fields = [b"field%d" % i for i in range(n)]
    values = [b"v" * (i * 40) for i in range(n)]
    sid = (1700000000000 << 64) | 3
    fv = [x for pair in zip(fields, values, strict=True) for x in pair]
    assert pieces_of(sid, fields, values, same) == b"\r\n" + reference(sid, fv)


def test_id_heads_cover_the_longest_id():
    longest = b"%d-%d" % (MASK64, MASK64)
    assert RESP_ENTRIES.id_heads[len(longest)] == b"\r\n*2\r\n$%d\r\n" % len(longest)
