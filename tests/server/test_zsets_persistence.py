"""Sorted sets through RDB (DEBUG RELOAD, DUMP/RESTORE with redis-server both ways) and AOF rewrite."""

from __future__ import annotations

from tests.server.persistence_helpers import redis_in, rill_in, wait_bgsave, wait_rewrite
from tests.support import RawClient

SCORES = ["1", "-inf", "+inf", "0.1", "-0", "1e300", "-2.5", "123456789012345", "3"]


def _populate(c: RawClient) -> None:
    c.call("ZADD", "small", *(x for i, s in enumerate(SCORES) for x in (s, f"m{i}")))
    c.call("ZADD", "bin", "1", b"\x00\xff\r\n", "2", "", "3", "12345")
    c.call("ZADD", "big", *(x for i in range(300) for x in (str(i / 7), f"member:{i}")))
    c.call("ZADD", "long", "1", "x" * 100, "2", "y")
    # skiplist that shrinks back under the threshold: a reload makes it a listpack again
    c.call("ZADD", "shrunk", *(x for i in range(200) for x in (str(i), f"s{i}")))
    c.call("ZREMRANGEBYRANK", "shrunk", "0", "189")
    c.call("ZADD", "ttl", "1", "a")
    c.call("PEXPIREAT", "ttl", "4102444800000")


def _snapshot(c: RawClient) -> list[bytes]:
    out = []
    for key in ("small", "bin", "big", "long", "shrunk", "ttl"):
        out += [c.call("ZRANGE", key, "0", "-1", "WITHSCORES"), c.call("OBJECT", "ENCODING", key),
                c.call("PEXPIRETIME", key)]
    out.append(c.call("DBSIZE"))
    return out


def _loaded(snapshot: list[bytes]) -> list[bytes]:
    """What a load makes of a snapshot: "shrunk" fits a listpack again (as in Redis)."""
    out = list(snapshot)
    out[13] = b"$8\r\nlistpack\r\n"
    return out


def test_debug_reload_matches_redis(sbs):
    for c in (sbs.rill, sbs.oracle):
        _populate(c)
    assert _snapshot(sbs.rill) == _snapshot(sbs.oracle)
    before = _snapshot(sbs.rill)
    digest = sbs.rill.call("DEBUG", "DIGEST-VALUE", "big", "small")
    assert before[13] == b"$8\r\nskiplist\r\n"
    sbs.check("DEBUG", "RELOAD")
    assert _snapshot(sbs.rill) == _snapshot(sbs.oracle) == _loaded(before)
    assert sbs.rill.call("DEBUG", "DIGEST-VALUE", "big", "small") == digest


def test_dump_restore_both_ways(sbs):
    for c in (sbs.rill, sbs.oracle):
        _populate(c)
    for src, dst in ((sbs.oracle, sbs.rill), (sbs.rill, sbs.oracle)):
        for key in ("small", "bin", "big", "long", "shrunk"):
            payload = _bulk(src.call("DUMP", key))
            assert dst.call("RESTORE", key + ":copy", "0", payload) == b"+OK\r\n", key
            assert dst.call("ZRANGE", key + ":copy", "0", "-1", "WITHSCORES") == src.call(
                "ZRANGE", key, "0", "-1", "WITHSCORES"
            ), key
    for key in ("small", "bin", "big", "long", "shrunk"):
        sbs.check("OBJECT", "ENCODING", key + ":copy")


def test_rdb_files_move_both_ways(tmp_path):
    mine, theirs = tmp_path / "rill", tmp_path / "redis"
    mine.mkdir()
    theirs.mkdir()
    with rill_in(str(mine)) as srv:
        c = RawClient(srv.port)
        _populate(c)
        expected = _loaded(_snapshot(c))
        assert c.call("BGSAVE").startswith(b"+")
        wait_bgsave(c)
        c.close()
    (theirs / "dump.rdb").write_bytes((mine / "dump.rdb").read_bytes())
    with redis_in(str(theirs), "--dbfilename", "dump.rdb") as srv:
        c = RawClient(srv.port)
        assert _snapshot(c) == expected
        c.call("ZADD", "small", "42", "from-redis")
        expected = _snapshot(c)
        assert c.call("SAVE") == b"+OK\r\n"
        c.close()
    (mine / "dump.rdb").write_bytes((theirs / "dump.rdb").read_bytes())
    with rill_in(str(mine)) as srv:
        c = RawClient(srv.port)
        assert _snapshot(c) == expected
        c.close()


def test_aof_rewrite_and_restart(tmp_path):
    with rill_in(str(tmp_path), "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        _populate(c)
        expected = _snapshot(c)
        digest = c.call("DEBUG", "DIGEST")
        assert c.call("BGREWRITEAOF").startswith(b"+")
        wait_rewrite(c)
        c.call("ZINCRBY", "small", "1", "after-rewrite")
        c.call("ZPOPMIN", "big", "3")
        after = _loaded(_snapshot(c))
        digest_after = c.call("DEBUG", "DIGEST")
        c.close()
    assert expected != after
    with rill_in(str(tmp_path), "--appendonly", "yes") as srv:
        c = RawClient(srv.port)
        assert _snapshot(c) == after
        assert c.call("DEBUG", "DIGEST") == digest_after != digest
        c.close()


def test_aof_preamble_off_rewrites_as_zadd(tmp_path):
    with rill_in(str(tmp_path), "--appendonly", "yes", "--aof-use-rdb-preamble", "no") as srv:
        c = RawClient(srv.port)
        _populate(c)
        expected = _loaded(_snapshot(c))
        assert c.call("BGREWRITEAOF").startswith(b"+")
        wait_rewrite(c)
        c.close()
    base = b"".join(p.read_bytes() for p in (tmp_path / "appendonlydir").glob("*.base.aof"))
    assert b"$4\r\nZADD\r\n" in base and b"$3\r\ninf\r\n" in base
    with rill_in(str(tmp_path), "--appendonly", "yes", "--aof-use-rdb-preamble", "no") as srv:
        c = RawClient(srv.port)
        assert _snapshot(c) == expected
        c.close()


def _bulk(reply: bytes) -> bytes:
    head, _, rest = reply.partition(b"\r\n")
    return rest[: int(head[1:])]
