"""server/blocking.py without sockets: the registry driven with stand-in clients, and the
server's parking, serving, timeouts and unblocking on an in-process server."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rill.protocol.reply import NULL_ARRAY, ReplyError
from rill.server.blocking import UNBLOCKED_ERR, BlockingRegistry, Wait, value_kind
from rill.server.commands import load_all
from rill.server.commands.table import TABLE, WRITE
from rill.server.outcomes import Block
from rill.server.server import Server
from rill.storage.list import ListValue


# -- the registry alone: stand-in clients, databases and commands ---------------------------
class FakeClient:
    """What the registry touches of a client: its database and its current wait."""

    def __init__(self, db_id: int = 0) -> None:
        self.db = SimpleNamespace(id=db_id)
        self.blocked: Wait | None = None


class FakeTimer:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def _wait(client: FakeClient, keys: list[bytes], timeout: float = 0.0, **block_kw) -> Wait:
    return Wait(client, Block(keys, timeout, **block_kw), None, [b"FAKE", *keys])  # type: ignore[arg-type]


def _parked(registry: BlockingRegistry, keys: list[bytes], db_id: int = 0, **block_kw) -> Wait:
    wait = _wait(FakeClient(db_id), keys, **block_kw)
    registry.park(wait)
    return wait


def test_queues_are_fifo_per_key_and_a_client_waits_in_each_of_its_keys():
    registry = BlockingRegistry()
    a = _parked(registry, [b"x", b"y"])
    b = _parked(registry, [b"y"])
    c = _parked(registry, [b"y", b"x", b"y"])  # a key named twice waits once
    assert list(registry.waiters[(0, b"x")]) == [a, c]
    assert list(registry.waiters[(0, b"y")]) == [a, b, c]
    assert c.keys == [b"y", b"x"]
    assert registry.blocked_clients == 3
    assert all(w.client.blocked is w for w in (a, b, c))


def test_unpark_leaves_every_queue_once_and_drops_empty_ones():
    registry = BlockingRegistry()
    a = _parked(registry, [b"x", b"y"])
    b = _parked(registry, [b"y"])
    a.timer = timer = FakeTimer()
    registry.unpark(a)
    assert (0, b"x") not in registry.waiters
    assert list(registry.waiters[(0, b"y")]) == [b]
    assert a.client.blocked is None and registry.blocked_clients == 1
    assert timer.cancelled and a.timer is None
    registry.unpark(a)  # already answered (a timeout racing a service): nothing happens twice
    assert registry.blocked_clients == 1 and list(registry.waiters[(0, b"y")]) == [b]
    registry.unpark(b)
    assert registry.waiters == {} and registry.blocked_clients == 0


def test_a_newer_wait_of_the_same_client_is_not_undone_by_the_old_one():
    registry = BlockingRegistry()
    client = FakeClient()
    old = _wait(client, [b"k"])
    registry.park(old)
    registry.unpark(old)
    new = _wait(client, [b"k"])
    registry.park(new)
    registry.unpark(old)
    assert client.blocked is new and list(registry.waiters[(0, b"k")]) == [new]


def test_eager_counts_follow_waiters_that_a_missing_key_may_serve():
    registry = BlockingRegistry()
    typed = _parked(registry, [b"k"], wake=b"list")
    group = _parked(registry, [b"k", b"j"], wake=b"stream", on_gone=True)
    anything = _parked(registry, [b"k"])
    assert registry.eager == {(0, b"k"): 2, (0, b"j"): 1}
    registry.unpark(group)
    assert registry.eager == {(0, b"k"): 1}
    registry.unpark(anything)
    registry.unpark(typed)
    assert registry.eager == {}


def test_signal_readies_only_keys_someone_waits_on_in_that_database():
    registry = BlockingRegistry()
    _parked(registry, [b"a"], db_id=0)
    _parked(registry, [b"b"], db_id=3)
    registry.signal(0, b"nobody")
    registry.signal(3, b"a")
    assert registry.ready == {}
    registry.signal(3, b"b")
    registry.signal(0, b"a")
    registry.signal(3, b"b")  # twice: served once, in the order first signalled
    assert registry.take_ready() == [(3, b"b"), (0, b"a")]
    assert registry.ready == {} and registry.take_ready() == []


def test_signal_db_readies_every_waited_key_of_that_database():
    registry = BlockingRegistry()
    for db_id, key in ((0, b"a"), (1, b"b"), (1, b"c")):
        _parked(registry, [key], db_id=db_id)
    registry.signal_db(1)
    assert registry.take_ready() == [(1, b"b"), (1, b"c")]


@pytest.fixture(scope="module")
def table():
    load_all()
    return TABLE


def test_signal_command_readies_the_key_arguments_of_a_write(table):
    registry = BlockingRegistry()
    for key in (b"k1", b"k3", b"dst"):
        _parked(registry, [key])
    mset = table.lookup_name(b"mset")  # keys at 1, 3, 5...
    assert mset.flags & WRITE
    registry.signal_command(0, mset, [b"MSET", b"k1", b"v", b"k2", b"v", b"k3", b"v"])
    assert registry.take_ready() == [(0, b"k1"), (0, b"k3")]
    lmpop = table.lookup_name(b"lmpop")  # movable keys: numkeys decides
    registry.signal_command(0, lmpop, [b"LMPOP", b"2", b"k0", b"k3", b"LEFT"])
    assert registry.take_ready() == [(0, b"k3")]
    registry.signal_command(0, table.lookup_name(b"rename"), [b"RENAME", b"src", b"dst"])
    assert registry.take_ready() == [(0, b"dst")]


def test_stream_commands_are_left_to_signal_themselves(table):
    """XDEL, XSETID, XACK, ... wake nobody in Redis; XADD and XGROUP DESTROY call signal."""
    registry = BlockingRegistry()
    _parked(registry, [b"s"], wake=b"stream", on_gone=True)
    for name, argv in ((b"xdel", [b"XDEL", b"s", b"1-1"]), (b"xadd", [b"XADD", b"s", b"*", b"f", b"v"]),
                       (b"xsetid", [b"XSETID", b"s", b"5-0"]),
                       (b"xgroup|destroy", [b"XGROUP", b"DESTROY", b"s", b"g"])):
        registry.signal_command(0, table.lookup_name(name), argv)
    assert registry.ready == {}
    registry.signal_command(0, table.lookup_name(b"del"), [b"DEL", b"s"])  # deleting the key does
    assert registry.take_ready() == [(0, b"s")]


def test_value_kind_names_what_a_waiter_can_be_served_by():
    assert value_kind(None) is None
    assert value_kind(b"abc") == b"string" and value_kind(bytearray(b"x")) == b"string"
    assert value_kind(ListValue([b"x"])) == b"list"


def test_a_wait_keeps_its_deadline_and_what_to_retry():
    client = FakeClient()
    forever = _wait(client, [b"k"])
    assert forever.deadline == 0.0
    timed = Wait(client, Block([b"k"], 2.5, [b"XREAD", b"resolved"]), None,  # type: ignore[arg-type]
                 [b"XREAD", b"$"])
    assert timed.deadline == pytest.approx(timed.started + 2.5)
    assert timed.argv == [b"XREAD", b"resolved"] and timed.original == [b"XREAD", b"$"]
    assert timed.timeout_reply is NULL_ARRAY


# -- the server's blocking on an in-process server (no sockets, a stand-in loop) -------------
class FakeLoop:
    """The event loop's timer API, driven by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[tuple[float, object, tuple]] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, fn, *args):
        timer = FakeTimer()
        self.timers.append((when, lambda: None if timer.cancelled else fn(*args), timer))
        return timer

    def fire_all(self) -> None:
        timers, self.timers = self.timers, []
        for _when, run, _timer in timers:
            run()


@pytest.fixture
def looped():
    load_all()
    server = Server()
    server.loop = FakeLoop()
    return server


def _blpop(server: Server, client, *keys: bytes, timeout: bytes = b"0") -> None:
    server.execute(client, [b"BLPOP", *keys, timeout])


def test_a_deadline_arms_one_timer_and_its_expiry_answers_the_timeout_reply(looped):
    server = looped
    waiter = server.new_client()
    _blpop(server, waiter, b"q", timeout=b"1.5")
    (when, _run, timer), = server.loop.timers
    assert when == pytest.approx(server.loop.now + 1.5, abs=0.05)
    assert server.blocking.in_timeout_table() == 1
    server.loop.fire_all()
    assert waiter.blocked is None and b"".join(waiter.out) == b"*-1\r\n"
    assert server.blocking.blocked_clients == 0 and server.blocking.waiters == {}


def test_no_deadline_no_timer_and_a_served_wait_cancels_its_timer(looped):
    server = looped
    forever, timed, producer = server.new_client(), server.new_client(), server.new_client()
    _blpop(server, forever, b"q")
    assert server.loop.timers == [] and server.blocking.in_timeout_table() == 0
    _blpop(server, timed, b"q", timeout=b"5")
    server.execute(producer, [b"RPUSH", b"q", b"a", b"b"])
    assert b"".join(forever.out) == b"*2\r\n$1\r\nq\r\n$1\r\na\r\n"
    assert b"".join(timed.out) == b"*2\r\n$1\r\nq\r\n$1\r\nb\r\n"
    (_when, _run, timer), = server.loop.timers
    assert timer.cancelled
    server.loop.fire_all()  # a late timer of a served wait answers nothing
    assert b"".join(timed.out) == b"*2\r\n$1\r\nq\r\n$1\r\nb\r\n"


def test_unblock_ends_a_wait_with_a_reply_worked_out_then_or_an_error(looped):
    server = looped
    a, b = server.new_client(), server.new_client()
    _blpop(server, a, b"q")
    _blpop(server, b, b"q")
    server.blocking.unblock(a, lambda: 7)  # WAIT's count of acks, taken when the wait ends
    assert b"".join(a.out) == b":7\r\n" and a.blocked is None
    blpop = server.table.lookup_name(b"blpop")
    failed = server.cmdstats.of(blpop).failed_calls
    server.blocking.unblock(b, UNBLOCKED_ERR, sample=True)
    assert b"".join(b.out) == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
    assert server.cmdstats.of(blpop).failed_calls == failed + 1
    assert server.stats.errorstats[b"UNBLOCKED"] == 1
    server.blocking.unblock(b, ReplyError("ERR not waiting"))  # a client no longer blocked: nothing
    assert b"".join(b.out) == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"


def test_a_gone_client_leaves_no_waiter_behind(looped):
    server = looped
    waiter = server.new_client()
    _blpop(server, waiter, b"q", b"r", timeout=b"3")
    server.client_gone(waiter)
    assert server.blocking.waiters == {} and server.blocking.blocked_clients == 0
    assert server.loop.timers[0][2].cancelled


# -- serving other families (in-process, with stand-in commands) ---------------------------
class FakeCommand:
    """Just what the registry touches of a Command: a handler and its key facts
    (its counters are the server's, found by this object)."""

    flags = 0
    first_key = 1
    last_key = 1
    key_step = 1

    def __init__(self, handler) -> None:
        self.handler = handler

    def key_positions(self, argv):
        return [1]


@pytest.fixture
def registry_server():
    from rill.server.commands import load_all
    from rill.server.server import Server

    load_all()
    return Server()


def _park(server, handler, keys, **block_kw):
    from rill.server.outcomes import Block

    client = server.new_client()
    cmd = FakeCommand(handler)
    server.blocking.block(client, cmd, [b"FAKE", *keys], Block(keys, 0, **block_kw))
    return client


def _signal(server, key, db=0):
    server.blocking.signal(db, key)
    server.blocking.serve_ready()


def test_registry_wake_types_and_on_gone(registry_server):
    from rill.server.outcomes import Block
    from rill.storage.list import ListValue

    server = registry_server
    calls: list[tuple[str, bytes | None]] = []

    def handler_for(name):
        def handler(c, argv):
            calls.append((name, c.server.blocking.serving))
            value = c.db.lookup(argv[1])
            if name == "group" and (value is None or type(value) is not ListValue):
                return b"gone"
            if name == "any" and value == b"go":
                return b"went"
            return Block([argv[1]], 0, [b"FAKE", argv[1], b"again"], wake=None)
        return handler

    streamish = _park(server, handler_for("typed"), [b"k"], wake=b"list")
    group = _park(server, handler_for("group"), [b"k"], wake=b"list", on_gone=True)
    anything = _park(server, handler_for("any"), [b"k"])
    db = server.keyspace[0]
    db.set(b"k", b"a string")
    _signal(server, b"k")
    # the typed waiter is not retried for a string; on_gone and wake=None ones are
    assert calls == [("group", b"k"), ("any", b"k")]
    assert b"".join(group.out) == b"$4\r\ngone\r\n" and group.blocked is None
    assert anything.blocked is not None and anything.blocked.argv == [b"FAKE", b"k", b"again"]
    calls.clear()
    db.delete(b"k")
    _signal(server, b"k")
    assert calls == [("any", b"k")]  # a missing key: only the wake=None waiter
    calls.clear()
    db.set(b"k", ListValue([b"x"]))
    _signal(server, b"k")
    assert calls == [("typed", b"k"), ("any", b"k")]
    db.set(b"k", b"go")
    _signal(server, b"k")
    assert b"".join(anything.out) == b"$4\r\nwent\r\n"
    assert streamish.blocked is not None and server.blocking.blocked_clients == 1
    server.client_gone(streamish)
    assert server.blocking.blocked_clients == 0 and not server.blocking.waiters
    assert not server.blocking.eager


def test_registry_keeps_places_and_deadlines_on_fruitless_retries(registry_server):
    from rill.server.outcomes import Block

    server = registry_server
    order: list[int] = []

    def handler_for(i):
        def handler(c, argv):
            order.append(i)
            return Block([argv[1]], 5.0)
        return handler

    clients = [_park(server, handler_for(i), [b"q"]) for i in range(4)]
    deadlines = [c.blocked.deadline for c in clients]
    for _ in range(3):
        _signal(server, b"q")
    assert order == [0, 1, 2, 3] * 3
    assert [c.blocked.deadline for c in clients] == deadlines
    assert list(server.blocking.waiters[(0, b"q")]) == [c.blocked for c in clients]


def test_parse_timeout_follows_redis():
    from rill.protocol.reply import ReplyError
    from rill.server.blocking import parse_timeout

    assert parse_timeout(b"0") == 0.0
    assert parse_timeout(b"1.5") == 1.5
    assert parse_timeout(b"0.0001") == 0.001  # rounded up to a millisecond
    assert parse_timeout(b"-0.0001") == 0.0  # ...so this one is "forever"
    assert parse_timeout(b"0x10") == 16.0
    assert parse_timeout(b"100", unit_ms=True) == 0.1
    for bad, msg in ((b"x", b"not a float"), (b"-1", b"negative"), (b"inf", b"negative"),
                     (b" 1", b"not a float"), (b"nan", b"not a float")):
        with pytest.raises(ReplyError) as e:
            parse_timeout(bad)
        assert msg in e.value.message
    for bad, msg in ((b"1.5", b"not an integer"), (b"-1", b"negative")):
        with pytest.raises(ReplyError) as e:
            parse_timeout(bad, unit_ms=True)
        assert msg in e.value.message


