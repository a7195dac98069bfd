"""CRC-64/REDIS: the check value, incremental use, and the pure-Python lanes agreeing with the table."""

from __future__ import annotations

import os
import time

from hypothesis import given, settings
from hypothesis import strategies as st
from rill.persistence import crc64 as m


def test_check_value_every_backend():
    for f in (m.crc64, m.crc64_table, m.crc64_lanes):
        assert f(b"123456789") == 0xE9C6D914C4B8D9CA
        assert f(b"") == 0


def test_redis_crc64_test_vector():
    # crc64Test's second vector in crc64.c (sizeof() counts the terminating NUL).
    text = (
        b"Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed "
        b"do eiusmod tempor incididunt ut labore et dolore magna "
        b"aliqua. Ut enim ad minim veniam, quis nostrud exercitation "
        b"ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis "
        b"aute irure dolor in reprehenderit in voluptate velit esse "
        b"cillum dolore eu fugiat nulla pariatur. Excepteur sint "
        b"occaecat cupidatat non proident, sunt in culpa qui officia "
        b"deserunt mollit anim id est laborum.\x00"
    )
    for f in (m.crc64, m.crc64_table, m.crc64_lanes):
        assert f(text) == 0xC7794709E69683B3


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=40000), st.integers(0, 2**64 - 1), st.integers(0, 40000))
def test_lanes_equal_table_incrementally(data, seed, cut):
    cut = min(cut, len(data))
    expected = m.crc64_table(data, seed)
    assert m.crc64_lanes(data, seed) == expected
    assert m.crc64(data, seed) == expected
    assert m.crc64(data[cut:], m.crc64(data[:cut], seed)) == expected


def test_lanes_on_large_input_and_memoryview():
    data = os.urandom(3 * 1024 * 1024 + 17)
    assert m.crc64_lanes(data) == m.crc64(data)
    assert m.crc64_lanes(memoryview(data)[5:]) == m.crc64(data[5:])


def test_lanes_is_much_faster_than_the_byte_loop():
    """The fallback must not be the bottleneck: it runs the byte loop in C, many lanes at once."""
    data = os.urandom(1 << 21)
    t = time.perf_counter()
    m.crc64_table(data[: 1 << 18])
    table_rate = (1 << 18) / (time.perf_counter() - t)
    t = time.perf_counter()
    m.crc64_lanes(data)
    lanes_rate = (1 << 21) / (time.perf_counter() - t)
    assert lanes_rate > 3 * table_rate
