"""CLUSTER, ASKING, READONLY, READWRITE and RESTORE-ASKING on a standalone server."""

from __future__ import annotations

import hiredis
import redis

from tests.support import RawClient


def test_cluster_commands_say_cluster_support_is_disabled(sbs):
    sbs.run([
        ("CLUSTER", "INFO"),
        ("CLUSTER", "SLOTS"),
        ("CLUSTER", "SHARDS"),
        ("CLUSTER", "NODES"),
        ("CLUSTER", "MYID"),
        ("CLUSTER", "HELP"),
        ("CLUSTER", "KEYSLOT", "foo"),
        ("CLUSTER", "KEYSLOT"),
        ("CLUSTER", "RESET", "HARD"),
        ("CLUSTER", "BOGUS"),
        ("CLUSTER",),
        ("ASKING",),
        ("READONLY",),
        ("READWRITE",),
        ("READONLY", "extra"),
        ("COMMAND", "INFO", "asking", "readonly", "readwrite", "restore-asking"),
    ])


def test_cluster_subcommands_are_redis_s(rill_server, oracle_server):
    """Every CLUSTER subcommand exists with Redis's facts (its order in COMMAND INFO is
    Redis's hash order, seeded at random per process, so the entries are compared sorted)."""
    def entries(port: int) -> list:
        c = RawClient(port)
        try:
            reader = hiredis.Reader()
            reader.feed(c.call("COMMAND", "INFO", "cluster"))
            info = reader.gets()[0]
            return sorted(repr(sub) for sub in info[9])
        finally:
            c.close()

    mine = entries(rill_server.port)
    assert len(mine) == 27 and mine == entries(oracle_server.port)


def test_redis_py_sees_a_standalone_server(rill_server):
    r = redis.Redis(port=rill_server.port)
    try:
        try:
            r.execute_command("CLUSTER", "INFO")
        except redis.ResponseError as e:
            assert str(e) == "This instance has cluster support disabled"
        else:
            raise AssertionError("CLUSTER INFO answered on a standalone server")
    finally:
        r.close()


def test_restore_asking_is_restore(sbs):
    sbs.run([
        ("SET", "k", "v"),
        ("RPUSH", "l", "a", "b"),
    ])
    for key in ("k", "l"):
        mine, theirs = sbs.both("DUMP", key)
        payload_rill, payload_redis = mine, theirs
        assert payload_rill == payload_redis
        body = payload_rill.split(b"\r\n", 1)[1][:-2]
        sbs.check("DEL", key)
        sbs.check("RESTORE-ASKING", key, "0", body)
        sbs.check("RESTORE-ASKING", key, "0", body)  # BUSYKEY
        sbs.check("RESTORE-ASKING", key, "0", body, "REPLACE")
    sbs.run([
        ("GET", "k"),
        ("LRANGE", "l", "0", "-1"),
        ("RESTORE-ASKING", "x", "0", "garbage"),
        ("RESTORE-ASKING", "x"),
    ])
