"""A short seeded run of the differential fuzzer, part of ``make test``; the long random
exploration is ``make fuzz``."""

from __future__ import annotations

import pytest

from tests.fuzz.exceptions import NEWER_REDIS
from tests.fuzz.fuzz import fuzz_seed
from tests.fuzz.generator import Generator, Op
from tests.fuzz.resp import format_bytes, parse
from tests.fuzz.runner import canon
from tests.fuzz.shrink import ddmin
from tests.support import require_tool


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("seed", [101, 102])
def test_seeded_run_agrees_with_redis(seed, resp):
    require_tool("redis-server")
    result = fuzz_seed(seed, 300, resp, snapshot_every=10)
    assert result is None, "\n" + result


def test_generator_is_deterministic_per_seed():
    assert Generator(5).ops(500) == Generator(5).ops(500)
    assert Generator(5).ops(50) != Generator(6).ops(50)


def test_generator_covers_streams_most():
    ops = Generator(1).ops(3000)
    names = [op.payload[0].upper() for op in ops if op.kind == "cmd"]
    stream = sum(n.startswith(b"X") for n in names)
    assert stream > len(names) * 0.3
    kinds = {op.kind for op in ops}
    assert kinds == {"cmd", "seq", "raw", "block"}


def test_ddmin_finds_the_two_ops_that_matter():
    ops = [Op("cmd", (b"%d" % i,)) for i in range(100)]

    def fails(cand: list[Op]) -> bool:
        names = {op.payload[0] for op in cand}
        return b"17" in names and b"60" in names

    assert [op.payload[0] for op in ddmin(ops, fails)] == [b"17", b"60"]


def test_canon_compares_orderless_replies_as_sets_only():
    smembers = (b"SMEMBERS", b"s")
    assert canon(smembers, b"*2\r\n$1\r\na\r\n$1\r\nb\r\n") == canon(smembers, b"*2\r\n$1\r\nb\r\n$1\r\na\r\n")
    lrange = (b"LRANGE", b"l", b"0", b"-1")
    assert canon(lrange, b"*2\r\n$1\r\na\r\n$1\r\nb\r\n") != canon(lrange, b"*2\r\n$1\r\nb\r\n$1\r\na\r\n")
    ttl = (b"TTL", b"k")
    assert canon(ttl, b":1000\r\n") == canon(ttl, b":999\r\n")
    assert canon(ttl, b":1000\r\n") != canon(ttl, b":-1\r\n")


def test_transcript_formats_like_redis_cli():
    assert format_bytes(b"*2\r\n$1\r\na\r\n:3\r\n") == '1) "a"\n2) (integer) 3'
    assert format_bytes(b"-ERR x\r\n") == "(error) ERR x"
    assert parse(b"%1\r\n+a\r\n,1.5\r\n").kind == "%"


def test_every_newer_redis_item_names_its_version():
    for what, version, how in NEWER_REDIS:
        major = version.split(".")[0]
        assert int(major) >= 7 and version != "7.0" and what and how
