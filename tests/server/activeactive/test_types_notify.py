"""Keyspace notifications of strings, hashes, sets and sorted sets written at a peer: they
fire where the effect is applied, with the event and the class (notify-keyspace-events
letter) the same command fires in Redis 7.0 when run locally, for the common commands.

Each case runs its setup and then its command on redis-server 7.0.15 and, on a pair of
Active-Active instances, at region 1 while region 2 listens; both listen once per class
letter, so an event filed under the wrong class shows as missing from one run and extra in
another. The peer fires one event per command and key, as Redis does, even when the effect
carries one op per field or member.

What a peer cannot tell apart fires as the op it got (``PEER_FIRES``): APPEND, SETRANGE,
SETBIT and BITFIELD reach it as an assign of the whole string ("set"); an HDEL, SREM or
ZREM that empties the key as the key deleted ("del", without the command's own event
before it); RENAME as the old key deleted and the new one written.
"""

from __future__ import annotations

import pytest

from tests.server.activeactive.cluster import decode
from tests.support import RawClient, start_redis

CLASSES = "g$hszt"

# (setup, command): the command's events at the peer must equal Redis's local ones.
CASES = {
    "set": ([], ("SET", "k", "v")),
    "set-over-existing": ([("SET", "k", "a")], ("SET", "k", "b")),
    "setex": ([], ("SETEX", "k", "1000", "v")),
    "incr": ([], ("INCR", "k")),
    "incrby": ([("SET", "k", "5")], ("INCRBY", "k", "3")),
    "decrby": ([("SET", "k", "5")], ("DECRBY", "k", "3")),
    "incrbyfloat": ([("SET", "k", "5")], ("INCRBYFLOAT", "k", "1.5")),
    "getdel": ([("SET", "k", "a")], ("GETDEL", "k")),
    "mset": ([], ("MSET", "k", "1", "k2", "2")),
    "hset": ([], ("HSET", "k", "a", "1", "b", "2")),
    "hset-update": ([("HSET", "k", "a", "1")], ("HSET", "k", "a", "2")),
    "hincrby": ([("HSET", "k", "a", "1")], ("HINCRBY", "k", "a", "2")),
    "hincrbyfloat": ([("HSET", "k", "a", "1")], ("HINCRBYFLOAT", "k", "a", "2.5")),
    "hdel": ([("HSET", "k", "a", "1", "b", "2")], ("HDEL", "k", "a")),

    "sadd": ([], ("SADD", "k", "a", "b", "c")),
    "srem": ([("SADD", "k", "a", "b", "c")], ("SREM", "k", "a", "b")),
    "zadd": ([], ("ZADD", "k", "1", "a", "2", "b")),
    "zincrby": ([("ZADD", "k", "1", "a")], ("ZINCRBY", "k", "2", "a")),
    "zadd-incr": ([("ZADD", "k", "1", "a")], ("ZADD", "k", "INCR", "2", "a")),
    "zrem": ([("ZADD", "k", "1", "a", "2", "b")], ("ZREM", "k", "a")),
    "del-string": ([("SET", "k", "a")], ("DEL", "k")),
    "del-hash": ([("HSET", "k", "a", "1")], ("DEL", "k")),
    "unlink-set": ([("SADD", "k", "a")], ("UNLINK", "k")),
    "expire": ([("HSET", "k", "a", "1")], ("EXPIRE", "k", "1000")),
    "pexpire": ([("SET", "k", "a")], ("PEXPIRE", "k", "1000000")),
    "persist": ([("SADD", "k", "a"), ("EXPIRE", "k", "1000")], ("PERSIST", "k")),
}

# (setup, command, what the peer fires): where the op a peer gets cannot say which
# command made it (see the module doc).
DEL = [("g", b"del", b"k")]
PEER_FIRES = {
    "hdel-last": ([("HSET", "k", "a", "1", "b", "2")], ("HDEL", "k", "a", "b"), DEL),
    "srem-last": ([("SADD", "k", "a")], ("SREM", "k", "a"), DEL),
    "zrem-last": ([("ZADD", "k", "1", "a")], ("ZREM", "k", "a"), DEL),
    "append": ([("SET", "k", "a")], ("APPEND", "k", "b"), [("$", b"set", b"k")]),
    "setrange": ([("SET", "k", "abc")], ("SETRANGE", "k", "1", "x"), [("$", b"set", b"k")]),
    "setbit": ([], ("SETBIT", "k", "7", "1"), [("$", b"set", b"k")]),
    "rename": ([("HSET", "k", "a", "1")], ("RENAME", "k", "k2"), [("g", b"del", b"k"), ("h", b"hset", b"k2")]),
}


class Listener:
    """A connection subscribed to every keyevent of db 0, and to ``end``: a PUBLISH to it
    after the command (and the peer's delivery) marks where the command's events end."""

    def __init__(self, port: int) -> None:
        self.client = RawClient(port)
        self.client.call("PSUBSCRIBE", "__keyevent@0__:*")
        self.client.call("SUBSCRIBE", "end")

    def events(self) -> list[tuple[bytes, bytes]]:
        out = []
        while True:
            msg = decode(self.client.read_reply())
            if msg[0] == b"message":
                return out
            out.append((msg[2].split(b":", 1)[1], msg[3]))

    def close(self) -> None:
        self.client.close()


def events_by_class(run_case) -> list[tuple[str, bytes, bytes]]:
    """(class, event, key) of everything ``run_case(key_prefix, classes)`` fires, one run
    per class letter (each on keys of its own), in order within a class."""
    out = []
    for letter in CLASSES:
        for event, key in run_case(f"{letter}:", "E" + letter):
            out.append((letter, event, key.split(b":", 1)[1]))
    return out


def keyed(prefix: str, cmd: tuple) -> tuple:
    """``cmd`` with its keys (k, k2) under ``prefix``."""
    return tuple(prefix + a if a in ("k", "k2") else a for a in cmd)


@pytest.fixture(scope="module")
def redis():
    proc = start_redis()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def pair():
    from tests.server.activeactive.cluster import Cluster

    with Cluster(2) as c:
        yield c


def at_the_peer(pair, case: str, setup: list, cmd: tuple):
    """run_case for events_by_class: the setup and command at region 1 (then delivered),
    the events at region 2."""
    r1, r2 = pair

    def run_case(prefix: str, classes: str) -> list:
        prefix = case + "/" + prefix
        for s in setup:
            r1.call(*keyed(prefix, s))
        pair.sync()
        r2.call("CONFIG", "SET", "notify-keyspace-events", classes)
        listener = Listener(r2.port)
        try:
            r1.call(*keyed(prefix, cmd))
            pair.sync()
            r2.call("PUBLISH", "end", "x")
            return [(e, k.split(b"/", 1)[1]) for e, k in listener.events()]
        finally:
            listener.close()
            r2.call("CONFIG", "SET", "notify-keyspace-events", "")

    return run_case


@pytest.mark.parametrize("case", list(CASES))
def test_a_peers_write_fires_the_events_redis_fires_for_it(case, redis, pair):
    setup, cmd = CASES[case]
    oracle = RawClient(redis.port)

    def in_redis(prefix: str, classes: str) -> list:
        for s in setup:
            oracle.call(*keyed(prefix, s))
        oracle.call("CONFIG", "SET", "notify-keyspace-events", classes)
        listener = Listener(redis.port)
        try:
            oracle.call(*keyed(prefix, cmd))
            oracle.call("PUBLISH", "end", "x")
            return listener.events()
        finally:
            listener.close()
            oracle.call("CONFIG", "SET", "notify-keyspace-events", "")

    try:
        expected = events_by_class(in_redis)
        assert expected, "the case fires nothing in Redis"
        assert events_by_class(at_the_peer(pair, case, setup, cmd)) == expected
    finally:
        oracle.call("FLUSHALL")
        oracle.close()


@pytest.mark.parametrize("case", list(PEER_FIRES))
def test_what_a_peer_cannot_tell_apart_fires_as_its_op(case, pair):
    setup, cmd, fires = PEER_FIRES[case]
    assert events_by_class(at_the_peer(pair, case, setup, cmd)) == fires
