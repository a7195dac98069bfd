"""Hashes and sets through persistence: DEBUG RELOAD, DUMP/RESTORE with redis-server both
ways, RDB files across servers, and the AOF (propagated forms replayed, BGREWRITEAOF)."""

from __future__ import annotations

import os

import pytest

from tests.server.persistence_helpers import rill_in, wait_rewrite
from tests.support import RawClient, start_redis


def _populate(c: RawClient) -> None:
    """Both encodings of both types, a TTL, binary and integer content."""
    c.call("HSET", "h:small", "f1", "v1", "n", "12345", "neg", "-7", "bin", b"\x00\xff\r\n")
    c.call("HSET", "h:big", *[x for i in range(600) for x in (f"field{i}", f"value{i}")])
    c.call("HSET", "h:long", "f", "x" * 100)
    c.call("HSET", "h:ttl", "a", "b")
    c.call("PEXPIREAT", "h:ttl", "4102444800000")
    c.call("SADD", "s:int", "5", "-3", "100000", "9223372036854775807", "1")
    c.call("SADD", "s:str", "a", "b", "1", b"\x00")
    c.call("SADD", "s:big", *range(1000))
    c.call("SADD", "s:ttl", "x")
    c.call("PEXPIREAT", "s:ttl", "4102444800000")


KEYS = ["h:small", "h:big", "h:long", "h:ttl", "s:int", "s:str", "s:big", "s:ttl"]


def _sorted_bulk(reply: bytes) -> list[bytes]:
    return sorted(reply.split(b"\r\n"))


def _snapshot(c: RawClient) -> dict:
    """Content (exact where Redis's order is defined, sorted otherwise), encoding and TTL."""
    out = {}
    for key in KEYS:
        enc = c.call("OBJECT", "ENCODING", key)
        if key.startswith("h:"):
            content = c.call("HGETALL", key)
        else:
            content = c.call("SMEMBERS", key)
        if enc == b"$9\r\nhashtable\r\n":
            if key.startswith("h:"):
                # pairs must stay together: compare as a dict
                from hiredis import Reader

                r = Reader()
                r.feed(content)
                flat = r.gets()
                content = sorted(zip(flat[0::2], flat[1::2], strict=True))
            else:
                content = _sorted_bulk(content)
        out[key] = (enc, content, c.call("PEXPIRETIME", key))
    return out


def test_debug_reload_keeps_content_order_and_encoding(raw):
    _populate(raw)
    before = _snapshot(raw)
    digest = raw.call("DEBUG", "DIGEST")
    assert raw.call("DEBUG", "RELOAD") == b"+OK\r\n"
    assert _snapshot(raw) == before
    assert raw.call("DEBUG", "DIGEST") == digest
    assert before["h:small"][0] == b"$8\r\nlistpack\r\n"
    assert before["h:big"][0] == before["h:long"][0] == b"$9\r\nhashtable\r\n"
    assert before["s:int"][0] == b"$6\r\nintset\r\n"
    assert before["s:str"][0] == before["s:big"][0] == b"$9\r\nhashtable\r\n"


def test_reload_uses_current_thresholds(raw):
    raw.call("HSET", "h", "a", "1", "b", "2", "c", "3")
    raw.call("SADD", "s", "1", "2", "3")
    raw.call("CONFIG", "SET", "hash-max-listpack-entries", "2")
    raw.call("CONFIG", "SET", "set-max-intset-entries", "2")
    try:
        assert raw.call("OBJECT", "ENCODING", "h") == b"$8\r\nlistpack\r\n"
        assert raw.call("DEBUG", "RELOAD") == b"+OK\r\n"
        assert raw.call("OBJECT", "ENCODING", "h") == b"$9\r\nhashtable\r\n"
        assert raw.call("OBJECT", "ENCODING", "s") == b"$9\r\nhashtable\r\n"
    finally:
        raw.call("CONFIG", "SET", "hash-max-listpack-entries", "512")
        raw.call("CONFIG", "SET", "set-max-intset-entries", "512")


def _bulk(reply: bytes) -> bytes:
    assert reply.startswith(b"$")
    head, _, rest = reply.partition(b"\r\n")
    return rest[: int(head[1:])]


def test_dump_restore_both_ways(rill_server, oracle_server):
    rill = RawClient(rill_server.port)
    redis = RawClient(oracle_server.port)
    try:
        for c in (rill, redis):
            c.call("FLUSHALL")
            _populate(c)
        expected = _snapshot(redis)
        assert _snapshot(rill) == expected
        for src, dst in ((redis, rill), (rill, redis)):
            for key in KEYS:
                payload = _bulk(src.call("DUMP", key))
                assert dst.call("RESTORE", key, "0", payload, "REPLACE", "ABSTTL") == b"+OK\r\n", key
                if key.endswith("ttl"):
                    dst.call("PEXPIREAT", key, "4102444800000")
            assert _snapshot(dst) == expected
    finally:
        rill.close()
        redis.close()


def test_rdb_files_cross_servers(tmp_path):
    rill_dir = str(tmp_path / "rill")
    os.makedirs(rill_dir)
    with rill_in(rill_dir, "--dbfilename", "dump.rdb") as srv:
        c = RawClient(srv.port)
        _populate(c)
        expected = _snapshot(c)
        assert c.call("SAVE") == b"+OK\r\n"
        c.close()
    with start_redis("--dbfilename", "dump.rdb", workdir=rill_dir) as redis:
        r = RawClient(redis.port)
        assert _snapshot(r) == expected
        # and back: redis writes listpack/intset payloads that rill must read
        assert r.call("SAVE") == b"+OK\r\n"
        r.close()
    with rill_in(rill_dir, "--dbfilename", "dump.rdb") as srv:
        c = RawClient(srv.port)
        assert _snapshot(c) == expected
        c.close()


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_aof_replays_propagated_forms_and_rewrite(tmp_path, preamble):
    workdir = str(tmp_path)
    with rill_in(workdir, "--appendonly", "yes", "--aof-use-rdb-preamble", preamble) as srv:
        c = RawClient(srv.port)
        _populate(c)
        # random and computed effects must replay to the same state
        c.call("HINCRBYFLOAT", "h:small", "f2", "10.5")
        c.call("HINCRBYFLOAT", "h:small", "f2", "0.1")
        c.call("SADD", "s:pop", *range(20))
        c.call("SPOP", "s:pop")
        c.call("SPOP", "s:pop", "3")
        c.call("SPOP", "s:pop", "14")
        c.call("SADD", "s:gone", "1", "2")
        c.call("SPOP", "s:gone", "5")
        c.call("SMOVE", "s:str", "s:moved", "a")
        c.call("SINTERSTORE", "s:inter", "s:int", "s:big")
        before = _snapshot(c)
        extra = [c.call("SMEMBERS", k) for k in ("s:pop", "s:moved", "s:inter")]
        extra.append(c.call("HGET", "h:small", "f2"))
        extra.append(c.call("EXISTS", "s:gone"))
        c.close()
    with rill_in(workdir, "--appendonly", "yes", "--aof-use-rdb-preamble", preamble) as srv:
        c = RawClient(srv.port)
        assert _snapshot(c) == before
        assert [c.call("SMEMBERS", k) for k in ("s:pop", "s:moved", "s:inter")] + [
            c.call("HGET", "h:small", "f2"), c.call("EXISTS", "s:gone")] == extra
        assert c.call("BGREWRITEAOF").startswith(b"+Background append only file rewriting")
        wait_rewrite(c)
        c.close()
    with rill_in(workdir, "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        assert _snapshot(c) == before
        assert c.call("SMEMBERS", "s:pop") == extra[0]
        c.close()


def test_dump_payloads_match_redis_byte_for_byte(sbs):
    """Compact encodings are written as Redis holds them (listpack hash, intset)."""
    sbs.run([
        ("HSET", "h", "f1", "v1", "n", "12345", "neg", "-7", "big", "9223372036854775807", "e", ""),
        ("SADD", "s16", "5", "-3", "100"),
        ("SADD", "s32", "5", "100000"),
        ("SADD", "s64", "1", "-9223372036854775808"),
        ("DUMP", "h"),
        ("DUMP", "s16"),
        ("DUMP", "s32"),
        ("DUMP", "s64"),
        ("HSET", "one", "a", "b"),
        ("SADD", "st", "only"),
        ("DUMP", "one"),
        ("DUMP", "st"),
    ])
