"""Files and payloads move between rill and Redis 7.0 in both directions.

rill's RDB and AOF directories pass redis-check-rdb / redis-check-aof and load in
redis-server (with deep payload sanitization on); files and DUMP payloads that
redis-server wrote load in rill; after each move both servers answer the same
read commands with the same bytes (idle times masked; consumer seen-times too
where an AOF replay legitimately resets them, in Redis as in rill).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.server.persistence_helpers import (
    populate,
    redis_in,
    rill_in,
    snapshot,
    wait_rewrite,
)
from tests.support import RawClient

pytestmark = pytest.mark.requires("redis-server", "redis-check-rdb")

STREAM_KEYS_ONLY = ["--sanitize-dump-payload", "yes"]


def check_rdb(path: str) -> None:
    out = subprocess.run(["redis-check-rdb", path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "RDB looks OK" in out.stdout, out.stdout + out.stderr


def check_aof(manifest: str) -> None:
    out = subprocess.run(["redis-check-aof", manifest], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "is valid" in out.stdout, out.stdout + out.stderr


@pytest.fixture
def workdir(tmp_path):
    return str(tmp_path)


def test_rill_rdb_loads_in_redis(workdir):
    with rill_in(workdir, "--rdbcompression", "yes") as srv:
        c = RawClient(srv.port)
        populate(c)
        mine = snapshot(c)
        assert c.call("SAVE") == b"+OK\r\n"
        c.close()
    check_rdb(os.path.join(workdir, "dump.rdb"))
    with redis_in(workdir, "--dbfilename", "dump.rdb", *STREAM_KEYS_ONLY) as redis:
        r = RawClient(redis.port)
        assert snapshot(r) == mine
        r.close()


def test_rill_rdb_without_compression_or_checksum_loads_in_redis(workdir):
    with rill_in(workdir, "--rdbcompression", "no", "--rdbchecksum", "no") as srv:
        c = RawClient(srv.port)
        populate(c, entries=120)
        mine = snapshot(c)
        c.call("SAVE")
        c.close()
    check_rdb(os.path.join(workdir, "dump.rdb"))
    with redis_in(workdir, "--dbfilename", "dump.rdb", *STREAM_KEYS_ONLY) as redis:
        assert snapshot(RawClient(redis.port)) == mine


def _copy_aof(workdir: str, tmp_path) -> str:
    other = str(tmp_path / "copy")
    os.makedirs(other)
    shutil.copytree(os.path.join(workdir, "appendonlydir"), os.path.join(other, "appendonlydir"))
    return other


def _replayed_by_both(workdir: str, other: str) -> tuple[list[bytes], list[bytes]]:
    """Load the same AOF directory (two copies) in rill and in redis-server.

    A replay is compared with a replay: replaying XREADGROUP's effects leaves group
    counters where Redis's own replay leaves them, which may differ from the live
    server that wrote the file (entries-read of a group that was read after the
    rewrite, for instance), in Redis as in rill.
    """
    with rill_in(workdir, "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        mine = snapshot(c, mask_seen=True)
        c.close()
    with redis_in(other, "--appendonly", "yes", *STREAM_KEYS_ONLY) as redis:
        r = RawClient(redis.port)
        theirs = snapshot(r, mask_seen=True)
        r.close()
    return mine, theirs


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_rill_aof_directory_loads_in_redis(workdir, tmp_path, preamble):
    with rill_in(workdir, "--appendonly", "yes", "--aof-use-rdb-preamble", preamble) as srv:
        c = RawClient(srv.port)
        populate(c)
        before = snapshot(c, mask_seen=True)
        c.call("BGREWRITEAOF")
        wait_rewrite(c)
        c.call("XADD", "s", "MAXLEN", "~", "100", "*", "after", "rewrite")
        c.call("XREADGROUP", "GROUP", "g2", "dave", "STREAMS", "s", ">")
        c.call("RPUSH", "list", "z")
        c.close()
    manifest = os.path.join(workdir, "appendonlydir", "appendonly.aof.manifest")
    check_aof(manifest)
    mine, theirs = _replayed_by_both(workdir, _copy_aof(workdir, tmp_path))
    assert mine == theirs
    assert mine[:8] == before[:8]  # the strings, TTLs and key count are what was written


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_redis_aof_directory_loads_in_rill(workdir, tmp_path, preamble):
    with redis_in(workdir, "--appendonly", "yes", "--aof-use-rdb-preamble", preamble) as redis:
        r = RawClient(redis.port)
        populate(r)
        r.call("BGREWRITEAOF")
        wait_rewrite(r)
        r.call("XADD", "s", "*", "after", "rewrite")
        r.call("XREADGROUP", "GROUP", "g2", "dave", "STREAMS", "s", ">")
        r.close()
    mine, theirs = _replayed_by_both(workdir, _copy_aof(workdir, tmp_path))
    assert mine == theirs


def test_redis_rdb_loads_in_rill(workdir):
    with redis_in(workdir, "--dbfilename", "dump.rdb") as redis:
        r = RawClient(redis.port)
        populate(r)
        theirs = snapshot(r)
        assert r.call("SAVE") == b"+OK\r\n"
        r.close()
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        assert snapshot(c) == theirs
        c.close()


def test_dump_payloads_move_both_ways(rill_server, oracle_server):
    rill = RawClient(rill_server.port)
    redis = RawClient(oracle_server.port)
    for c in (rill, redis):
        c.call("FLUSHALL")
        populate(c, entries=150)
    keys = ["str", "int", "big", "raw", "list", "s", "empty"]
    for src, dst in ((redis, rill), (rill, redis)):
        for key in keys:
            payload = _bulk(src.call("DUMP", key))
            assert dst.call("RESTORE", key + ":copy", "0", payload) == b"+OK\r\n", key
            assert dst.call("DUMP", key + ":copy") == src.call("DUMP", key) or key == "s", key
        assert dst.call("XINFO", "STREAM", "s:copy", "FULL") == src.call("XINFO", "STREAM", "s", "FULL")
        assert dst.call("LRANGE", "list:copy", "0", "-1") == src.call("LRANGE", "list", "0", "-1")
    rill.close()
    redis.close()


def _bulk(reply: bytes) -> bytes:
    head, _, rest = reply.partition(b"\r\n")
    n = int(head[1:])
    return rest[:n]


def test_dump_is_byte_identical_to_redis(sbs):
    """Same encodings as Redis 7.0: ints, LZF strings, quicklist listpacks, stream nodes."""
    for c in (sbs.rill, sbs.oracle):
        for i in range(1, 121):
            c.call("XADD", "s", f"{i}-1", "field", f"value{i}", "name", "abcdefghijkl")
    sbs.run([
        ("SET", "small", "hello"),
        ("SET", "n", "-12345"),
        ("SET", "large-int", "123456789012"),
        ("SET", "compressible", "ab" * 100),
        ("RPUSH", "l", "a" * 40, "b" * 30, "1", "2", "-3", "x" * 5000),
        ("XDEL", "s", "3-1"),
        ("XGROUP", "CREATE", "s", "g", "5-1", "ENTRIESREAD", "3"),
        ("XADD", "e", "MAXLEN", "0", "1-1", "a", "b"),
        ("DUMP", "small"), ("DUMP", "n"), ("DUMP", "large-int"), ("DUMP", "compressible"),
        ("DUMP", "l"), ("DUMP", "s"), ("DUMP", "e"), ("DUMP", "nokey"),
        ("CONFIG", "SET", "rdbcompression", "no"),
        ("DUMP", "compressible"), ("DUMP", "s"),
        ("CONFIG", "SET", "rdbcompression", "yes"),
    ])


def test_restore_errors_and_options_match_redis(sbs):
    payload = b"\x00\x05hello\x0a\x00" + bytes.fromhex("45db9bea78faa0c4")
    sbs.rill.call("SET", "probe", "hello")
    real = _bulk(sbs.rill.call("DUMP", "probe"))
    sbs.rill.call("DEL", "probe")
    assert real == payload or len(real) == len(payload)
    bad = bytearray(real)
    bad[3] ^= 1
    newer = bytearray(real)
    newer[7] = 11
    sbs.run([
        ("RESTORE", "k", "0", real),
        ("GET", "k"),
        ("RESTORE", "k", "0", real),
        ("RESTORE", "k", "0", real, "REPLACE"),
        ("RESTORE", "k", "-1", real, "REPLACE"),
        ("RESTORE", "k", "x", real, "REPLACE"),
        ("RESTORE", "k2", "0", bytes(bad)),
        ("RESTORE", "k2", "0", bytes(newer)),
        ("RESTORE", "k2", "0", b"short"),
        ("RESTORE", "k2", "0", real, "BOGUS"),
        ("RESTORE", "k2", "0", real, "IDLETIME", "-1"),
        ("RESTORE", "k2", "0", real, "IDLETIME", "10", "FREQ", "5"),
        ("RESTORE", "k2", "0", real, "FREQ", "256"),
        ("RESTORE", "k2", "0", real, "FREQ", "x"),
        ("RESTORE", "k2", "0", real, "FREQ"),
        ("RESTORE", "k2", "0", real, "FREQ", "5"),
        ("RESTORE", "k3", "0", real, "IDLETIME", "100"),
        ("RESTORE", "k4", "100000", real),
        ("TTL", "k4"),
        ("RESTORE", "k5", "4102444800000", real, "ABSTTL"),
        ("PEXPIRETIME", "k5"),
        ("RESTORE", "k5", "1", real, "ABSTTL", "REPLACE"),  # already expired: k5 is gone
        ("EXISTS", "k5"),
        ("RESTORE", "k6", "1", real, "ABSTTL"),
        ("EXISTS", "k6"),
    ])
    bad_type = b"\x12\x00\x0a\x00"
    from rill.persistence.crc64 import crc64

    payload = bad_type + crc64(bad_type).to_bytes(8, "little")
    sbs.check("RESTORE", "k7", "0", payload)
