"""Connection commands and protocol handling against a real rill-server."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from tests.conftest import SideBySide
from tests.support import (
    RawClient,
    RecordingTransport,
    StepLoop,
    Waiter,
    encode_command,
    start_redis,
    start_rill,
    wait_until,
)


def test_ping_echo_side_by_side(sbs):
    sbs.run([("PING",), ("PING", "hello"), ("PING", "a", "b"), ("ECHO", "x"), ("ECHO",),
             ("ECHO", "a", "b")])


def test_unknown_commands_side_by_side(sbs):
    sbs.check("FOO")
    sbs.check("FOO", "bar", "baz")
    sbs.check("FOO", "x" * 300)
    sbs.check("FOO", *[f"arg{i}" for i in range(60)])
    sbs.check("CONFIG", "NOPE")
    sbs.check("CONFIG")
    sbs.check("CLIENT", "NOPE", "x")


def test_select_and_swapdb_errors_side_by_side(sbs):
    sbs.run([("SELECT", "100"), ("SELECT", "x"), ("SELECT", "-1"), ("SELECT", "15"), ("SELECT", "0"),
             ("SWAPDB", "a", "1"), ("SWAPDB", "0", "b"), ("SWAPDB", "0", "99"), ("SWAPDB", "0", "1"),
             ("SWAPDB", "1", "0")])


def test_hello_side_by_side(sbs):
    sbs.run([("HELLO", "4"), ("HELLO", "x"), ("HELLO", "3", "FOO"), ("HELLO", "2", "SETNAME", "a b")])
    for args in (("HELLO", "2", "AUTH", "default", "x"), ("HELLO", "3", "SETNAME", "me")):
        mine, theirs = sbs.both(*args)
        # the client id differs; the rest of the map is the same
        assert mine.split(b"id\r\n")[0] == theirs.split(b"id\r\n")[0]
        assert mine.split(b"mode")[1] == theirs.split(b"mode")[1]
    assert sbs.rill.call("PING") == b"+PONG\r\n"
    assert sbs.rill.call("CLIENT", "GETNAME") == b"$2\r\nme\r\n"


def test_resp3_null_and_double_shapes(rill_server):
    c = RawClient(rill_server.port)
    c.call("HELLO", "3")
    assert c.call("CLIENT", "GETNAME") == b"_\r\n"
    assert c.call("DEBUG", "PROTOCOL", "double") == b",3.141\r\n"
    assert c.call("DEBUG", "PROTOCOL", "map").startswith(b"%3\r\n")
    assert c.call("DEBUG", "PROTOCOL", "true") == b"#t\r\n"
    c.close()


def test_auth_and_noauth_side_by_side():
    rill = start_rill("--requirepass", "secret")
    oracle = start_redis("--requirepass", "secret")
    try:
        s = SideBySide.__new__(SideBySide)
        s.rill, s.oracle = RawClient(rill.port), RawClient(oracle.port)
        s.run([("PING",), ("GET", "x"), ("AUTH", "wrong"), ("AUTH", "bob", "secret"),
               ("AUTH", "a", "b", "c"), ("HELLO", "3"), ("AUTH", "secret"), ("PING",),
               ("AUTH", "default", "secret")])
        s.close()
    finally:
        rill.stop()
        oracle.stop()


def test_auth_without_password_side_by_side(sbs):
    sbs.run([("AUTH", "x"), ("AUTH", "default", "x"), ("AUTH", "default", "")])


def test_quit_closes_after_reply(rill_server):
    c = RawClient(rill_server.port)
    assert c.call("QUIT") == b"+OK\r\n"
    assert c.closed_by_peer()


def test_reset(rill_server):
    c = RawClient(rill_server.port)
    c.call("SELECT", "3")
    c.call("CLIENT", "SETNAME", "x")
    c.call("MULTI")
    assert c.call("RESET") == b"+RESET\r\n"
    assert c.call("CLIENT", "GETNAME") == b"$-1\r\n"
    assert b"db=0" in c.call("CLIENT", "INFO")
    assert c.call("EXEC") == b"-ERR EXEC without MULTI\r\n"
    c.close()


@pytest.mark.parametrize(
    "payload,error",
    [
        (b"*3000000000\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\nfoo\r\n", b"-ERR Protocol error: expected '$', got 'f'\r\n"),
        (b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$2000000000\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"SET k \"oops\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    ],
)
def test_protocol_errors_close_the_connection(rill_server, oracle_server, payload, error):
    for port in (rill_server.port, oracle_server.port):
        c = RawClient(port)
        c.send_raw(payload)
        assert c.read_reply() == error
        assert c.closed_by_peer()
        c.close()
    # the server is still healthy
    assert RawClient(rill_server.port).call("PING") == b"+PONG\r\n"


def test_inline_commands(rill_server):
    c = RawClient(rill_server.port)
    c.send_raw(b"PING\r\nECHO \"hello world\"\r\n\r\nPING\n")
    assert [c.read_reply() for _ in range(3)] == [b"+PONG\r\n", b"$11\r\nhello world\r\n", b"+PONG\r\n"]
    c.close()


@pytest.mark.parametrize("line", [
    b"ECHO\x0cs1\x0c\"v w\" \r\n",  # \f and \v do not end an unquoted argument...
    b"EXISTS\x0c's2'\x0c\"v w\" \r\n",
    b"ECHO\x0ba\r\n",
    b"\x0b\x0cECHO  a\r\n",  # ...but are skipped between arguments
    b"ECHO \"a\"\x0b\r\n",  # and may follow a closing quote
])
def test_inline_whitespace_bytes_side_by_side(rill_server, oracle_server, line):
    """Found by the fuzzer: rill split inline arguments on every isspace() byte."""
    replies = []
    for port in (rill_server.port, oracle_server.port):
        c = RawClient(port)
        c.send_raw(line + b"PING\r\n")
        replies.append((c.read_reply(), c.read_reply()))
        c.close()
    assert replies[0] == replies[1]


def test_inline_nul_before_newline_waits_like_redis(rill_server, oracle_server):
    """Redis finds an inline line's end with strchr, which stops at a NUL: the line stays
    incomplete (no reply), until 64 KiB pile up and it is too big."""
    for port in (rill_server.port, oracle_server.port):
        c = Waiter(port)
        c.send_raw(b"PING\x00\r\nPING\r\n")
        assert c.silent(0.3)
        c.send_raw(b"x" * 70000)
        assert c.read_reply() == b"-ERR Protocol error: too big inline request\r\n"
        assert c.closed_by_peer()
        c.close()


def test_pipeline_of_ten_thousand(rill_server):
    c = RawClient(rill_server.port)
    c.send_raw(b"*1\r\n$4\r\nPING\r\n" * 10_000)
    for _ in range(10_000):
        assert c.read_reply() == b"+PONG\r\n"
    c.close()


@pytest.mark.parametrize("which", ["rill", "redis"])
def test_pipeline_written_whole_before_reading_any_reply(which, rill_server, oracle_server):
    """30 MB of requests whose replies are as big, all sent before one reply is read:
    the replies fill both socket buffers while the client still writes, and the server
    must keep reading it (Redis buffers the replies) or both wait forever."""
    server = rill_server if which == "rill" else oracle_server
    c = RawClient(server.port, timeout=30)
    payload = b"x" * 100_000
    c.send_raw(encode_command([b"ECHO", payload]) * 300)
    for _ in range(300):
        assert c.read_reply() == b"$100000\r\n" + payload + b"\r\n"
    assert c.call("PING") == b"+PONG\r\n"
    c.close()


@pytest.mark.parametrize("start", [start_rill, start_redis])
def test_a_reply_past_the_hard_output_limit_closes_the_client(start):
    """The limit counts a reply when it is made, not what the socket could not take:
    a 2 MB reply under a 1 MB hard limit closes the client, however fast it reads."""
    with start("--client-output-buffer-limit", "normal 1mb 0 0") as server:
        c = RawClient(server.port)
        assert c.call("SETRANGE", "k", 2_000_000, "v") == b":2000001\r\n"
        assert c.call("STRLEN", "k") == b":2000001\r\n"
        c.send_raw(encode_command([b"GET", b"k"]))
        assert c.closed_by_peer()
        c.close()


@pytest.mark.parametrize("start", [start_rill, start_redis])
@pytest.mark.parametrize("command", [
    ("HRANDFIELD", "h", -999_999_999), ("HRANDFIELD", "h", -499_999_999, "WITHVALUES"),
    ("SRANDMEMBER", "s", -999_999_999), ("ZRANDMEMBER", "z", -999_999_999),
    ("ZRANDMEMBER", "z", -499_999_999, "WITHSCORES"),
])
def test_a_huge_negative_count_stops_at_the_hard_output_limit(start, command):
    """unit/obuf-limits "HRANDFIELD with huge count stopped mid-run": Redis stops adding
    elements once the client is past its hard limit and closes it; rill must not build
    the billion elements first (gigabytes). A script's call has no such limit in either."""
    with start("--client-output-buffer-limit", "normal 1000000 0 0") as server:
        c = RawClient(server.port)
        assert c.call("HSET", "h", "a", "b") == b":1\r\n"
        assert c.call("SADD", "s", "a") == b":1\r\n"
        assert c.call("ZADD", "z", 1, "a") == b":1\r\n"
        # 200000 elements of at least 6 bytes: past 1 MB, answered whole to a script
        small = [*command[:2], -200_000, *command[3:]]
        script = "return #redis.call(unpack(ARGV))"
        expected = 400_000 if len(command) == 4 else 200_000
        assert c.call("EVAL", script, 0, *small) == b":%d\r\n" % expected
        c.send_raw(encode_command(command))
        assert c.closed_by_peer(timeout=60)
        c.close()
        assert RawClient(server.port).call("PING") == b"+PONG\r\n"


@pytest.mark.parametrize("start", [start_rill, start_redis])
def test_a_client_past_its_soft_output_limit_is_closed_by_the_cron(start):
    """A client past its soft limit that is written nothing more is still closed once
    the soft seconds lapse: Redis's clientsCron frees it, logged "closed for overcoming
    of output buffer limits.". It is not closed before (1 s: at least a second)."""
    import time

    with start("--client-output-buffer-limit", "normal 0 1mb 1") as server:
        c = RawClient(server.port)
        other = RawClient(server.port)
        assert c.call("SETRANGE", "k", 16_000_000, "v") == b":16000001\r\n"
        c.send_raw(encode_command([b"GET", b"k"]))  # not read: most of it stays queued
        time.sleep(0.5)
        assert other.call("CLIENT", "LIST").count(b"id=") == 2
        # Closed within the 3 s more that a fixed sleep used to wait, as soon as it is.
        wait_until(lambda: other.call("CLIENT", "LIST").count(b"id=") == 1, timeout=3.0)
        assert c.closed_by_peer()
        assert "closed for overcoming of output buffer limits." in server.log()
        c.close()
        other.close()


def test_the_soft_output_limit_needs_more_than_its_seconds_in_whole_seconds(monkeypatch):
    """checkClientOutputBufferLimits counts the soft limit's seconds on the unixtime
    clock: over only once the whole seconds since it was first passed are more than
    the configured ones (2 s into a 1 s limit), never at exactly 1."""
    import rill.server.client as client_module

    server = _loop_server()
    server.obuf_limits["normal"] = (0, 1000, 1)
    conn, transport = _connect(server)
    transport.get_write_buffer_size = lambda: 5000
    transport.abort = transport.close  # the cron drops it, output and all
    clock = [100.9]
    monkeypatch.setattr(client_module.time, "time", lambda: clock[0])
    assert not conn._check_output_limits()  # first passed: at second 100
    clock[0] = 101.99  # one whole second on: not more than 1
    assert not conn._check_output_limits(from_cron=True) and not transport.closed
    clock[0] = 102.0
    assert conn._check_output_limits(from_cron=True) and conn.closed and transport.closed


def test_redis_py_resp2_and_resp3(rill_server):
    for protocol in (2, 3):
        r = redis.Redis(port=rill_server.port, protocol=protocol)
        assert r.ping() is True
        assert r.echo("hi") == b"hi"
        assert r.client_id() > 0
        r.close()


async def test_redis_py_asyncio(rill_server):
    for protocol in (2, 3):
        r = redis.asyncio.Redis(port=rill_server.port, protocol=protocol)
        results = await asyncio.gather(*(r.echo(f"m{i}") for i in range(50)))
        assert results == [f"m{i}".encode() for i in range(50)]
        await r.aclose()


@pytest.mark.parametrize("resp3", [False, True])
def test_pipelined_reply_shapes_side_by_side(rill_server, oracle_server, resp3):
    # One write carrying every reply shape the dispatcher encodes inline (bulk,
    # integer, null, +OK) next to errors, arrays and CLIENT REPLY OFF/SKIP: the
    # byte stream must be Redis's.
    script = [
        ("SET", "k", "v"), ("GET", "k"), ("GET", "missing"), ("INCR", "n"), ("INCR", "k"),
        ("LPUSH", "l", "a", "b"), ("LRANGE", "l", "0", "-1"), ("HSET", "h", "f", "1"), ("HGET", "h", "nope"),
        ("CLIENT", "REPLY", "SKIP"), ("GET", "k"), ("INCR", "n"), ("GET", "missing"),
        ("CLIENT", "REPLY", "OFF"), ("SET", "k", "w"), ("GET", "k"), ("INCR", "k"), ("GET", "missing"),
        ("CLIENT", "REPLY", "ON"), ("GET", "k"), ("GET", "n"), ("NOSUCH",), ("GET",),
        ("ECHO", "end-of-script"),
    ]
    data = b"".join(encode_command(args) for args in script)
    streams = []
    for port in (rill_server.port, oracle_server.port):
        c = RawClient(port)
        c.call("FLUSHALL")
        if resp3:
            c.call("HELLO", "3")
        c.send_raw(data)
        replies = []
        while not replies or replies[-1] != b"$13\r\nend-of-script\r\n":
            replies.append(c.read_reply())
        c.close()
        streams.append(replies)
    assert streams[0] == streams[1]
    assert len(streams[0]) == len(script) - 7  # SKIP silences itself and one more, OFF itself and four


def test_small_reply_table_bounds_side_by_side(sbs, sbs3):
    # bulk strings and integers around the size of the ready-made encodings
    for s in (sbs, sbs3):
        s.run([("SET", "a", "y" * 1023), ("GET", "a"), ("SET", "b", "y" * 1024), ("GET", "b"),
               ("SET", "e", ""), ("GET", "e"), ("INCRBY", "n", "1023"), ("INCR", "n"), ("DECRBY", "n", "3000"),
               ("INCRBY", "m", "9223372036854775807"), ("STRLEN", "a"), ("STRLEN", "b")])


# -- a peer's EOF, ordered against the loop iteration deterministically in-process -----------------
def _loop_server():
    from rill.server.commands import load_all
    from rill.server.server import Server

    load_all()
    server = Server()
    server.loop = StepLoop()
    return server


def _connect(server):
    from rill.server.connection import Connection

    conn = Connection(server)
    transport = RecordingTransport()
    conn.connection_made(transport)
    return conn, transport


def test_eof_while_blocked_ends_the_wait_before_a_push_can_serve_it():
    server = _loop_server()
    waiter, waiter_t = _connect(server)
    pusher, pusher_t = _connect(server)
    waiter.data_received(encode_command(["BLPOP", "q", "0"]))
    assert server.blocking.blocked_clients == 1
    # EOF and the push reach the server in the same loop iteration, EOF first
    assert waiter.eof_received() is True
    assert server.blocking.blocked_clients == 0
    pusher.data_received(encode_command(["RPUSH", "q", "x"]))
    server.loop.run_iteration()
    # nobody reads the waiter's replies any more: the element stays in the list
    assert waiter_t.written == [] and waiter_t.closed
    pusher.data_received(encode_command(["LRANGE", "q", "0", "-1"]))
    server.loop.run_iteration()
    assert pusher_t.written == [b":1\r\n", b"*1\r\n$1\r\nx\r\n"]


def test_eof_after_a_push_served_the_wait_still_sends_the_reply():
    server = _loop_server()
    waiter, waiter_t = _connect(server)
    pusher, _ = _connect(server)
    waiter.data_received(encode_command(["BLPOP", "q", "0"]))
    pusher.data_received(encode_command(["RPUSH", "q", "x"]))
    assert waiter.eof_received() is True  # before the iteration's replies were written
    server.loop.run_iteration()
    assert waiter_t.written == [b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n"] and waiter_t.closed


def test_eof_drops_commands_queued_behind_a_wait_and_sends_what_ran():
    server = _loop_server()
    conn, transport = _connect(server)
    conn.data_received(encode_command(["SET", "k", "v"]) + encode_command(["BLPOP", "q", "0"])
                       + encode_command(["SET", "k", "w"]))
    conn.eof_received()
    server.loop.run_iteration()
    assert transport.written == [b"+OK\r\n"] and transport.closed
    assert server.blocking.blocked_clients == 0 and conn.client.id not in server.clients
    other, other_t = _connect(server)
    other.data_received(encode_command(["GET", "k"]))
    server.loop.run_iteration()
    assert other_t.written == [b"$1\r\nv\r\n"]


# -- a big read runs in bounded batches (READ_BATCH), with the semantics of one read ---------------
def _spy_parser(conn):
    """Swap in a parser that records the size of every chunk the connection feeds it
    (not the parser's own feeds of a chunk's rest)."""
    from rill.protocol.parser import RequestParser

    class Spy(RequestParser):
        def feed(self, data):
            if not depth:
                fed.append(len(data))
            depth.append(1)
            try:
                return super().feed(data)
            finally:
                depth.pop()

    fed: list[int] = []
    depth: list[int] = []
    conn.parser = Spy(conn.server.proto_max_bulk_len)
    return fed


def _replies(transport) -> bytes:
    return b"".join(transport.written)


def test_a_huge_read_is_parsed_in_bounded_batches_and_answered_in_order():
    from rill.server.connection import READ_BATCH

    server = _loop_server()
    conn, transport = _connect(server)
    fed = _spy_parser(conn)
    n = 4000
    data = b"".join(encode_command(["INCR", "n"]) for _ in range(n))
    data += encode_command(["ECHO", "x" * (3 * READ_BATCH)]) + encode_command(["GET", "n"])
    assert len(data) > 8 * READ_BATCH
    conn.data_received(data)
    server.loop.run_iteration()
    assert max(fed) <= READ_BATCH and sum(fed) == len(data)
    expected = b"".join(b":%d\r\n" % i for i in range(1, n + 1))
    expected += b"$%d\r\n%s\r\n" % (3 * READ_BATCH, b"x" * (3 * READ_BATCH)) + b"$4\r\n4000\r\n"
    assert _replies(transport) == expected


def test_a_multi_spanning_a_batch_boundary_runs_as_one_transaction():
    from rill.server.connection import READ_BATCH

    server = _loop_server()
    conn, transport = _connect(server)
    fed = _spy_parser(conn)
    queued = 2000
    data = (encode_command(["MULTI"]) + b"".join(encode_command(["RPUSH", "l", str(i)]) for i in range(queued))
            + encode_command(["EXEC"]) + encode_command(["LLEN", "l"]))
    assert len(data) > 3 * READ_BATCH
    conn.data_received(data)
    server.loop.run_iteration()
    assert len(fed) > 3
    expected = (b"+OK\r\n" + b"+QUEUED\r\n" * queued
                + b"*%d\r\n" % queued + b"".join(b":%d\r\n" % i for i in range(1, queued + 1))
                + b":%d\r\n" % queued)
    assert _replies(transport) == expected


def test_a_blocking_command_in_the_middle_of_a_big_read_holds_the_rest_until_served():
    from rill.server.connection import READ_BATCH

    server = _loop_server()
    conn, transport = _connect(server)
    _spy_parser(conn)
    before, after = 500, 1500
    data = (b"".join(encode_command(["INCR", "a"]) for _ in range(before)) + encode_command(["BLPOP", "q", "0"])
            + b"".join(encode_command(["INCR", "b"]) for _ in range(after)))
    assert len(data) > 2 * READ_BATCH
    conn.data_received(data)
    server.loop.run_iteration()
    assert server.blocking.blocked_clients == 1
    assert _replies(transport) == b"".join(b":%d\r\n" % i for i in range(1, before + 1))
    pusher, pusher_t = _connect(server)
    pusher.data_received(encode_command(["GET", "b"]))  # nothing after the BLPOP ran
    server.loop.run_iteration()
    assert pusher_t.written == [b"$-1\r\n"]
    del transport.written[:]
    pusher.data_received(encode_command(["RPUSH", "q", "x"]))
    server.loop.run_iteration()
    server.loop.run_iteration()
    assert _replies(transport) == b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n" + b"".join(b":%d\r\n" % i for i in range(1, after + 1))


def _io_counts(c: RawClient) -> tuple[list[int], int]:
    """INFO stats' read and write events and bytes, and the length of that reply."""
    reply = c.call("INFO", "stats")
    fields = dict(line.split(":", 1) for line in reply.decode().split("\r\n") if ":" in line)
    return [int(fields[k]) for k in ("total_reads_processed", "total_writes_processed",
                                     "total_net_input_bytes", "total_net_output_bytes")], len(reply)


def _io_deltas(port: int) -> list[int]:
    """What INFO stats' read and write events and bytes grow by over a fixed exchange
    (the polls that wait for a disconnect taken out)."""
    a = RawClient(port)
    before, first_reply = _io_counts(a)
    for _ in range(5):
        assert a.call("PING") == b"+PONG\r\n"
    a.send_raw(encode_command(["PING"]) * 3)  # one write: one read event on the server
    assert [a.read_reply() for _ in range(3)] == [b"+PONG\r\n"] * 3
    b = RawClient(port)
    assert b.call("ECHO", "x" * 100) == b"$100\r\n" + b"x" * 100 + b"\r\n"
    b.close()  # its end of stream: one more read
    polls = []

    def b_gone() -> bool:
        reply = a.call("INFO", "clients")
        polls.append(len(reply))
        return b"connected_clients:1\r\n" in reply

    wait_until(b_gone)
    after, _ = _io_counts(a)
    a.close()
    # Each poll is one read and one write of its own; the first INFO stats' reply
    # (written after its figures were taken) differs in length between the servers.
    return [after[0] - before[0] - len(polls), after[1] - before[1] - len(polls),
            after[2] - before[2] - len(polls) * len(encode_command(["INFO", "clients"])),
            after[3] - before[3] - sum(polls) - first_reply]


def test_info_counts_read_and_write_events_and_bytes_side_by_side():
    """total_reads_processed / total_writes_processed count read and write events (a
    pipeline read at once is one of each; a client's end of stream is a read too), and
    total_net_input_bytes / total_net_output_bytes their bytes, as Redis counts them."""
    deltas = []
    for server in (start_rill(), start_redis()):
        try:
            deltas.append(_io_deltas(server.port))
        finally:
            server.stop()
    # Reads: 5 PINGs, the pipeline, b's ECHO and end of stream, the last INFO stats.
    # Writes: the first INFO stats' reply, 5 PONGs, the pipeline's, b's ECHO reply.
    assert deltas[0][:2] == deltas[1][:2] == [9, 8]
    # In: 8 PINGs, the ECHO and the last INFO stats (counted as read, before it reports).
    requests = (8 * len(encode_command(["PING"])) + len(encode_command(["ECHO", "x" * 100]))
                + len(encode_command(["INFO", "stats"])))
    assert deltas[0][2] == deltas[1][2] == requests
    assert deltas[0][3] == deltas[1][3] == 8 * len(b"+PONG\r\n") + len(b"$100\r\n" + b"x" * 100 + b"\r\n")


def test_config_resetstat_zeroes_the_io_counters_side_by_side():
    """After CONFIG RESETSTAT, INFO stats counts its own read and request and
    RESETSTAT's reply, and nothing before."""
    seen = []
    for server in (start_rill(), start_redis()):
        try:
            c = RawClient(server.port)
            c.call("SET", "k", "v" * 1000)
            c.call("GET", "k")
            assert c.call("CONFIG", "RESETSTAT") == b"+OK\r\n"
            seen.append(_io_counts(c)[0])
            c.close()
        finally:
            server.stop()
    assert seen[0] == seen[1] == [1, 1, len(encode_command(["INFO", "stats"])), len(b"+OK\r\n")]


def _stat(c: RawClient, name: str) -> int:
    info = c.call("INFO", "stats").decode()
    return int(dict(line.split(":", 1) for line in info.split("\r\n") if ":" in line)[name])


def _resized_both_ways(port: int) -> None:
    c = RawClient(port)
    wait_until(lambda: _stat(c, "reply_buffer_shrinks") >= 1)
    c.call("SET", "big", "x" * 20_000)

    def filled_and_grown() -> bool:
        c.call("GET", "big")  # fills the buffer: the cron doubles it
        return _stat(c, "reply_buffer_expands") >= 1

    wait_until(filled_and_grown)
    c.close()


def test_reply_buffer_resizes_count_in_info_side_by_side():
    """The cron's reply buffer resizes count in INFO's reply_buffer_shrinks (a new
    client's 16 KB buffer, its peak under half of it) and reply_buffer_expands (a buffer
    its replies keep filling), on rill as on redis-server."""
    for server in (start_rill(), start_redis()):
        try:
            _resized_both_ways(server.port)
        finally:
            server.stop()
