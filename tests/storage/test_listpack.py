"""Listpack byte format: known vectors from Redis, a spec-level reference encoder, round trips,
backward walks and validation of corrupted blobs."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rill.storage import listpack as L

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


# ------------------------------------------------------------------------------------------
# A deliberately plain reference encoder, written from the format table (not from listpack.py)
# ------------------------------------------------------------------------------------------


def ref_is_int(s: bytes) -> int | None:
    if not 1 <= len(s) <= 20:
        return None
    txt = s.decode("latin-1")
    body = txt[1:] if txt.startswith("-") else txt
    if not body or any(c not in "0123456789" for c in body):
        return None
    if body != "0" and body[0] == "0":
        return None
    if txt == "-0":
        return None
    v = int(txt)
    return v if INT64_MIN <= v <= INT64_MAX else None


def ref_backlen(n: int) -> bytes:
    if n <= 127:
        return bytes([n])
    if n < 16383:
        return bytes([n >> 7, (n & 127) | 128])
    if n < 2097151:
        return bytes([n >> 14, ((n >> 7) & 127) | 128, (n & 127) | 128])
    if n < 268435455:
        return bytes([n >> 21, ((n >> 14) & 127) | 128, ((n >> 7) & 127) | 128, (n & 127) | 128])
    return bytes(
        [
            n >> 28,
            ((n >> 21) & 127) | 128,
            ((n >> 14) & 127) | 128,
            ((n >> 7) & 127) | 128,
            (n & 127) | 128,
        ]
    )


def ref_encode(value: bytes | int) -> bytes:
    if isinstance(value, bytes):
        iv = ref_is_int(value)
        if iv is None:
            n = len(value)
            if n < 64:
                enc = bytes([0x80 | n]) + value
            elif n < 4096:
                enc = bytes([0xE0 | (n >> 8), n & 0xFF]) + value
            else:
                enc = b"\xf0" + struct.pack("<I", n) + value
            return enc + ref_backlen(len(enc))
        value = iv
    v = value
    if 0 <= v <= 127:
        enc = bytes([v])
    elif -4096 <= v <= 4095:
        u = v % 8192
        enc = bytes([0xC0 | (u >> 8), u & 0xFF])
    elif -(1 << 15) <= v < (1 << 15):
        enc = b"\xf1" + struct.pack("<h", v)
    elif -(1 << 23) <= v < (1 << 23):
        enc = b"\xf2" + (v % (1 << 24)).to_bytes(3, "little")
    elif -(1 << 31) <= v < (1 << 31):
        enc = b"\xf3" + struct.pack("<i", v)
    else:
        enc = b"\xf4" + struct.pack("<q", v)
    return enc + ref_backlen(len(enc))


def ref_build(values: list[bytes | int]) -> bytes:
    body = b"".join(ref_encode(v) for v in values)
    total = 6 + len(body) + 1
    return struct.pack("<IH", total, min(len(values), 65535)) + body + b"\xff"


def canon(v: bytes | int) -> bytes | int:
    """What a value decodes back to: canonical integer strings come back as ints."""
    if isinstance(v, bytes):
        iv = ref_is_int(v)
        return v if iv is None else iv
    return v


values_st = st.one_of(
    st.integers(INT64_MIN, INT64_MAX),
    st.integers(-70000, 70000),
    st.binary(max_size=80),
    st.integers(INT64_MIN, INT64_MAX).map(lambda i: str(i).encode()),
    st.sampled_from([b"-0", b"007", b"+1", b" 1", b"1 ", b"-", b"0", b"", b"-01", b"1.5"]),
    st.binary(min_size=60, max_size=70),
    st.binary(min_size=4090, max_size=4100),
)


# ------------------------------------------------------------------------------------------
# Known vectors
# ------------------------------------------------------------------------------------------


def test_empty_listpack():
    assert bytes(L.new()) == bytes.fromhex("07 00 00 00 00 00 ff")
    assert L.EMPTY == bytes.fromhex("07000000 0000 ff")
    assert L.length(L.new()) == 0
    assert L.first(L.EMPTY) is None and L.last(L.EMPTY) is None
    assert L.validate(L.EMPTY, deep=True)


@pytest.mark.parametrize(
    "value, hexbytes",
    [
        (b"ab", "82 61 62 03"),
        (5, "05 01"),
        (b"5", "05 01"),
        (0, "00 01"),
        (127, "7f 01"),
        (128, "c0 80 02"),
        (-1, "df ff 02"),  # the seq-diff -1 seen in a live dump
        (4095, "cf ff 02"),
        (-4096, "d0 00 02"),
        (4096, "f1 00 10 03"),
        (-4097, "f1 ff ef 03"),
        (32767, "f1 ff 7f 03"),
        (-32768, "f1 00 80 03"),
        (32768, "f2 00 80 00 04"),
        (-32769, "f2 ff 7f ff 04"),
        (8388607, "f2 ff ff 7f 04"),
        (8388608, "f3 00 00 80 00 05"),
        (-8388609, "f3 ff ff 7f ff 05"),
        (2147483647, "f3 ff ff ff 7f 05"),
        (2147483648, "f4 00 00 00 80 00 00 00 00 09"),
        (INT64_MAX, "f4 ff ff ff ff ff ff ff 7f 09"),
        (INT64_MIN, "f4 00 00 00 00 00 00 00 80 09"),
        (b"", "80 01"),
        (b"-0", "82 2d 30 03"),
        (b"007", "83 30 30 37 04"),
        (b"+1", "82 2b 31 03"),
        (b"9223372036854775808", "93" + b"9223372036854775808".hex() + "14"),
    ],
)
def test_element_vectors(value, hexbytes):
    assert L.element(value) == bytes.fromhex(hexbytes)


def test_string_length_boundaries():
    s63 = b"x" * 63
    assert L.element(s63) == b"\xbf" + s63 + b"\x40"
    s64 = b"x" * 64
    assert L.element(s64) == b"\xe0\x40" + s64 + b"\x42"
    s125 = b"x" * 125  # encoding+data = 127: still a 1-byte backlen
    assert L.element(s125)[-1:] == b"\x7f"
    s126 = b"x" * 126  # encoding+data = 128: 2-byte backlen
    assert L.element(s126)[-2:] == b"\x01\x80"
    s4095 = b"y" * 4095
    e = L.element(s4095)
    assert e[:2] == b"\xef\xff" and e[-2:] == bytes([4097 >> 7, (4097 & 127) | 128])
    s4096 = b"z" * 4096
    e = L.element(s4096)
    assert e[:5] == b"\xf0\x00\x10\x00\x00" and e[5:-2] == s4096
    assert e[-2:] == bytes([4101 >> 7, (4101 & 127) | 128])


@pytest.mark.parametrize(
    "n, hexbytes",
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "01 80"),
        (16382, "7f fe"),
        (16383, "00 ff ff"),  # Redis's '<' threshold: 16383 already takes 3 bytes
        (2097150, "7f ff fe"),
        (2097151, "00 ff ff ff"),
        (268435454, "7f ff ff fe"),
        (268435455, "00 ff ff ff ff"),
        (1 << 32, "10 80 80 80 80"),
    ],
)
def test_backlen_vectors(n, hexbytes):
    enc = L.encode_backlen(n)
    assert enc == bytes.fromhex(hexbytes)
    assert L.backlen_size(n) == len(enc)
    assert L.decode_backlen(enc, len(enc) - 1) == (n, len(enc))
    assert L.decode_backlen(b"\xaa" + enc, len(enc)) == (n, len(enc))


@given(st.integers(0, (1 << 35) - 1))
def test_backlen_roundtrip(n):
    enc = L.encode_backlen(n)
    assert enc == ref_backlen(n)
    assert L.decode_backlen(enc, len(enc) - 1) == (n, len(enc))


def test_decode_backlen_rejects_six_bytes():
    with pytest.raises(L.ListpackError):
        L.decode_backlen(b"\x80\x80\x80\x80\x80\x80", 5)


@pytest.mark.parametrize(
    "s, expected",
    [
        (b"0", 0),
        (b"1", 1),
        (b"-1", -1),
        (b"9223372036854775807", INT64_MAX),
        (b"-9223372036854775808", INT64_MIN),
        (b"9223372036854775808", None),
        (b"-9223372036854775809", None),
        (b"18446744073709551616", None),
        (b"-0", None),
        (b"007", None),
        (b"00", None),
        (b"-01", None),
        (b"+1", None),
        (b" 1", None),
        (b"1 ", None),
        (b"-", None),
        (b"", None),
        (b"1.5", None),
        (b"12a", None),
        (b"1_000", None),
        (b"\xef\xbc\x91", None),  # fullwidth digit one
        (b"1" * 21, None),
        (b"-" + b"1" * 19, -int("1" * 19)),
    ],
)
def test_string_to_int64(s, expected):
    assert L.string_to_int64(s) == expected


@given(st.binary(max_size=22))
def test_string_to_int64_matches_reference(s):
    assert L.string_to_int64(s) == ref_is_int(s)


@given(st.integers(INT64_MIN, INT64_MAX))
def test_int_strings_are_int_encoded(v):
    assert L.element(str(v).encode()) == L.int_element(v) == ref_encode(v)


# ------------------------------------------------------------------------------------------
# Round trips
# ------------------------------------------------------------------------------------------


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(values_st, max_size=30))
def test_build_matches_reference_and_roundtrips(values):
    lp = L.build(values)
    assert bytes(lp) == ref_build(values)
    expected = [canon(v) for v in values]
    assert L.elements(lp) == expected
    assert L.elements(bytes(lp)) == expected
    assert list(L.iterate_reverse(lp)) == expected[::-1]
    assert L.length(lp) == len(values) == L.num_elements(lp)
    assert L.total_bytes(lp) == len(lp)
    assert L.validate(lp, deep=True)
    # appending one by one gives the same bytes
    lp2 = L.new()
    for v in values:
        L.append(lp2, v)
    assert lp2 == lp


bytes_st = values_st.map(lambda v: b"%d" % v if isinstance(v, int) else v)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(bytes_st, max_size=30))
def test_pack_is_build_and_unpack_reads_it_back(values):
    """pack() is build() for a whole collection of byte strings; unpack() gives them back."""
    lp = L.pack(values)
    assert lp == bytes(L.build(values)) == ref_build(values)
    assert L.unpack(lp) == [L.value_bytes(canon(v)) for v in values] == values


def test_pack_limits():
    values = [b"a" * 10, b"12", b"b" * 30]
    assert L.pack(values, budget=42) == bytes(L.build(values))
    assert L.pack(values, budget=41) is None  # the total length passes the budget
    assert L.pack(values, threshold=31) == bytes(L.build(values))
    assert L.pack(values, threshold=30) is None  # one value reaches the threshold


def test_unpack_saturated_count_and_rejects():
    values = [b"%d" % i for i in range(70000)]
    lp = L.pack(values)
    assert lp[4:6] == b"\xff\xff"
    assert L.unpack(lp) == values
    good = L.pack([b"f", b"1", b"g", b"-2"])
    assert L.unpack(good[:-2] + b"\xff") is None  # the last element overruns the EOF
    assert L.unpack(good[:4] + b"\x05\x00" + good[6:]) is None  # header count disagrees
    assert L.unpack(good[:-1] + b"\x00") is None  # no EOF byte
    bad = bytearray(good)
    bad[6] = 0xF5  # an encoding no listpack uses
    assert L.unpack(bytes(bad)) is None


@settings(max_examples=100)
@given(st.lists(bytes_st, min_size=1, max_size=10), st.data())
def test_unpack_never_raises_on_corruption(values, data):
    lp = bytearray(L.pack(values))
    pos = data.draw(st.integers(0, len(lp) - 1))
    lp[pos] = data.draw(st.integers(0, 255))
    out = L.unpack(bytes(lp))
    assert out is None or all(type(v) is bytes for v in out)
    assert L.unpack(bytes(lp[:pos])) is None  # any truncation


@settings(max_examples=100)
@given(st.lists(values_st, min_size=1, max_size=20))
def test_offsets_walk_both_ways(values):
    lp = bytes(L.build(values))
    offs = []
    p = L.first(lp)
    while p is not None:
        offs.append(p)
        p = L.next_offset(lp, p)
    assert len(offs) == len(values)
    back = []
    p = L.last(lp)
    while p is not None:
        back.append(p)
        p = L.prev_offset(lp, p)
    assert back == offs[::-1]
    for p, v in zip(offs, values, strict=True):
        got, nxt = L.get(lp, p)
        assert got == canon(v)
        assert nxt == L.skip(lp, p)
        size = L.element_size(lp, p)
        assert nxt - p == size + L.backlen_size(size)
        assert L.value_bytes(got) == (v if isinstance(v, bytes) else str(v).encode())


def test_value_bytes():
    assert L.value_bytes(0) == b"0"
    assert L.value_bytes(9999) == b"9999"
    assert L.value_bytes(-5) == b"-5"
    assert L.value_bytes(INT64_MIN) == str(INT64_MIN).encode()
    assert L.value_bytes(bytearray(b"ab")) == b"ab"


def test_header_count_saturates_at_65535():
    values = [i & 127 for i in range(65536)]
    lp = L.build(values)
    assert L.num_elements(lp) == L.LP_HDR_NUMELE_UNKNOWN
    assert L.length(lp) == 65536
    assert L.validate(lp, deep=True)
    lp = L.build(values[:65534])
    assert L.num_elements(lp) == 65534
    L.append(lp, 1)
    assert L.num_elements(lp) == 65535  # reaching 65535 means "unknown" from now on
    assert L.length(lp) == 65535
    L.append(lp, 1)
    assert L.num_elements(lp) == 65535 and L.length(lp) == 65536


@settings(max_examples=100)
@given(
    st.lists(values_st, min_size=1, max_size=12),
    st.data(),
    st.integers(INT64_MIN, INT64_MAX) | st.integers(-200, 200),
)
def test_replace_int(values, data, newval):
    lp = L.build(values)
    idx = data.draw(st.integers(0, len(values) - 1))
    p = L.first(lp)
    for _ in range(idx):
        p = L.next_offset(lp, p)
    before = len(lp)
    delta = L.replace_int(lp, p, newval)
    expected = list(values)
    expected[idx] = newval
    assert bytes(lp) == ref_build(expected)
    assert len(lp) == before + delta
    assert L.validate(lp, deep=True)


def test_replace_int_same_size_is_in_place():
    lp = L.build([1, b"x", 2])
    obj = lp
    p = L.first(lp)
    assert L.replace_int(lp, p, 3) == 0
    assert lp is obj and L.elements(lp) == [3, b"x", 2]
    assert L.replace_int(lp, p, 300) == 1  # 7-bit -> 13-bit grows by one byte
    assert L.elements(lp) == [300, b"x", 2] and L.validate(lp, deep=True)


def test_append_int_and_overflow():
    lp = L.new()
    L.append_int(lp, -3)
    L.append(lp, b"12")
    assert L.elements(lp) == [-3, 12]
    with pytest.raises(OverflowError):
        L.int_element(1 << 63)


# ------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------


def test_validate_shallow_checks():
    good = bytes(L.build([b"hello", 7, b"x" * 100]))
    assert L.validate(good) and L.validate(good, deep=True)
    assert not L.validate(good[:-1])  # size mismatch
    assert not L.validate(good + b"\xff")
    assert not L.validate(b"\x06\x00\x00\x00\x00\x00")  # too short
    bad_eof = bytearray(good)
    bad_eof[-1] = 0xFE
    assert not L.validate(bytes(bad_eof))
    bad_total = bytearray(good)
    struct.pack_into("<I", bad_total, 0, len(good) + 1)
    assert not L.validate(bytes(bad_total))


def test_validate_deep_catches_structure():
    good = bytearray(L.build([b"hello", 7, b"x" * 100, 300]))
    # header count mismatch: shallow passes, deep fails
    bad = bytearray(good)
    bad[4] += 1
    assert L.validate(bytes(bad)) and not L.validate(bytes(bad), deep=True)
    # 65535 means unknown: accepted
    unk = bytearray(good)
    unk[4:6] = b"\xff\xff"
    assert L.validate(bytes(unk), deep=True)
    # a corrupted backlen
    bad = bytearray(good)
    p = L.first(good)
    bad[L.skip(good, p) - 1] ^= 0x01
    assert not L.validate(bytes(bad), deep=True)
    # invalid encoding byte
    for enc in range(0xF5, 0xFF):
        bad = bytearray(good)
        bad[6] = enc
        assert not L.validate(bytes(bad), deep=True)
    # an element running past the end (string length too long)
    bad = bytearray(good)
    bad[6] = 0x80 | 63
    assert not L.validate(bytes(bad), deep=True)
    # EOF in the middle: the walk must end exactly at the last byte
    bad = bytearray(good)
    bad[6] = 0xFF
    assert not L.validate(bytes(bad), deep=True)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(values_st, min_size=1, max_size=10), st.data())
def test_validate_never_raises_on_corruption(values, data):
    lp = bytearray(L.build(values))
    pos = data.draw(st.integers(0, len(lp) - 1))
    lp[pos] = data.draw(st.integers(0, 255))
    ok = L.validate(bytes(lp), deep=True)
    if ok:
        # a blob that passes deep validation can be walked end to end in both directions
        fwd = L.elements(lp)
        assert list(L.iterate_reverse(lp)) == fwd[::-1]


@settings(max_examples=100)
@given(st.lists(values_st, min_size=1, max_size=10), st.data())
def test_truncation_is_always_rejected(values, data):
    lp = bytes(L.build(values))
    cut = data.draw(st.integers(0, len(lp) - 1))
    assert not L.validate(lp[:cut], deep=True)
    assert not L.validate(lp[:cut])
