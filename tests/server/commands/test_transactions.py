"""MULTI/EXEC/DISCARD/WATCH side by side with Redis, and propagation of transactions."""

from __future__ import annotations

import time

from tests.conftest import SideBySide


def test_exec_runs_queued_commands(sbs):
    sbs.run([("MULTI",), ("SET", "a", "1"), ("INCR", "a"), ("LPUSH", "a", "x"), ("GET", "a"), ("EXEC",)])


def test_errors_while_queuing_abort(sbs):
    sbs.run([("MULTI",), ("SET", "a", "1"), ("NOSUCHCOMMAND",), ("GET", "a", "b"), ("EXEC",),
             ("GET", "a"), ("EXEC",), ("DISCARD",)])


def test_nesting_and_watch_inside_multi(sbs):
    sbs.run([("MULTI",), ("MULTI",), ("WATCH", "x"), ("DISCARD",), ("DISCARD",)])


def test_watch_detects_changes_from_other_clients(rill_server, oracle_server):
    for port in (rill_server.port, oracle_server.port):
        s = SideBySide(port, port)
        a, b = s.rill, s.oracle
        a.call("SET", "k", "1")
        a.call("WATCH", "k")
        b.call("SET", "k", "2")
        a.call("MULTI")
        a.call("SET", "k", "3")
        assert a.call("EXEC") == b"*-1\r\n"
        assert a.call("GET", "k") == b"$1\r\n2\r\n"
        # unmodified watched key: EXEC goes through, and the key is unwatched after
        a.call("WATCH", "k")
        a.call("MULTI")
        a.call("SET", "k", "4")
        assert a.call("EXEC") == b"*1\r\n+OK\r\n"
        b.call("SET", "k", "5")
        a.call("MULTI")
        a.call("SET", "k", "6")
        assert a.call("EXEC") == b"*1\r\n+OK\r\n"
        s.close()


def test_watch_touched_by_flush_swapdb_and_expiry(rill_server):
    s = SideBySide(rill_server.port, rill_server.port)
    a, b = s.rill, s.oracle
    for breaker in (("FLUSHALL",), ("FLUSHDB",), ("SWAPDB", "0", "1")):
        a.call("SET", "w", "1")
        a.call("WATCH", "w")
        b.call(*breaker)
        a.call("MULTI")
        a.call("PING")
        assert a.call("EXEC") == b"*-1\r\n", breaker
    a.call("FLUSHALL")
    a.call("SET", "e", "1", "PX", "50")
    a.call("WATCH", "e")
    time.sleep(0.1)
    a.call("MULTI")
    a.call("PING")
    assert a.call("EXEC") == b"*-1\r\n"
    s.close()


def test_discard_unwatches(sbs):
    sbs.run([("WATCH", "x"), ("MULTI",), ("PING",), ("DISCARD",), ("EXEC",), ("UNWATCH",)])


def test_blocking_commands_in_multi_do_not_block(sbs):
    sbs.run([("MULTI",), ("BLPOP", "nolist", "0"), ("BRPOPLPUSH", "a", "b", "0"), ("EXEC",)])


def test_exec_without_multi(sbs3):
    sbs3.run([("EXEC",), ("DISCARD",), ("MULTI",), ("SET", "x", "1"), ("EXEC",)])


def test_watch_stale_keys_follow_redis(rill_server, oracle_server):
    """Keys already expired at WATCH time are no change when deleted or flushed."""
    script = [
        ("DEBUG", "SET-ACTIVE-EXPIRE", "0"),
        ("SET", "x", "foo", "PX", "1"),
    ]
    for port in (rill_server.port, oracle_server.port):
        s = SideBySide(port, port)
        a = s.rill
        for args in script:
            a.call(*args)
        time.sleep(0.01)
        a.call("WATCH", "x")
        a.call("DEL", "x")
        a.call("MULTI")
        a.call("PING")
        assert a.call("EXEC") == b"*1\r\n+PONG\r\n", port
        a.call("SET", "y", "1", "PX", "1")
        time.sleep(0.01)
        a.call("WATCH", "y")
        a.call("FLUSHDB")
        a.call("MULTI")
        a.call("PING")
        assert a.call("EXEC") == b"*1\r\n+PONG\r\n", port
        a.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        s.close()


def test_propagation_wraps_multi_effects(rill_server):
    """EXEC's effects reach the propagation path as one MULTI/EXEC block."""
    from rill.server.commands import load_all
    from rill.server.server import Server

    load_all()
    server = Server()
    seen = []
    server.propagation.attach("observer", seen.append)
    c = server.new_client()
    for argv in ([b"MULTI"], [b"SET", b"a", b"1"], [b"INCR", b"a"], [b"GET", b"a"], [b"EXEC"]):
        server.execute(c, argv)
    assert seen == [[(0, [b"MULTI"]), (0, [b"SET", b"a", b"1"]), (0, [b"INCR", b"a"]), (0, [b"EXEC"])]]
    seen.clear()
    for argv in ([b"MULTI"], [b"GET", b"a"], [b"EXEC"]):
        server.execute(c, argv)
    assert seen == []
    server.execute(c, [b"SET", b"b", b"2", b"EX", b"100"])
    ((db, argv),) = seen[0]
    assert argv[:4] == [b"SET", b"b", b"2", b"PXAT"]


def test_expiry_clock_is_held_during_exec_and_scripts_side_by_side(sbs):
    """A key cannot expire half way through a transaction or a script: lookups judge
    expiry by the time it began (TTLs still read the wall clock, so PTTL says 0)."""
    sbs.run([("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1")])
    try:
        sbs.run([
            ("EVAL", "redis.call('SET', KEYS[1], 'v', 'PX', 1); redis.call('DEBUG', 'SLEEP', 0.01); "
                     "return {redis.call('EXISTS', KEYS[1]), redis.call('PTTL', KEYS[1])}", "1", "s"),
            ("EXISTS", "s"),
            ("MULTI",),
            ("SET", "t", "v", "PX", "1"),
            ("DEBUG", "SLEEP", "0.01"),
            ("EXISTS", "t"),
            ("PTTL", "t"),
            ("GET", "t"),
            ("EXEC",),
            ("EXISTS", "t"),
        ])
        mine = sbs.rill.call("EVAL", "redis.call('SET', KEYS[1], 'v', 'PX', 1); "
                             "redis.call('DEBUG', 'SLEEP', 0.01); return redis.call('EXISTS', KEYS[1])", "1", "u")
        assert mine == b":1\r\n"
    finally:
        sbs.run([("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0")])


def test_queuing_error_wins_over_a_touched_watched_key(sbs):
    """Found by the fuzzer: with both a touched WATCHed key and an error while queuing,
    EXEC answers EXECABORT (Redis checks the queuing error first), not a nil array."""
    sbs.run([
        ("WATCH", "k"),
        ("SET", "k", "1"),  # our own write dirties the watch too
        ("MULTI",),
        ("HLEN",),
        ("EXEC",),
        ("GET", "k"),
    ])
