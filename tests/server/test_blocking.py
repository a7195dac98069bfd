"""Blocking list commands over real connections: order, timeouts, MULTI, disconnects, unblock."""

from __future__ import annotations

import socket
import time

import pytest

from tests.support import Waiter, encode_command


@pytest.fixture
def waiters(rill_server):
    made: list[Waiter] = []

    def make(n: int = 1, resp3: bool = False) -> list[Waiter]:
        out = []
        for _ in range(n):
            w = Waiter(rill_server.port)
            if resp3:
                w.call("HELLO", "3")
            made.append(w)
            out.append(w)
        return out

    yield make
    for w in made:
        try:
            w.close()
        except OSError:
            pass


def blocked(r) -> int:
    return r.info("clients")["blocked_clients"]


def wait_blocked(r, n: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while blocked(r) != n:
        assert time.monotonic() < deadline, f"expected {n} blocked clients, have {blocked(r)}"
        time.sleep(0.005)


def bulk_pair(key: str, value: str) -> bytes:
    return b"*2\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key.encode(), len(value), value.encode())


def test_waiters_are_served_in_fifo_order(r, waiters):
    ws = waiters(3)
    for i, w in enumerate(ws):
        w.send("BLPOP", "q", "0")
        wait_blocked(r, i + 1)
    assert r.rpush("q", "a", "b", "c") == 3
    assert [w.reply() for w in ws] == [bulk_pair("q", v) for v in "abc"]
    assert blocked(r) == 0 and r.exists("q") == 0


def test_fifo_kept_when_a_wake_up_finds_nothing(r, waiters):
    first, second = waiters(2)
    first.send("BRPOP", "q", "0")
    wait_blocked(r, 1)
    second.send("BRPOP", "q", "0")
    wait_blocked(r, 2)
    # the key is signalled but empty again when served: both stay, in their order
    with r.pipeline(transaction=True) as p:
        p.lpush("q", "x").delete("q").execute()
    assert first.silent() and second.silent()
    r.lpush("q", "y")
    assert first.reply() == bulk_pair("q", "y")
    assert second.silent()
    r.lpush("q", "z")
    assert second.reply() == bulk_pair("q", "z")


def test_multi_key_waiter_is_served_from_the_key_that_became_ready(r, waiters):
    (w,) = waiters(1)
    w.send("BLPOP", "k1", "k2", "k2", "k1", "0")
    wait_blocked(r, 1)
    r.rpush("k2", "b")
    assert w.reply() == bulk_pair("k2", "b")
    # both keys get data in one transaction: the first key signalled serves it
    w.send("BLPOP", "k1", "k2", "0")
    wait_blocked(r, 1)
    with r.pipeline(transaction=True) as p:
        p.rpush("k2", "second").rpush("k1", "first").execute()
    assert w.reply() == bulk_pair("k2", "second")
    assert r.lrange("k1", 0, -1) == [b"first"]


def test_blmpop_waiters_share_a_transactions_pushes(r, waiters):
    ws = waiters(4)
    forms = [("LEFT", "1"), ("RIGHT", "10"), ("LEFT", "10"), ("RIGHT", "1")]
    for i, (w, (where, count)) in enumerate(zip(ws, forms, strict=True)):
        w.send("BLMPOP", "0", "2", "b1", "b2", where, "COUNT", count)
        wait_blocked(r, i + 1)
    with r.pipeline(transaction=True) as p:
        p.lpush("b1", "a", "b", "c", "d", "e").lpush("b2", "1", "2", "3", "4", "5").execute()
    assert ws[0].reply() == b"*2\r\n$2\r\nb1\r\n*1\r\n$1\r\ne\r\n"
    assert ws[1].reply() == b"*2\r\n$2\r\nb1\r\n*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n"
    assert ws[2].reply() == b"*2\r\n$2\r\nb2\r\n*5\r\n" + b"".join(
        b"$1\r\n%d\r\n" % i for i in (5, 4, 3, 2, 1)
    )
    assert ws[3].silent()
    r.lpush("b2", "1", "2", "3")
    assert ws[3].reply() == b"*2\r\n$2\r\nb2\r\n*1\r\n$1\r\n1\r\n"


@pytest.mark.parametrize("timeout", ["0.2", "0.25"])
def test_fractional_timeouts(r, waiters, timeout):
    (w,) = waiters(1)
    start = time.monotonic()
    w.send("BLPOP", "nothing", timeout)
    assert w.reply() == b"*-1\r\n"
    elapsed = time.monotonic() - start
    # the lower bound is exact; the upper one only tells a fraction from a rounded-up second
    assert float(timeout) - 0.01 <= elapsed < float(timeout) + 0.7
    assert blocked(r) == 0


def test_timeout_replies_per_command_and_protocol(r, waiters):
    (w2,) = waiters(1)
    (w3,) = waiters(1, resp3=True)
    for cmd in (("BLPOP", "n", "0.01"), ("BRPOP", "n", "0.01"), ("BLMPOP", "0.01", "1", "n", "LEFT"),
                ("BLMOVE", "n", "d", "LEFT", "LEFT", "0.01"), ("BRPOPLPUSH", "n", "d", "0.01")):
        w2.send(*cmd)
        w3.send(*cmd)
        assert w2.reply() == b"*-1\r\n"  # even BLMOVE: a timed-out wait is a null array
        assert w3.reply() == b"_\r\n"


def test_timeout_is_not_reset_by_a_fruitless_wake_up(r, waiters):
    (w,) = waiters(1)
    start = time.monotonic()
    w.send("BLPOP", "q", "2")
    wait_blocked(r, 1)
    time.sleep(1)
    with r.pipeline(transaction=True) as p:
        p.lpush("q", "x").delete("q").execute()
    assert w.reply() == b"*-1\r\n"
    assert time.monotonic() - start < 2.9  # a reset timeout would end at 3 s or later


def test_zero_timeout_blocks_until_data(r, waiters):
    (w,) = waiters(1)
    w.send("BRPOPLPUSH", "src", "dst", "0")
    wait_blocked(r, 1)
    assert w.silent(0.5)
    r.rpush("dst", "bar")
    r.rpush("src", "foo")
    assert w.reply() == b"$3\r\nfoo\r\n"
    assert r.lrange("dst", 0, -1) == [b"foo", b"bar"]


def test_pushes_inside_multi_wake_waiters_only_after_exec(r, waiters):
    (w,) = waiters(1)
    w.send("BLPOP", "q", "0")
    wait_blocked(r, 1)
    with r.pipeline(transaction=True) as p:
        p.lpush("q", "a").lpush("q", "b").lpush("q", "c")
        p.execute()
    assert w.reply() == bulk_pair("q", "c")
    assert r.lrange("q", 0, -1) == [b"b", b"a"]


def test_key_turned_into_a_string_keeps_list_waiters_blocked(r, waiters):
    (w,) = waiters(1)
    w.send("BLPOP", "q", "0")
    wait_blocked(r, 1)
    with r.pipeline(transaction=True) as p:
        p.lpush("q", "a").delete("q").set("q", "foo").execute()
    assert w.silent()
    r.set("q", "other")
    assert w.silent()
    r.delete("q")
    r.lpush("q", "b")
    assert w.reply() == bulk_pair("q", "b")


def test_disconnected_waiter_leaves_nothing_behind(r, rill_server, waiters):
    ws = waiters(3)
    for i, w in enumerate(ws):
        w.send("BLPOP", "q", "0")
        wait_blocked(r, i + 1)
    ws[0].sock.shutdown(socket.SHUT_RDWR)
    ws[0].close()
    wait_blocked(r, 2)
    r.rpush("q", "a")
    assert ws[1].reply() == bulk_pair("q", "a")
    ws[2].close()
    wait_blocked(r, 0)
    r.rpush("q", "kept")
    assert r.lrange("q", 0, -1) == [b"kept"]
    assert b"flags=b" not in r.execute_command("CLIENT", "LIST")


def test_client_unblock(r, waiters):
    (w,) = waiters(1)
    wid = w.call("CLIENT", "ID")
    wid = int(wid[1:-2])
    for how, expect in ((None, b"*-1\r\n"), ("TIMEOUT", b"*-1\r\n"),
                        ("ERROR", b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n")):
        w.send("BLMPOP", "0", "1", "l", "RIGHT")
        wait_blocked(r, 1)
        assert b"flags=b " in r.execute_command("CLIENT", "LIST", "ID", wid)
        args = ["CLIENT", "UNBLOCK", wid] + ([how] if how else [])
        assert r.execute_command(*args) == 1
        assert w.reply() == expect
        assert w.silent(0.05)
    assert r.execute_command("CLIENT", "UNBLOCK", wid) == 0
    w.send("BLPOP", "l", "0")
    wait_blocked(r, 1)
    r.lpush("l", "foo")
    assert w.reply() == bulk_pair("l", "foo")


def test_pipelined_commands_wait_behind_a_blocked_one(r, waiters):
    (w,) = waiters(1)
    w.send_raw(encode_command(["BLPOP", "q", "0"]) + encode_command(["PING"]) + encode_command(["LLEN", "q"]))
    wait_blocked(r, 1)
    assert w.silent()
    r.rpush("q", "a", "b")
    assert w.reply() == bulk_pair("q", "a")
    assert w.reply() == b"+PONG\r\n"
    assert w.reply() == b":1\r\n"


def test_blmove_chains_and_cycles(r, waiters):
    w1, w2 = waiters(2)
    w1.send("BLMOVE", "l1", "l2", "RIGHT", "LEFT", "0")
    wait_blocked(r, 1)
    w2.send("BLMOVE", "l2", "l3", "LEFT", "RIGHT", "0")
    wait_blocked(r, 2)
    r.rpush("l1", "foo")
    assert w1.reply() == b"$3\r\nfoo\r\n" and w2.reply() == b"$3\r\nfoo\r\n"
    assert (r.exists("l1"), r.exists("l2"), r.lrange("l3", 0, -1)) == (0, 0, [b"foo"])
    # circular: the element ends where it started
    w1.send("BRPOPLPUSH", "c1", "c2", "0")
    wait_blocked(r, 1)
    w2.send("BRPOPLPUSH", "c2", "c1", "0")
    wait_blocked(r, 2)
    r.rpush("c1", "x")
    assert w1.reply() == b"$1\r\nx\r\n" and w2.reply() == b"$1\r\nx\r\n"
    assert r.lrange("c1", 0, -1) == [b"x"] and r.exists("c2") == 0
    # self-referential
    w1.send("BRPOPLPUSH", "s", "s", "0")
    wait_blocked(r, 1)
    r.rpush("s", "me")
    assert w1.reply() == b"$2\r\nme\r\n"
    assert r.lrange("s", 0, -1) == [b"me"]


def test_blmove_to_a_waiting_blpop(r, waiters):
    popper, mover = waiters(2)
    popper.send("BLPOP", "target", "0")
    wait_blocked(r, 1)
    mover.send("BLMOVE", "src", "target", "LEFT", "RIGHT", "0")
    wait_blocked(r, 2)
    r.rpush("src", "foo")
    assert mover.reply() == b"$3\r\nfoo\r\n"
    assert popper.reply() == bulk_pair("target", "foo")
    assert r.exists("target") == 0


def test_blmove_with_wrong_type_destination(r, waiters):
    w1, w2 = waiters(2)
    r.set("t1", "nolist")
    w1.send("BRPOPLPUSH", "src", "t1", "0")
    wait_blocked(r, 1)
    w2.send("BRPOPLPUSH", "src", "t2", "0")
    wait_blocked(r, 2)
    r.rpush("src", "a", "b", "c")
    assert w1.reply().startswith(b"-WRONGTYPE")
    assert w2.reply() == b"$1\r\nc\r\n"
    assert r.lrange("src", 0, -1) == [b"a", b"b"]
    assert r.lrange("t2", 0, -1) == [b"c"]


def test_key_moved_into_place_wakes_waiter(r, waiters):
    (w,) = waiters(1)
    w.send("BLPOP", "foo", "0")
    wait_blocked(r, 1)
    r.lpush("bob", "abc", "def", "hij")
    r.rename("bob", "foo")
    assert w.reply() == bulk_pair("foo", "hij")


def test_swapdb_wakes_waiter(r, waiters):
    (w,) = waiters(1)
    r.execute_command("SELECT", 1)
    r.rpush("k", "hello")
    r.execute_command("SELECT", 0)
    assert w.call("SELECT", "9") == b"+OK\r\n"
    w.send("BRPOP", "k", "5")
    wait_blocked(r, 1)
    r.execute_command("SWAPDB", 1, 9)
    assert w.reply() == bulk_pair("k", "hello")


def test_waiter_in_another_database(r, waiters):
    (w,) = waiters(1)
    w.call("SELECT", "3")
    w.send("BLPOP", "k", "0")
    wait_blocked(r, 1)
    r.rpush("k", "db0")  # db 0: not the key it waits on
    assert w.silent()
    r.execute_command("SELECT", 3)
    r.rpush("k", "db3")
    assert w.reply() == bulk_pair("k", "db3")
    assert r.lrange("k", 0, -1) == []
    r.execute_command("SELECT", 0)
    assert r.lrange("k", 0, -1) == [b"db0"]


def test_many_waiters_one_push_each(r, waiters):
    ws = waiters(50)
    for w in ws:
        w.send("BLPOP", "q", "0")
    wait_blocked(r, 50)
    for i in range(50):
        r.rpush("q", str(i))
    got = [w.reply() for w in ws]
    assert sorted(got) == sorted(bulk_pair("q", str(i)) for i in range(50))
    assert all(w.silent(0.01) for w in ws)
    assert blocked(r) == 0


def test_info_and_commandstats_count_a_blocking_call_once(r, waiters):
    (w,) = waiters(1)
    r.config_resetstat()
    w.send("BLPOP", "q", "0")
    wait_blocked(r, 1)
    assert b"flags=b" in r.execute_command("CLIENT", "LIST")
    r.rpush("q", "a")
    assert w.reply() == bulk_pair("q", "a")
    assert r.info("commandstats")["cmdstat_blpop"]["calls"] == 1
    assert blocked(r) == 0


# -- the same blocking scenarios on rill and on redis-server ----------------------------
def _play(port: int, steps: list[tuple], clients: int, resp3: bool) -> list[tuple[int, bytes]]:
    """Run a scenario; every reply read, tagged with the connection it came from."""
    conns = [Waiter(port) for _ in range(clients + 1)]
    admin = conns[-1]
    admin.call("FLUSHALL")
    if resp3:
        for w in conns[:-1]:
            w.call("HELLO", "3")
    ids = [int(w.call("CLIENT", "ID")[1:-2]) for w in conns[:-1]]
    log: list[tuple[int, bytes]] = []
    try:
        for step in steps:
            op, *rest = step
            if op == "send":
                conns[rest[0]].send(*rest[1])
            elif op == "call":
                log.append((rest[0], conns[rest[0]].call(*rest[1])))
            elif op == "read":
                log.append((rest[0], conns[rest[0]].reply()))
            elif op == "blocked":
                deadline = time.monotonic() + 5
                while True:
                    info = admin.call("INFO", "clients")
                    if b"blocked_clients:%d\r\n" % rest[0] in info:
                        break
                    assert time.monotonic() < deadline, f"never {rest[0]} blocked"
                    time.sleep(0.005)
            elif op == "unblock":
                log.append((-1, admin.call("CLIENT", "UNBLOCK", ids[rest[0]], *rest[1:])))
            elif op == "silent":
                log.append((rest[0], b"silent" if conns[rest[0]].silent(0.05) else b"NOT SILENT"))
            else:
                raise AssertionError(op)
        for i, w in enumerate(conns[:-1]):
            log.append((i, b"end " + (b"silent" if w.silent(0.05) else b"NOT SILENT")))
    finally:
        for w in conns:
            w.close()
    return log


SCENARIOS = {
    "fifo": (3, [
        ("send", 0, ["BLPOP", "q", "0"]), ("blocked", 1), ("send", 1, ["BRPOP", "q", "0"]), ("blocked", 2),
        ("send", 2, ["BLMPOP", "0", "1", "q", "LEFT", "COUNT", "2"]), ("blocked", 3),
        ("call", 3, ["RPUSH", "q", "a", "b", "c", "d", "e"]),
        ("read", 0), ("read", 1), ("read", 2), ("call", 3, ["LRANGE", "q", "0", "-1"]),
    ]),
    "multi-key and the first ready key": (2, [
        ("send", 0, ["BLPOP", "k1", "k2", "k2", "0"]), ("blocked", 1),
        ("send", 1, ["BLMPOP", "0", "2", "k2", "k1", "RIGHT", "COUNT", "9"]), ("blocked", 2),
        ("call", 2, ["MULTI"]), ("call", 2, ["RPUSH", "k2", "x", "y"]), ("call", 2, ["RPUSH", "k1", "z"]),
        ("call", 2, ["EXEC"]), ("read", 0), ("read", 1), ("call", 2, ["LRANGE", "k1", "0", "-1"]),
    ]),
    "push and delete inside MULTI wakes nobody": (1, [
        ("send", 0, ["BLPOP", "q", "0"]), ("blocked", 1),
        ("call", 1, ["MULTI"]), ("call", 1, ["LPUSH", "q", "a"]), ("call", 1, ["DEL", "q"]),
        ("call", 1, ["SET", "q", "s"]), ("call", 1, ["EXEC"]), ("silent", 0),
        ("call", 1, ["DEL", "q"]), ("call", 1, ["LPUSH", "q", "b"]), ("read", 0),
    ]),
    "blmove chain, cycle and wrong-type destination": (3, [
        ("send", 0, ["BLMOVE", "a", "b", "LEFT", "RIGHT", "0"]), ("blocked", 1),
        ("send", 1, ["BRPOPLPUSH", "b", "a", "0"]), ("blocked", 2),
        ("call", 2, ["SET", "s", "str"]),
        ("send", 2, ["BLMOVE", "c", "s", "LEFT", "LEFT", "0"]), ("blocked", 3),
        ("call", 3, ["RPUSH", "a", "1"]), ("read", 0), ("read", 1),
        ("call", 3, ["RPUSH", "c", "2", "3"]), ("read", 2),
        ("call", 3, ["LRANGE", "a", "0", "-1"]), ("call", 3, ["LRANGE", "c", "0", "-1"]),
    ]),
    "timeouts and unblock": (3, [
        ("send", 0, ["BLPOP", "q", "0.05"]), ("send", 1, ["BLMOVE", "q", "d", "LEFT", "LEFT", "0.05"]),
        ("read", 0), ("read", 1),
        ("send", 0, ["BRPOP", "q", "0"]), ("send", 1, ["BLMPOP", "0", "1", "q", "LEFT"]),
        ("send", 2, ["BRPOPLPUSH", "q", "d", "0"]), ("blocked", 3),
        ("unblock", 0), ("unblock", 1, "TIMEOUT"), ("unblock", 2, "ERROR"), ("unblock", 2),
        ("read", 0), ("read", 1), ("read", 2),
    ]),
    "rename, swapdb and a key moved into place": (2, [
        ("send", 0, ["BLPOP", "dst", "0"]), ("blocked", 1),
        ("call", 2, ["RPUSH", "src", "a", "b"]), ("call", 2, ["RENAME", "src", "dst"]), ("read", 0),
        ("call", 1, ["SELECT", "5"]), ("send", 1, ["BRPOP", "k", "0"]), ("blocked", 1),
        ("call", 2, ["RPUSH", "k", "db0"]), ("silent", 1), ("call", 2, ["SWAPDB", "0", "5"]), ("read", 1),
    ]),
    "pipelined after a blocked command": (1, [
        ("send", 0, ["BLPOP", "q", "0"]), ("send", 0, ["LLEN", "q"]), ("send", 0, ["PING"]), ("blocked", 1),
        ("call", 1, ["RPUSH", "q", "a", "b"]), ("read", 0), ("read", 0), ("read", 0),
    ]),
    "inside MULTI nothing blocks": (1, [
        ("call", 0, ["MULTI"]), ("call", 0, ["BLPOP", "q", "0"]), ("call", 0, ["BLMOVE", "q", "d", "LEFT", "LEFT", "0"]),
        ("call", 0, ["BRPOPLPUSH", "q", "d", "0"]), ("call", 0, ["BLMPOP", "0", "1", "q", "LEFT"]),
        ("call", 0, ["EXEC"]),
    ]),
}


@pytest.mark.parametrize("resp3", [False, True], ids=["resp2", "resp3"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenarios_match_redis(rill_server, oracle_server, name, resp3):
    clients, steps = SCENARIOS[name]
    mine = _play(rill_server.port, steps, clients, resp3)
    theirs = _play(oracle_server.port, steps, clients, resp3)
    assert mine == theirs
