"""XREAD BLOCK and XREADGROUP BLOCK over real connections, scenario by scenario side by side
with redis-server 7.0.15 (RESP2 and RESP3): what wakes a waiter and what does not, what it
is served, the served-waiter errors, timeouts, MULTI; plus served propagation in-process.
"""

from __future__ import annotations

import time

import pytest
from rill.server.commands import load_all
from rill.server.server import Server

from tests.support import RawClient, encode_command
from tests.support import run_inproc as run


class Side:
    """One server's connections for a scenario: a writer, waiters, an admin probe."""

    def __init__(self, port: int, resp3: bool, waiters: int) -> None:
        self.admin = RawClient(port)
        self.admin.call("FLUSHALL")
        self.admin.call("SELECT", "9")
        self.admin.call("FLUSHDB")
        self.admin.call("SELECT", "0")
        self.writer = RawClient(port)
        self.waiters = [RawClient(port) for _ in range(waiters)]
        if resp3:
            for c in (self.writer, *self.waiters):
                c.call("HELLO", "3")

    def blocked(self) -> int:
        info = self.admin.call("INFO", "clients").decode()
        return int(info.split("blocked_clients:")[1].split("\r\n")[0])

    def wait_blocked(self, n: int) -> None:
        deadline = time.monotonic() + 5
        while self.blocked() != n:
            assert time.monotonic() < deadline, f"expected {n} blocked clients"
            time.sleep(0.005)

    def read(self, who: int, timeout: float) -> bytes:
        c = self.waiters[who]
        c.sock.settimeout(timeout)
        try:
            return c.read_reply()
        except TimeoutError:
            return b"<still blocked>"
        finally:
            c.sock.settimeout(10)

    def drain(self, who: int) -> bytes:
        """Every reply waiter ``who`` has before a PING of its own, joined (b"" for none).
        The server answers the PING only once the waiter is no longer blocked, after any
        reply it owes, so an idle waiter is proven idle at once instead of by a read that
        waits out its timeout; one still blocked reads as ``read`` does."""
        c = self.waiters[who]
        c.sock.sendall(encode_command(["PING"]))
        out = b""
        while (reply := self.read(who, 5.0)) != b"+PONG\r\n":
            if reply == b"<still blocked>":
                return out + reply
            out += reply
        return out

    def close(self) -> None:
        for c in (self.admin, self.writer, *self.waiters):
            c.close()


def play(port: int, script, resp3: bool, waiters: int = 2) -> list[bytes]:
    """Run a scenario; steps are ("w", args) for the writer, ("send", i, args) to make
    waiter i send without reading, ("blocked", n) to wait for n blocked clients,
    ("read", i) / ("read", i, secs) for waiter i's reply, ("drain", i) for whatever waiter i
    has pending (see Side.drain), ("admin", args)."""
    side = Side(port, resp3, waiters)
    out: list[bytes] = []
    try:
        for step in script:
            kind = step[0]
            if kind == "w":
                out.append(side.writer.call(*step[1]))
            elif kind == "admin":
                out.append(side.admin.call(*step[1]))
            elif kind == "send":
                side.waiters[step[1]].sock.sendall(encode_command(step[2]))
            elif kind == "blocked":
                side.wait_blocked(step[1])
            elif kind == "read":
                out.append(side.read(step[1], step[2] if len(step) > 2 else 5.0))
            elif kind == "drain":
                out.append(side.drain(step[1]))
            else:
                raise AssertionError(step)
    finally:
        side.close()
    return out


@pytest.fixture(params=[False, True], ids=["resp2", "resp3"])
def compare(request, rill_server, oracle_server):
    resp3 = request.param

    def check(script, waiters: int = 2) -> list[bytes]:
        mine = play(rill_server.port, script, resp3, waiters)
        theirs = play(oracle_server.port, script, resp3, waiters)
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            assert a == b, f"step result {i}: rill {a!r} != redis {b!r}"
        return mine

    return check


# -- XREAD --------------------------------------------------------------------------------------------


def test_xread_waits_for_entries_after_dollar(compare):
    compare([
        ("w", ["XADD", "s", "1-0", "f", "old"]),
        ("send", 0, ["XREAD", "BLOCK", "0", "STREAMS", "s1", "s", "s3", "$", "$", "$"]),
        ("blocked", 1),
        ("w", ["XADD", "other", "1-0", "f", "v"]),
        ("w", ["XADD", "s", "2-0", "f", "new"]),
        ("read", 0),
        # an explicit old ID is served at once; $ on a missing key waits for anything
        ("send", 0, ["XREAD", "BLOCK", "0", "STREAMS", "nokey", "s", "$", "0-0"]),
        ("read", 0),
        ("send", 0, ["XREAD", "BLOCK", "0", "STREAMS", "nokey", "$"]),
        ("blocked", 1),
        ("w", ["XADD", "nokey", "1-1", "a", "b"]),
        ("read", 0),
    ])


def test_xread_serves_only_the_key_that_became_ready_in_fifo_order(compare):
    compare([
        ("w", ["XADD", "a", "1-0", "f", "v"]),
        ("w", ["XADD", "b", "1-0", "f", "v"]),
        ("send", 0, ["XREAD", "BLOCK", "0", "STREAMS", "a", "b", "$", "$"]),
        ("blocked", 1),
        ("send", 1, ["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "b", "b", "$", "1-0"]),
        ("blocked", 2),
        ("w", ["MULTI"]),
        ("w", ["XADD", "b", "2-0", "f", "v2"]),
        ("w", ["XADD", "b", "3-0", "f", "v3"]),
        ("w", ["XADD", "a", "2-0", "f", "v2"]),
        ("w", ["EXEC"]),
        ("read", 0),
        ("read", 1),  # COUNT 1 is honoured on wake; the first $ of a repeated key counts
    ])


def test_xread_wakes_that_redis_does_not_do(compare):
    compare([
        ("w", ["XADD", "s", "1-0", "f", "v"]),
        ("send", 0, ["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]),
        ("blocked", 1),
        # deleted, then a list: not a stream, the waiter stays
        ("w", ["MULTI"]), ("w", ["XADD", "s", "2-0", "f", "v"]), ("w", ["DEL", "s"]),
        ("w", ["LPUSH", "s", "x"]), ("w", ["EXEC"]),
        ("read", 0, 0.2),
        ("w", ["SET", "s", "str"]),
        ("read", 0, 0.2),
        ("w", ["DEL", "s"]),
        ("w", ["XADD", "s", "1-5", "f", "v"]),  # served: waits for IDs after 1-0
        ("read", 0),
        ("send", 0, ["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]),
        ("blocked", 1),
        ("w", ["XSETID", "s", "7-0"]),  # Redis does not signal XSETID
        ("w", ["XDEL", "s", "1-5"]),
        ("w", ["XTRIM", "s", "MAXLEN", "0"]),
        ("read", 0, 0.2),
        ("w", ["XADD", "s", "8-0", "f", "v"]),
        ("read", 0),
    ])


def test_xread_served_with_a_deleted_entry_gets_an_empty_list(compare):
    # Redis 7.0 serves once last_id moved past the waiter's ID, even if the entry is gone
    compare([
        ("w", ["XADD", "s", "1-0", "f", "v"]),
        ("send", 0, ["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]),
        ("blocked", 1),
        ("w", ["MULTI"]), ("w", ["XADD", "s", "2-0", "f", "v"]), ("w", ["XDEL", "s", "2-0"]),
        ("w", ["EXEC"]),
        ("read", 0),
    ])


def test_xread_timeouts_multi_and_errors(compare):
    compare([
        ("send", 0, ["XREAD", "BLOCK", "50", "STREAMS", "s", "$"]),
        ("read", 0),
        ("w", ["MULTI"]),
        ("w", ["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]),
        ("w", ["XREAD", "BLOCK", "0", "STREAMS", "s", "0"]),
        ("w", ["EXEC"]),
        ("w", ["XREAD", "BLOCK", "-1", "STREAMS", "s", "$"]),
        ("w", ["XREAD", "BLOCK", "abc", "STREAMS", "s", "$"]),
        ("w", ["XREAD", "BLOCK", "0", "STREAMS", "s", ">"]),
        ("w", ["XREAD", "BLOCK", "0", "STREAMS", "s"]),
    ])


def test_scripts_may_not_ask_xread_or_xreadgroup_to_block(compare):
    """Even a script's XREAD that would return at once is refused when it names BLOCK."""
    compare([
        ("w", ["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
        ("w", ["EVAL", "return redis.pcall('xread','STREAMS','s','$')", "1", "s"]),
        ("w", ["EVAL", "return redis.pcall('xread','BLOCK',0,'STREAMS','s','$')", "1", "s"]),
        ("w", ["EVAL", "return redis.pcall('XREAD','block',10,'STREAMS','s','0')", "1", "s"]),
        ("w", ["EVAL", "return redis.pcall('xreadgroup','group','g','c','STREAMS','s','>')", "1", "s"]),
        ("w", ["EVAL", "return redis.pcall('xreadgroup','group','g','c','BLOCK',0,'STREAMS','s','>')", "1", "s"]),
        ("w", ["EVAL", "return redis.call('xread','BLOCK',0,'STREAMS','s','$')", "1", "s"]),
    ])


def test_xread_timeout_is_in_milliseconds(rill_server):
    c = RawClient(rill_server.port)
    try:
        t = time.monotonic()
        assert c.call("XREAD", "BLOCK", "150", "STREAMS", "nokey", "$") == b"*-1\r\n"
        assert 0.13 <= time.monotonic() - t < 2
        c.call("HELLO", "3")
        assert c.call("XREAD", "BLOCK", "20", "STREAMS", "nokey", "$") == b"_\r\n"
    finally:
        c.close()


def test_xread_block_zero_waits_until_served(compare):
    compare([
        ("send", 0, ["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]),
        ("blocked", 1),
        ("read", 0, 0.4),
        ("w", ["XADD", "s", "1-0", "f", "v"]),
        ("read", 0),
    ])


def test_xread_served_without_count_gets_at_most_1000(compare):
    compare([
        ("w", ["XADD", "s", "1-0", "f", "v"]),
        ("send", 0, ["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]),
        ("blocked", 1),
        ("w", ["MULTI"]),
        *[("w", ["XADD", "s", f"2-{i}", "f", "v"]) for i in range(1200)],
        ("w", ["EXEC"]),
        ("read", 0),
    ])


def test_xread_plus_blocks_on_an_empty_stream(rill_server):
    """``+`` (Redis 7.4): the last entry now, or anything once the stream gets one."""
    a, b = RawClient(rill_server.port), RawClient(rill_server.port)
    try:
        a.call("FLUSHALL")
        b.sock.sendall(encode_command(["XREAD", "BLOCK", "0", "STREAMS", "s", "+"]))
        time.sleep(0.1)
        a.call("XADD", "s", "1-1", "f", "v")
        assert b.read_reply() == b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    finally:
        a.close()
        b.close()


# -- XREADGROUP ------------------------------------------------------------------------------------------


def test_xreadgroup_waits_and_is_served_new_entries(compare):
    compare([
        ("w", ["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
        ("send", 0, ["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "BLOCK", "0", "STREAMS", "s", ">"]),
        ("blocked", 1),
        ("send", 1, ["XREADGROUP", "GROUP", "g", "bob", "NOACK", "BLOCK", "0", "STREAMS", "s", ">"]),
        ("blocked", 2),
        ("w", ["MULTI"]),
        *[("w", ["XADD", "s", f"1-{i}", "f", str(i)]) for i in range(3)],
        ("w", ["EXEC"]),
        ("read", 0),
        ("read", 1, 0.2),  # alice took two; bob is served the third on the next round
        ("w", ["XPENDING", "s", "g"]),
        ("w", ["XINFO", "GROUPS", "s"]),
        ("w", ["XADD", "s", "2-0", "f", "v"]),
        ("drain", 1),  # bob's one XREADGROUP was served: nothing more comes
        ("w", ["XPENDING", "s", "g"]),
        # history reads never block
        ("send", 0, ["XREADGROUP", "GROUP", "g", "alice", "BLOCK", "0", "STREAMS", "s", "0"]),
        ("read", 0),
        ("send", 0, ["XREADGROUP", "GROUP", "g", "carol", "BLOCK", "0", "STREAMS", "s", "0"]),
        ("read", 0),
        ("send", 0, ["XREADGROUP", "GROUP", "g", "carol", "BLOCK", "30", "STREAMS", "s", ">"]),
        ("read", 0),
    ])


@pytest.mark.parametrize("change", [
    [["DEL", "s"]],
    [["SET", "s", "x"]],
    [["MULTI"], ["DEL", "s"], ["LPUSH", "s", "e1"], ["EXEC"]],
    [["FLUSHALL"]],
    [["FLUSHDB"]],
    [["XGROUP", "DESTROY", "s", "g"]],
    [["XADD", "s2", "100-1", "f", "v"], ["RENAME", "s2", "s"]],
    [["XGROUP", "CREATE", "s2", "g", "$", "MKSTREAM"], ["XADD", "s2", "100-1", "f", "v"],
     ["RENAME", "s2", "s"]],
    [["UNLINK", "s"]],
], ids=["del", "set", "multi-del-lpush", "flushall", "flushdb", "destroy", "rename-nogroup",
        "rename-with-group", "unlink"])
def test_xreadgroup_waiters_learn_the_key_or_group_went_away(compare, change):
    compare([
        ("w", ["XADD", "s", "1-1", "f", "v"]),
        ("w", ["XGROUP", "CREATE", "s", "g", "$"]),
        ("send", 0, ["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]),
        ("blocked", 1),
        ("send", 1, ["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]),
        ("blocked", 2),
        *[("w", args) for args in change],
        ("read", 0),
        ("read", 1, 0.2),
        ("w", ["DEL", "s"]),
        ("w", ["XADD", "s", "200-1", "f", "v"]),
        ("drain", 1),  # served now, or already served by the change
    ])


def test_xreadgroup_waiter_after_swapdb(compare):
    compare([
        ("w", ["SELECT", "9"]),
        ("w", ["LPUSH", "s", "x"]),
        ("w", ["SELECT", "0"]),
        ("w", ["XADD", "s", "1-1", "f", "v"]),
        ("w", ["XGROUP", "CREATE", "s", "g", "$"]),
        ("w", ["XADD", "t", "1-1", "f", "v"]),
        ("w", ["XGROUP", "CREATE", "t", "g", "$"]),
        ("send", 0, ["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]),
        ("blocked", 1),
        ("send", 1, ["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "t", ">"]),
        ("blocked", 2),
        ("w", ["SWAPDB", "0", "9"]),
        ("read", 0),  # s is a list now
        ("read", 1),  # t does not exist
    ])


def test_xreadgroup_setid_back_waits_for_the_next_xadd(compare):
    compare([
        ("w", ["XADD", "s", "1-1", "f", "v"]),
        ("w", ["XGROUP", "CREATE", "s", "g", "$"]),
        ("send", 0, ["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]),
        ("blocked", 1),
        ("w", ["XGROUP", "SETID", "s", "g", "0"]),  # not signalled by Redis
        ("w", ["XGROUP", "CREATECONSUMER", "s", "g", "other"]),
        ("read", 0, 0.2),
        ("w", ["XADD", "s", "2-1", "f", "v"]),
        ("read", 0),  # everything after the reset point
    ])


def test_failed_served_waiter_counts_as_a_failed_call(compare, rill_server):
    compare([
        ("admin", ["CONFIG", "RESETSTAT"]),
        ("w", ["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
        ("send", 0, ["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]),
        ("blocked", 1),
        ("w", ["XGROUP", "DESTROY", "s", "g"]),
        ("read", 0),
        ("admin", ["INFO", "errorstats"]),
    ])
    stats = RawClient(rill_server.port).call("INFO", "commandstats").decode()
    line = next(x for x in stats.split("\r\n") if x.startswith("cmdstat_xreadgroup:"))
    assert "calls=1," in line and "rejected_calls=0,failed_calls=1" in line, line


def test_xreadgroup_in_multi_never_blocks(compare):
    compare([
        ("w", ["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]),
        ("w", ["MULTI"]),
        ("w", ["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]),
        ("w", ["XADD", "s", "1-1", "f", "v"]),
        ("w", ["XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"]),
        ("w", ["EXEC"]),
    ])


# -- served propagation and WATCH (in-process) ----------------------------------------------------------


@pytest.fixture
def inproc():
    load_all()
    server = Server()
    effects: list = []
    server.propagation.attach("observer", effects.append)
    client = server.new_client()
    return server, client, effects




def test_served_xreadgroup_is_propagated_after_the_xadd(inproc):
    server, producer, effects = inproc
    run(server, producer, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    waiter, noack = server.new_client(), server.new_client()
    assert run(server, waiter, "XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "BLOCK", "0", "STREAMS", "s", ">") == b""
    assert run(server, noack, "XREAD", "BLOCK", "0", "STREAMS", "s", "$") == b""
    assert server.blocking.blocked_clients == 2
    effects.clear()
    run(server, producer, "XADD", "s", "5-1", "f", "v")
    assert b"".join(waiter.out).startswith(b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n5-1\r\n")
    assert b"".join(noack.out).startswith(b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n")
    assert server.blocking.blocked_clients == 0
    (xadd,), (claim,) = effects
    assert xadd == (0, [b"XADD", b"s", b"5-1", b"f", b"v"])
    assert claim[1][:6] == [b"XCLAIM", b"s", b"g", b"c", b"0", b"5-1"]
    assert claim[1][8:] == [b"RETRYCOUNT", b"1", b"FORCE", b"JUSTID", b"LASTID", b"5-1"]
    # a waiter that finds nothing more leaves propagation of later commands untouched
    run(server, waiter, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    effects.clear()
    run(server, producer, "XGROUP", "CREATECONSUMER", "s", "g", "d")
    run(server, producer, "SET", "k", "v")
    assert [argv for batch in effects for _, argv in batch] == [
        [b"XGROUP", b"CREATECONSUMER", b"s", b"g", b"d"], [b"SET", b"k", b"v"],
    ]


def test_served_noack_waiter_propagates_consumer_and_group_id(inproc):
    server, producer, effects = inproc
    run(server, producer, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    waiter = server.new_client()
    run(server, waiter, "XREADGROUP", "GROUP", "g", "new", "NOACK", "BLOCK", "0", "STREAMS", "s", ">")
    effects.clear()
    run(server, producer, "XADD", "s", "5-1", "f", "v")
    assert effects[1] == [
        (0, [b"MULTI"]), (0, [b"XGROUP", b"CREATECONSUMER", b"s", b"g", b"new"]),
        (0, [b"XGROUP", b"SETID", b"s", b"g", b"5-1", b"ENTRIESREAD", b"1"]), (0, [b"EXEC"]),
    ]


def test_xadd_touches_watched_keys(inproc):
    server, c, _ = inproc
    other = server.new_client()
    run(server, c, "XADD", "s", "1-1", "f", "v")
    for touch in (["XADD", "s", "2-1", "f", "v"], ["XDEL", "s", "1-1"], ["XTRIM", "s", "MAXLEN", "0"]):
        run(server, c, "WATCH", "s")
        run(server, c, "MULTI")
        run(server, c, "PING")
        run(server, other, *touch)
        assert run(server, c, "EXEC") == b"*-1\r\n", touch
