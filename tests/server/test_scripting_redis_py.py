"""redis-py's Lua-based helpers against a real rill-server: Lock and register_script."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio
from redis.exceptions import LockError, LockNotOwnedError


def test_lock_acquire_extend_release_reacquire(r):
    lock = r.lock("res", timeout=10)
    assert lock.acquire(blocking=False)
    assert not r.lock("res", timeout=10).acquire(blocking=False)
    assert lock.extend(5)
    assert 10000 < r.pttl("res") <= 15000
    assert lock.reacquire()
    assert 9000 < r.pttl("res") <= 10000
    lock.release()
    assert r.get("res") is None
    with pytest.raises(LockError):  # redis-py knows it no longer holds it
        lock.release()
    with r.lock("res", timeout=1):
        assert r.exists("res")
    assert not r.exists("res")


def test_lock_not_owned_extend_fails(r):
    lock = r.lock("res", timeout=10)
    lock.acquire()
    r.set("res", "someone-else")
    with pytest.raises(LockNotOwnedError):
        lock.extend(5)
    with pytest.raises(LockNotOwnedError):
        lock.release()


async def test_asyncio_lock(rill_server):
    client = redis.asyncio.Redis(port=rill_server.port)
    try:
        await client.flushall()
        lock = client.lock("ares", timeout=10)
        assert await lock.acquire(blocking=False)
        assert await lock.extend(5)
        assert await lock.reacquire()
        await lock.release()
        assert await client.get("ares") is None
    finally:
        await client.aclose()


def test_register_script(r):
    multiply = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1]) * 2")
    r.set("n", 5)
    assert multiply(keys=["n"], args=[3]) == 16
    r.script_flush()  # redis-py reloads the script after NOSCRIPT
    assert multiply(keys=["n"], args=[1]) == 18
    pipe = r.pipeline()
    multiply(keys=["n"], args=[1], client=pipe)
    assert pipe.execute() == [20]
