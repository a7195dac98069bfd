"""rill.storage.hll: hashing, the dense and sparse codecs, the estimator, corruption."""

from __future__ import annotations

import random

import pytest
from rill.storage import hll


# (element, register index, run length) as PFDEBUG GETREG reports them after PFADD of
# the element alone into an empty HLL on redis-server 7.0.15.
@pytest.mark.parametrize(("element", "index", "run"), [
    (b"", 5938, 2),
    (b"a", 12711, 2),
    (b"hello", 9216, 1),
    (b"12345678", 10579, 3),  # one whole 8-byte block, no tail
    (b"123456789abcdef0x", 12038, 1),  # two blocks and a 1-byte tail
    (b"\x00\xff" * 20, 7658, 3),
    ("héllo".encode(), 13744, 6),
    (b"foo-1", 4760, 1),
])
def test_pattern_matches_redis(element, index, run):
    assert hll.pattern(element) == (index, run)


def test_new_is_redis_empty_sparse():
    assert hll.new() == b"HYLL\x01" + bytes(11) + b"\x7f\xff"
    assert hll.count(hll.new()) == 0
    assert hll.decode(hll.new()) == b"Z:16384"


def test_dense_codec_round_trip_and_accessors():
    rng = random.Random(7)
    raw = bytes(rng.randrange(64) for _ in range(hll.REGISTERS))
    packed = hll.raw_to_dense(raw)
    assert len(packed) == hll.DENSE_SIZE - hll.HEADER
    assert hll.dense_to_raw(packed) == raw
    buf = bytearray(hll.HEADER) + packed
    for i in (0, 1, 2, 3, 4, 5, 1234, hll.REGISTERS - 2, hll.REGISTERS - 1):
        assert hll._dense_get(buf, i) == raw[i]
    # Writing one register leaves its neighbours alone.
    hll._dense_put(buf, 5, 63 - raw[5])
    expect = bytearray(raw)
    expect[5] = 63 - raw[5]
    assert hll.dense_to_raw(buf[hll.HEADER:]) == expect
    assert hll._dense_set(buf, hll.REGISTERS - 1, 0) is False


def test_raw_max_is_registerwise():
    rng = random.Random(3)
    a = bytes(rng.randrange(64) for _ in range(hll.REGISTERS))
    b = bytes(rng.randrange(64) for _ in range(hll.REGISTERS))
    assert hll.raw_max(a, b) == bytes(map(max, a, b))


def test_histogram_counts_every_value():
    rng = random.Random(5)
    raw = bytes(rng.choice((0, 0, 1, 2, 9, 17, 33, 51, 63)) for _ in range(hll.REGISTERS))
    assert hll._histogram(raw) == [raw.count(v) for v in range(64)]


def test_estimator_small_and_empty():
    assert hll.estimate(bytes(hll.REGISTERS)) == 0
    one = bytearray(hll.REGISTERS)
    one[100] = 1
    assert hll.estimate(bytes(one)) == 1
    assert hll.estimate(bytes([40]) * hll.REGISTERS) == 12994641697113596  # as Redis says
    assert hll.estimate(bytes([51]) * hll.REGISTERS) == 1 << 63  # llroundl overflow
    assert hll.estimate(bytes([63]) * hll.REGISTERS) == 1 << 63  # z == 0


def _filled(n: int, max_bytes: int = 3000) -> hll.Editor:
    editor = hll.Editor(hll.new(), max_bytes)
    editor.add(b"e%d" % i for i in range(n))
    return editor


def test_sparse_and_dense_agree():
    for n in (1, 10, 300, 1500):
        sparse = _filled(n).result()
        assert sparse[4] == hll.SPARSE
        dense = hll.to_dense(sparse)
        assert dense is not None and dense[4] == hll.DENSE and len(dense) == hll.DENSE_SIZE
        assert hll.registers(sparse) == hll.registers(dense)
        assert hll.count(sparse) == hll.count(dense)
        direct = hll.Editor(dense[:], 3000)
        direct.add(b"e%d" % i for i in range(n))
        assert direct.result() == dense


def test_promotion_by_size_and_by_value():
    editor = _filled(200, max_bytes=100)
    assert editor.sparse is None and len(editor.result()) == hll.DENSE_SIZE
    editor = hll.Editor(hll.new(), 3000)
    assert editor.set(7, 33) == 1  # VAL holds at most 32
    value = editor.result()
    assert value[4] == hll.DENSE and hll.registers(value)[7] == 33


def test_sparse_set_splits_and_merges():
    editor = hll.Editor(hll.new(), 3000)
    for index in (100, 102, 101):
        editor.set(index, 3)
    value = editor.result()
    assert hll.decode(value) == b"Z:100 v:3,3 Z:16281"
    assert value[15] & 0x80  # the cached cardinality went stale
    assert editor.set(101, 2) == 0


def test_corrupt_sparse_payloads():
    good = _filled(20).result()
    assert hll.registers(good + b"\x00") is None  # one register too many
    assert hll.count(good + b"\x00") is None
    header_only = bytearray(good[:hll.HEADER])
    assert hll.registers(header_only) is None and hll.to_dense(header_only) is None
    assert hll.Editor(header_only, 3000).add([b"x"]) == (0, False)
    # Garbage past the last register is only ever reached by whole-HLL reads: an
    # add finds its register before it, and keeps it.
    garbage = hll.Editor(bytearray(good + b"hello"), 3000)
    assert garbage.add([b"zz"]) == (1, True)
    assert garbage.result().endswith(b"hello") and hll.registers(garbage.result()) is None
    # Even a VAL starting exactly past the last register is corrupt (CVE-2025-32023).
    tail = good + bytes([0x80])
    assert hll.registers(tail) is None and hll.to_dense(tail) is None
    assert hll.count(tail) is None


def test_lone_xzero_byte_reads_the_terminator():
    # 0x7f alone: an XZERO whose low byte is the NUL after the string: 0x3f00 + 1 zeros.
    value = hll.new()[:-1]
    assert hll.decode(value) == b"Z:16129"
    assert hll.count(value) is None


def test_selftest_passes():
    assert hll.selftest(3000) is None


@pytest.mark.parametrize("seed", range(4))
def test_sparse_of_is_what_pfmerge_into_an_empty_key_writes(seed):
    rng = random.Random(seed)
    for _ in range(150):
        raw = bytearray(hll.REGISTERS)
        top = rng.choice([1, 2, 3, 32, 40])
        for _ in range(rng.choice([0, 1, 2, 5, 50, 300, 1000, 2000, 6000])):
            i = rng.randrange(hll.REGISTERS) if rng.random() < 0.7 else rng.choice([0, 1, 63, 64, 65, 16382, 16383])
            raw[i] = rng.randint(1, top)
        if rng.random() < 0.3:  # a run of equal values, merged 4 at a time
            start, v = rng.randrange(16000), rng.randint(1, 3)
            raw[start:start + rng.randrange(1, 12)] = bytes([v]) * 11
            raw = raw[:hll.REGISTERS]
        raw = bytes(raw)
        max_bytes = rng.choice([25, 100, 500, 1000, 3000])
        editor = hll.Editor(hll.new(), max_bytes)
        editor.merge(raw)
        want = editor.result()
        got = hll.sparse_of(raw, max_bytes)
        assert got is None if want[4] == hll.DENSE else got == want
