"""The TTL rules of docs/active-active.md ("Expiry") on strings, hashes, sets, sorted sets and
geo, with two real instances: concurrent TTLs, the longest wins; PERSIST beats every TTL; a
DEL takes the TTLs it saw and leaves one set concurrently; SET without KEEPTTL is a PERSIST
and SET ... EX an EXPIRE; a TTL that passes deletes what the instance saw, everywhere.

Each type has a write that creates the key, one that adds to it without touching its TTL
(what a concurrent writer does), and a read of its content.
"""

from __future__ import annotations

import itertools
import time

import pytest

from tests.server.activeactive.cluster import Cluster
from tests.server.activeactive.convergence import type_snapshot
from tests.support import wait_until

TYPES = {
    # type: (create, add without touching the TTL)
    "string": (("SET", "{k}", "v"), ("APPEND", "{k}", "+")),
    "counter": (("INCRBY", "{k}", 5), ("INCRBY", "{k}", 1)),
    "hash": (("HSET", "{k}", "a", "1"), ("HSET", "{k}", "b", "2")),
    "set": (("SADD", "{k}", "a"), ("SADD", "{k}", "b")),
    "zset": (("ZADD", "{k}", "1", "a"), ("ZADD", "{k}", "2", "b")),
    "geo": (("GEOADD", "{k}", "13.361389", "38.115556", "a"), ("GEOADD", "{k}", "15.087269", "37.502669", "b")),
}
_names = itertools.count()


@pytest.fixture(scope="module")
def pair():
    with Cluster(2) as c:
        yield c


def fill(cmd: tuple, key: str) -> tuple:
    return tuple(key if a == "{k}" else a for a in cmd)


def fresh(pair, kind: str) -> str:
    """A new key of ``kind``, created at region 1 and delivered to region 2."""
    key = f"{kind}:{next(_names)}"
    pair[0].call(*fill(TYPES[kind][0], key))
    pair.sync()
    return key


def add(node, kind: str, key: str) -> None:
    node.call(*fill(TYPES[kind][1], key))


def pexpiretime(pair, key: str) -> int:
    """The key's absolute expiry, which must be the same at both regions."""
    times = [n.call("PEXPIRETIME", key) for n in pair]
    assert times[0] == times[1], times
    return times[0]


def equal(pair) -> None:
    assert type_snapshot(pair[0]) == type_snapshot(pair[1])


@pytest.mark.parametrize("kind", list(TYPES))
def test_concurrent_ttls_the_longest_wins(pair, kind):
    r1, r2 = pair
    key = fresh(pair, kind)
    pair.pause_all()
    r1.call("EXPIRE", key, 1000)
    r2.call("PEXPIRE", key, 9_000_000)
    pair.sync()
    at = pexpiretime(pair, key)
    assert 8_990_000 < at - time.time() * 1000 <= 9_000_000
    # A TTL that saw the longer one replaces it, shorter or not.
    r1.call("EXPIRE", key, 500)
    pair.sync()
    assert 490_000 < pexpiretime(pair, key) - time.time() * 1000 <= 500_000
    # Absolute forms and the GT/LT conditions take part in the same register.
    pair.pause_all()
    r1.call("PEXPIREAT", key, int(time.time() * 1000) + 700_000)
    r2.call("EXPIRE", key, 600, "GT")
    pair.sync()
    assert 690_000 < pexpiretime(pair, key) - time.time() * 1000 <= 700_000
    equal(pair)


@pytest.mark.parametrize("kind", list(TYPES))
def test_persist_beats_every_concurrent_ttl(pair, kind):
    r1, r2 = pair
    key = fresh(pair, kind)
    r1.call("EXPIRE", key, 1000)
    pair.sync()
    pair.pause_all()
    r1.call("PERSIST", key)
    r2.call("EXPIRE", key, 5000)
    add(r2, kind, key)
    pair.sync()
    assert pexpiretime(pair, key) == -1
    equal(pair)


@pytest.mark.parametrize("kind", list(TYPES))
def test_del_takes_the_ttls_it_saw(pair, kind):
    """The key had a TTL both saw; region 1 deletes it while region 2 adds to it: what
    region 2 added survives, without the TTL the DEL saw."""
    r1, r2 = pair
    key = fresh(pair, kind)
    r1.call("EXPIRE", key, 1000)
    pair.sync()
    pair.pause_all()
    r1.call("DEL", key)
    add(r2, kind, key)
    pair.sync()
    assert r1.call("EXISTS", key) == 1
    assert pexpiretime(pair, key) == -1
    equal(pair)


@pytest.mark.parametrize("kind", list(TYPES))
def test_a_del_takes_the_ttl_its_own_transaction_set(pair, kind):
    """An EXPIRE then a DEL in one MULTI are one effect: the DEL saw that TTL, so a key made
    again afterwards has none at the peer either. (Found by a full-sync random run: the
    peer kept the TTL, as if set concurrently, and put it on the new key.)"""
    r1, r2 = pair
    key = fresh(pair, kind)
    r1.call("MULTI")
    r1.call("EXPIRE", key, 9794)
    r1.call("DEL", key)
    r1.call("EXEC")
    r1.call(*fill(TYPES[kind][0], key))
    pair.sync()
    assert r2.call("EXISTS", key) == 1
    assert pexpiretime(pair, key) == -1
    equal(pair)


@pytest.mark.parametrize("kind", list(TYPES))
def test_a_ttl_set_concurrently_with_a_del_stays(pair, kind):
    r1, r2 = pair
    key = fresh(pair, kind)
    pair.pause_all()
    r1.call("UNLINK", key)
    r2.call("EXPIRE", key, 3000)
    add(r2, kind, key)
    pair.sync()
    assert 2_990_000 < pexpiretime(pair, key) - time.time() * 1000 <= 3_000_000
    equal(pair)


@pytest.mark.parametrize("kind", list(TYPES))
def test_a_ttl_registered_while_the_key_is_away_holds_when_it_comes_back(pair, kind):
    """Region 2 deletes the key (seeing the TTL-less key) while region 1 sets a TTL: the
    key is gone at region 2 until region 1's add, which gets the registered TTL there."""
    r1, r2 = pair
    key = fresh(pair, kind)
    pair.pause_all()
    r2.call("DEL", key)
    r1.call("EXPIRE", key, 4000)
    pair.sync()
    # The TTL outlived the DEL (concurrent); the elements did not, so the key is gone.
    assert r2.call("EXISTS", key) == r1.call("EXISTS", key) == 0
    add(r1, kind, key)
    pair.sync()
    assert 3_990_000 < pexpiretime(pair, key) - time.time() * 1000 <= 4_000_000
    equal(pair)


def test_set_without_keepttl_is_a_persist_and_set_ex_an_expire(pair):
    r1, r2 = pair
    key = fresh(pair, "string")
    r1.call("EXPIRE", key, 1000)
    pair.sync()
    pair.pause_all()
    r1.call("SET", key, "plain")  # drops the TTL: a PERSIST
    r2.call("EXPIRE", key, 5000)
    pair.sync()
    assert pexpiretime(pair, key) == -1
    pair.pause_all()
    r1.call("SET", key, "ex", "EX", 100)
    r2.call("EXPIRE", key, 5000)
    pair.sync()
    assert 4_990_000 < pexpiretime(pair, key) - time.time() * 1000 <= 5_000_000
    pair.pause_all()
    r1.call("GETEX", key, "PERSIST")
    r2.call("SETEX", key, 7000, "x")
    pair.sync()
    assert pexpiretime(pair, key) == -1
    pair.pause_all()
    r1.call("SET", key, "kept", "KEEPTTL")  # neither: the TTL register is untouched
    r2.call("EXPIRE", key, 9000)
    pair.sync()
    assert 8_990_000 < pexpiretime(pair, key) - time.time() * 1000 <= 9_000_000
    equal(pair)


@pytest.mark.parametrize("kind", ["string", "hash", "zset"])
def test_a_ttl_that_passes_deletes_the_key_everywhere(pair, kind):
    """The key expires (at each region, whichever comes first): gone at both, and a later
    write makes a new key without the old TTL."""
    r1, r2 = pair
    key = fresh(pair, kind)
    r1.call("PEXPIRE", key, 300)
    pair.sync()
    wait_until(lambda: r1.call("EXISTS", key) == 0 and r2.call("EXISTS", key) == 0, timeout=10)
    pair.sync()
    add(r2, kind, key)
    pair.sync()
    assert r1.call("EXISTS", key) == 1
    assert pexpiretime(pair, key) == -1
    equal(pair)
