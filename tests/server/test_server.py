"""Server.call / execute_all bookkeeping: commandstats, the slowlog threshold, totals.

A fake clock makes every command take exactly the time the test says, so the
threshold's edge (Redis logs ``duration >= slowlog-log-slower-than``) is checked
exactly, through both the pipelined loop and the general path.
"""

from __future__ import annotations

import pytest
from rill.server import fastpath
from rill.server import server as server_module
from rill.server.commands import load_all
from rill.server.server import Server


class FakeClock:
    """perf_counter_ns for the server: each reading advances by ``step`` ns."""

    def __init__(self) -> None:
        self.now = 1_000_000_000
        self.step = 0

    def __call__(self) -> int:
        self.now += self.step
        return self.now


@pytest.fixture
def clocked(monkeypatch):
    load_all()
    clock = FakeClock()
    monkeypatch.setattr(server_module, "perf_counter_ns", clock)
    monkeypatch.setattr(fastpath, "perf_counter_ns", clock)  # execute_all's loop
    server = Server()
    client = server.new_client("127.0.0.1:5000", "127.0.0.1:6379")
    return server, client, clock


def run(server, client, *argvs: tuple[bytes, ...], pipelined: bool = True) -> None:
    commands = [list(a) for a in argvs]
    if pipelined:
        server.execute_all(client, commands)
    else:
        for argv in commands:
            server.execute(client, argv)


def slowlog_commands(server) -> list[list[bytes]]:
    return [e.argv for e in server.slowlog]


@pytest.mark.parametrize("pipelined", [True, False])
def test_threshold_zero_logs_a_command_that_took_no_time(clocked, pipelined):
    server, client, clock = clocked
    server.config.set("slowlog-log-slower-than", "0")
    clock.step = 0  # every command takes 0 us: Redis still logs it (0 >= 0)
    run(server, client, (b"PING",), (b"SET", b"k", b"v"), pipelined=pipelined)
    assert slowlog_commands(server) == [[b"SET", b"k", b"v"], [b"PING"]]
    assert [e.duration for e in server.slowlog] == [0, 0]


@pytest.mark.parametrize("pipelined", [True, False])
def test_threshold_edge_is_inclusive_in_microseconds(clocked, pipelined):
    server, client, clock = clocked
    server.config.set("slowlog-log-slower-than", "5")
    clock.step = 4_999  # 4.999 us: 4 us as Redis counts, below the threshold
    run(server, client, (b"GET", b"a"), pipelined=pipelined)
    clock.step = 5_000
    run(server, client, (b"GET", b"b"), pipelined=pipelined)
    clock.step = 5_999
    run(server, client, (b"GET", b"c"), pipelined=pipelined)
    assert slowlog_commands(server) == [[b"GET", b"c"], [b"GET", b"b"]]
    assert [e.duration for e in server.slowlog] == [5, 5]


def test_negative_threshold_logs_nothing(clocked):
    server, client, clock = clocked
    server.config.set("slowlog-log-slower-than", "-1")
    clock.step = 10**9
    run(server, client, (b"PING",), (b"GET", b"x"))
    assert not server.slowlog


def test_commandstats_and_total_commands(clocked):
    server, client, clock = clocked
    clock.step = 1_500  # 1.5 us per command
    run(server, client, (b"SET", b"k", b"1"), (b"INCR", b"k"), (b"INCR", b"k"), (b"GET", b"k"))
    run(server, client, (b"CONFIG", b"GET", b"hz"), pipelined=False)
    stats = {cmd.fullname: server.cmdstats.of(cmd) for cmd in server.table.all()
             if server.cmdstats.of(cmd).calls}
    assert {name: c.calls for name, c in stats.items()} == {"set": 1, "incr": 2, "get": 1, "config|get": 1}
    assert stats["incr"].nsec == 3_000
    assert server.stats.total_commands_processed == 5
    client.out.clear()
    run(server, client, (b"INFO", b"commandstats"))
    info = b"".join(client.out).decode()
    # microseconds are shown as Redis shows them, from the summed nanoseconds
    assert "cmdstat_incr:calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0" in info
    run(server, client, (b"CONFIG", b"RESETSTAT"))
    # As in Redis, RESETSTAT is counted after it ran: the one command since the reset.
    assert server.stats.total_commands_processed == 1
    assert [c.fullname for c in server.table.all() if server.cmdstats.of(c).calls] == ["config|resetstat"]


def test_command_counters_belong_to_their_server(clocked):
    """Two servers in one process share the command table's facts, not its counters:
    INFO commandstats and total_commands_processed of one never show the other's calls."""
    server, client, clock = clocked
    clock.step = 1_000
    other = Server()
    other_client = other.new_client("127.0.0.1:5001", "127.0.0.1:6379")
    run(server, client, (b"SET", b"k", b"1"), (b"GET", b"k"), (b"GET", b"k"))
    run(other, other_client, (b"GET", b"k"), pipelined=False)
    get = server.table.lookup_name(b"get")
    assert server.cmdstats.of(get).calls == 2 and other.cmdstats.of(get).calls == 1
    assert server.stats.total_commands_processed == 3
    assert other.stats.total_commands_processed == 1
    run(other, other_client, (b"CONFIG", b"RESETSTAT"), pipelined=False)
    assert server.cmdstats.of(get).calls == 2 and other.cmdstats.of(get).calls == 0


_TYPED = {b"get": [b"GET", b"k"], b"set": [b"SET", b"k", b"v"], b"mset": [b"MSET", b"k", b"v"],
          b"incr": [b"INCR", b"n"], b"hset": [b"HSET", b"h", b"f", b"v"], b"sadd": [b"SADD", b"s", b"m"],
          b"lpush": [b"LPUSH", b"l", b"a"], b"rpush": [b"RPUSH", b"l", b"a"], b"lpop": [b"LPOP", b"l"],
          b"rpop": [b"RPOP", b"l"], b"lrange": [b"LRANGE", b"l", b"0", b"-1"],
          b"xrange": [b"XRANGE", b"x", b"-", b"+"], b"xrevrange": [b"XREVRANGE", b"x", b"+", b"-", b"COUNT", b"1"],
          b"xreadgroup": [b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1", b"STREAMS", b"x", b">"],
          b"xack": [b"XACK", b"x", b"g", b"1-1", b"2-1"],
          b"zpopmin": [b"ZPOPMIN", b"z"], b"ping": [b"PING"]}


@pytest.mark.parametrize("name", list(_TYPED))
def test_a_replaced_handler_is_the_one_the_loop_calls(clocked, monkeypatch, name):
    """Compiled, these typed handlers are called through a C entry (fastpath.pxd's
    _c_call); the entry stands only for the handler it was made for, so a command whose
    handler is replaced runs the new one, and one put back runs as before."""
    server, client, _ = clocked
    fill = ([b"RPUSH", b"l", b"x", b"y", b"z"], [b"ZADD", b"z", b"1", b"a", b"2", b"b", b"3", b"c"],
            [b"XADD", b"x", b"1-1", b"f", b"v"], [b"XADD", b"x", b"2-1", b"g", b"w"],
            [b"XADD", b"x", b"3-1", b"f", b"v"], [b"XADD", b"x", b"4-1", b"f", b"v"],
            [b"XGROUP", b"CREATE", b"x", b"g", b"0"],
            [b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"2", b"STREAMS", b"x", b">"])
    run(server, client, *fill)
    cmd = server.table.lookup_name(name)
    original = cmd.handler
    seen = []

    def spy(c, argv):
        seen.append(argv)
        return original(c, argv)

    argv = _TYPED[name]
    monkeypatch.setattr(cmd, "handler", spy)
    run(server, client, tuple(argv), tuple(argv))
    assert seen == [argv, argv]
    monkeypatch.setattr(cmd, "handler", original)
    run(server, client, tuple(argv))
    assert len(seen) == 2
    # The replies are the handler's, through the spy or the entry: as a server never patched gives.
    other = Server()
    other_client = other.new_client("127.0.0.1:5001", "127.0.0.1:6379")
    run(other, other_client, *fill, tuple(argv), tuple(argv), tuple(argv))
    assert [bytes(r) for r in client.out] == [bytes(r) for r in other_client.out]
    assert len(client.out) == len(fill) + 3
