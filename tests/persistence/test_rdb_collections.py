"""Hashes, sets and sorted sets in RDB form: DUMP payloads byte-identical to Redis's.

Redis 7.0 writes each collection in the encoding it holds (a listpack hash or
sorted set as types 16/17, an intset as type 11, a skiplist highest score first),
so for every encoding whose order is defined the payloads must match exactly.
"""

from __future__ import annotations

import pytest

SCRIPTS = {
    "hash listpack": [("HSET", "k", "a", "1", "b", "hello", "c", "1.5", "d", "-12")],
    "hash listpack after updates": [("HSET", "k", "a", "1", "b", "2", "c", "3"), ("HSET", "k", "a", "new"),
                                    ("HDEL", "k", "b"), ("HSET", "k", "b", "again")],
    "intset int16": [("SADD", "k", "3", "1", "2", "-5")],
    "intset int32": [("SADD", "k", "70000", "-3", "5")],
    "intset int64": [("SADD", "k", "9223372036854775807", "-9223372036854775808", "0")],
    "zset listpack": [("ZADD", "k", "1", "a", "2.5", "b", "-0", "c", "inf", "d", "-inf", "e",
                       "100000000000", "f", "4611686018427387904", "g", "0.1", "h")],
    "zset skiplist": [("ZADD", "k", *[x for i in range(200) for x in (str(i % 17), f"m{i}")])],
    "zset with long member": [("ZADD", "k", "1", "y" * 100, "2", "z")],
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_dump_payload_matches_redis(sbs, name):
    for cmd in SCRIPTS[name]:
        sbs.check(*cmd)
    sbs.check("OBJECT", "ENCODING", "k")
    payload = sbs.check("DUMP", "k")
    # And each server restores the other's payload into the same value.
    body = payload.split(b"\r\n", 1)[1][:-2]
    for client in (sbs.rill, sbs.oracle):
        assert client.call("RESTORE", "k2", "0", body) == b"+OK\r\n"
    sbs.check("DUMP", "k2")
    sbs.check("OBJECT", "ENCODING", "k2")
