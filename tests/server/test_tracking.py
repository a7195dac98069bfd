"""CLIENT TRACKING (client-side caching) side by side with redis-server.

Each scenario drives several connections in a fixed order against one server and
records every reply and every invalidation message each connection receives, as
bytes; the transcripts of rill and of redis-server must be identical. Client ids
differ between the two servers, so a connection's id is written in scripts as
``@name`` and shown in replies as ``:@name``.
"""

from __future__ import annotations

import time

import pytest
import redis

from tests.support import RawClient, encode_command

Step = tuple


class Session:
    """Named connections on one server; ``@name`` in arguments is that connection's id."""

    def __init__(self, port: int, names: list[str]) -> None:
        self.port = port
        self.conns: dict[str, RawClient] = {}
        self.ids: dict[str, int] = {}
        self.last: dict[str, str] = {}
        for name in names:
            self.open(name)

    def open(self, name: str) -> None:
        c = RawClient(self.port)
        self.conns[name] = c
        reply = c.call("CLIENT", "ID")
        self.ids[name] = int(reply[1:-2])

    def _arg(self, a):
        if isinstance(a, str) and a.startswith("@"):
            return str(self.ids[a[1:]])
        return a

    def send(self, name: str, *args) -> None:
        self.last[name] = str(args[0]).upper()
        self.conns[name].send_raw(encode_command([self._arg(a) for a in args]))

    def read(self, name: str) -> bytes:
        reply = self.conns[name].read_reply()
        for other, cid in self.ids.items():
            ref = b"@" + other.encode()
            if reply == b":%d\r\n" % cid and self.last.get(name) == "CLIENT":  # ID, GETREDIR
                reply = b":" + ref + b"\r\n"
            for before in (b"id\r\n", b"redirect\r\n", b"tracking-redir-broken\r\n"):
                reply = reply.replace(before + b":%d\r\n" % cid, before + b":" + ref + b"\r\n")
            reply = reply.replace(b"redir=%d " % cid, b"redir=" + ref + b" ")
        return reply

    def close(self) -> None:
        for c in self.conns.values():
            c.close()


def transcript(port: int, names: list[str], script: list[Step]) -> list[tuple]:
    """Run ``script`` on a fresh server state and return what each read received.

    Steps: ``(name, *args)`` sends a command and reads its reply; ``("send", name,
    *args)`` sends without reading; ``("read", name)`` reads one reply (or push);
    ``("sleep", seconds)``; ``("open", name)`` connects another client.
    """
    admin = RawClient(port)
    admin.call("FLUSHALL")
    admin.call("CONFIG", "SET", "tracking-table-max-keys", "1000000")
    s = Session(port, names)
    out: list[tuple] = []
    try:
        for step in script:
            kind = step[0]
            if kind == "send":
                s.send(step[1], *step[2:])
            elif kind == "read":
                out.append((step, s.read(step[1])))
            elif kind == "sleep":
                time.sleep(step[1])
            elif kind == "open":
                s.open(step[1])
            else:
                s.send(kind, *step[1:])
                out.append((step, s.read(kind)))
    finally:
        s.close()
        admin.call("CONFIG", "SET", "tracking-table-max-keys", "1000000")
        admin.close()
    return out


def same(rill_server, oracle_server, names: list[str], script: list[Step]) -> list[bytes]:
    """The transcript on rill equals redis-server's, step by step; returns rill's replies."""
    mine = transcript(rill_server.port, names, script)
    theirs = transcript(oracle_server.port, names, script)
    for (step, a), (_, b) in zip(mine, theirs, strict=True):
        assert a == b, f"{step!r}: rill {a!r} != redis {b!r}"
    return [reply for _, reply in mine]


def test_resp3_invalidation_on_the_own_connection(rill_server, oracle_server):
    got = same(rill_server, oracle_server, ["r", "w"], [
        ("r", "HELLO", "3"),
        ("r", "CLIENT", "TRACKING", "ON"),
        ("w", "SET", "a", "1"),
        ("w", "SET", "b", "1"),
        ("r", "GET", "a"),
        ("w", "INCR", "b"),  # never read by r: no message
        ("w", "INCR", "a"),
        ("read", "r"),
        ("w", "INCR", "a"),  # forgotten after the first invalidation
        ("r", "PING"),
        ("r", "MGET", "a", "b", "c"),
        ("w", "DEL", "a", "b", "c"),
        ("read", "r"),
        ("read", "r"),
        ("r", "PING"),
    ])
    assert got.count(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\na\r\n") == 2


def test_redirect_to_a_resp2_subscriber_and_to_a_resp3_client(rill_server, oracle_server):
    got = same(rill_server, oracle_server, ["r", "sub", "r3", "w"], [
        ("sub", "SUBSCRIBE", "__redis__:invalidate"),
        ("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "@sub"),
        ("r", "CLIENT", "GETREDIR"),
        ("r", "GET", "k"),
        ("w", "SET", "k", "1"),
        ("read", "sub"),
        ("r3", "HELLO", "3"),
        ("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "@r3"),
        ("r", "GET", "k"),
        ("w", "SET", "k", "2"),
        ("read", "r3"),
        ("r3", "PING"),
        # A RESP2 client that is not subscribed gets nothing, and keeps working.
        ("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "@w"),
        ("r", "GET", "k"),
        ("w", "SET", "k", "3"),
        ("w", "PING"),
    ])
    assert b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$1\r\nk\r\n" in got
    assert b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n" in got


def test_bcast_prefixes_noloop_and_transactions(rill_server, oracle_server):
    got = same(rill_server, oracle_server, ["r", "sub", "w"], [
        ("sub", "SUBSCRIBE", "__redis__:invalidate"),
        ("r", "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "@sub", "PREFIX", "a:", "PREFIX", "b:"),
        ("r", "MULTI"),
        ("r", "INCR", "b:2"),
        ("r", "INCR", "a:1"),
        ("r", "INCR", "a:2"),
        ("r", "INCR", "c:1"),
        ("r", "EXEC"),
        ("read", "sub"),  # one message per prefix, keys in order
        ("read", "sub"),
        ("r", "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "@sub", "PREFIX", "c:"),
        ("r", "CLIENT", "TRACKINGINFO"),
        ("w", "SET", "c:9", "x"),
        ("read", "sub"),
        ("r", "CLIENT", "TRACKING", "OFF"),
        ("r", "CLIENT", "TRACKING", "ON", "BCAST", "REDIRECT", "@sub", "NOLOOP"),
        ("w", "SET", "other1", "1"),
        ("read", "sub"),
        ("r", "SET", "mine", "1"),  # NOLOOP: not announced to r itself
        ("w", "SET", "other2", "1"),
        ("read", "sub"),
        ("sub", "PING"),
    ])
    message = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"
    assert message + b"*2\r\n$3\r\na:1\r\n$3\r\na:2\r\n" in got
    assert message + b"*1\r\n$6\r\nother2\r\n" in got
    assert message + b"*1\r\n$4\r\nmine\r\n" not in got


def test_noloop_in_standard_mode(rill_server, oracle_server):
    same(rill_server, oracle_server, ["r", "w"], [
        ("r", "HELLO", "3"),
        ("r", "CLIENT", "TRACKING", "ON", "NOLOOP"),
        ("r", "MGET", "k1", "loop", "k2"),
        ("w", "SET", "k1", "1"),
        ("read", "r"),
        ("r", "SET", "loop", "1"),  # its own write: no message
        ("w", "SET", "k2", "1"),
        ("read", "r"),
        ("r", "PING"),
    ])


def test_optin_optout_and_caching(rill_server, oracle_server):
    same(rill_server, oracle_server, ["r", "w"], [
        ("r", "HELLO", "3"),
        ("r", "CLIENT", "TRACKING", "ON", "OPTIN"),
        ("r", "GET", "k1"),  # not cached: no CACHING yes
        ("r", "CLIENT", "CACHING", "YES"),
        ("r", "CLIENT", "TRACKINGINFO"),
        ("r", "CLIENT", "ID"),  # a CLIENT command keeps CACHING for the next one
        ("r", "GET", "k2"),  # cached
        ("r", "GET", "k3"),  # CACHING lapsed
        ("r", "CLIENT", "CACHING", "YES"),
        ("r", "MULTI"),
        ("r", "GET", "k4"),
        ("r", "GET", "k5"),
        ("r", "EXEC"),  # the whole transaction is cached
        ("w", "MSET", "k1", "1", "k2", "1", "k3", "1", "k4", "1", "k5", "1"),
        ("read", "r"),
        ("read", "r"),
        ("read", "r"),
        ("r", "PING"),
        ("r", "CLIENT", "TRACKING", "OFF"),
        ("r", "CLIENT", "TRACKING", "ON", "OPTOUT"),
        ("r", "CLIENT", "CACHING", "NO"),
        ("r", "CLIENT", "TRACKINGINFO"),
        ("r", "GET", "k1"),  # not cached
        ("r", "GET", "k2"),  # cached
        ("w", "MSET", "k1", "2", "k2", "2"),
        ("read", "r"),
        ("r", "PING"),
    ])


def test_own_writes_are_announced_after_the_reply(rill_server, oracle_server):
    got = same(rill_server, oracle_server, ["r"], [
        ("r", "HELLO", "3"),
        ("r", "CLIENT", "TRACKING", "ON"),
        ("r", "HSET", "h", "f", "1"),
        ("r", "HGET", "h", "f"),
        ("r", "HDEL", "h", "f"),
        ("read", "r"),
        ("r", "MSET", "a", "1", "b", "2"),
        ("r", "GET", "a"),
        ("r", "MULTI"),
        ("r", "INCR", "a"),
        ("r", "GET", "b"),
        ("r", "EXEC"),
        ("read", "r"),
        ("r", "GET", "a"),
        ("r", "MULTI"),
        ("r", "FLUSHDB"),
        ("r", "EXEC"),
        ("read", "r"),
        ("r", "PING"),
    ])
    hdel = got.index(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nh\r\n")
    assert got[hdel - 1] == b":1\r\n"  # HDEL's reply first
    assert b">2\r\n$10\r\ninvalidate\r\n_\r\n" in got


def test_lazy_expiry_during_a_read_is_announced_after_it(rill_server, oracle_server):
    try:
        same(rill_server, oracle_server, ["r"], [
            ("r", "HELLO", "3"),
            ("r", "CLIENT", "TRACKING", "ON"),
            ("r", "DEBUG", "SET-ACTIVE-EXPIRE", "0"),
            ("r", "MULTI"),
            ("r", "MSET", "x", "1", "y", "2"),
            ("r", "PEXPIRE", "y", "50"),
            ("r", "GET", "y"),
            ("r", "EXEC"),
            ("sleep", 0.1),
            ("r", "MGET", "x", "y"),
            ("read", "r"),
            ("r", "PING"),
        ])
    finally:
        for port in (rill_server.port, oracle_server.port):
            redis.Redis(port=port).execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_flush_invalidates_everything_with_a_null(rill_server, oracle_server):
    same(rill_server, oracle_server, ["r", "sub", "r3", "w"], [
        ("sub", "SUBSCRIBE", "__redis__:invalidate"),
        ("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "@sub"),
        ("r", "GET", "k"),
        ("w", "FLUSHALL"),
        ("read", "sub"),  # RESP2: *-1
        ("r3", "HELLO", "3"),
        ("r3", "CLIENT", "TRACKING", "ON"),
        ("w", "FLUSHDB"),
        ("read", "r3"),  # RESP3: _
        ("read", "sub"),
        # A RESP2 tracker redirecting to a RESP3 client: Redis sends the tracker's null.
        ("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "@r3"),
        ("w", "FLUSHALL", "ASYNC"),
        ("read", "r3"),
        ("read", "r3"),
        ("r3", "PING"),
    ])


def test_broken_redirect(rill_server, oracle_server):
    got = same(rill_server, oracle_server, ["r", "sub", "w"], [
        ("r", "HELLO", "3"),
        ("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "@sub"),
        ("w", "SET", "k", "1"),
        ("r", "GET", "k"),
        ("sub", "QUIT"),
        ("w", "SET", "k", "2"),
        ("read", "r"),
        ("r", "CLIENT", "TRACKINGINFO"),
        ("r", "CLIENT", "GETREDIR"),
    ])
    assert b">2\r\n$21\r\ntracking-redir-broken\r\n:@sub\r\n" in got


def test_client_list_flags_and_redir(rill_server, oracle_server):
    def flags(port: int, *args: str) -> tuple[str, str]:
        r = redis.Redis(port=port)
        sub = redis.Redis(port=port)
        try:
            sub_id = sub.client_id()
            r.execute_command("CLIENT", "TRACKING", "ON", *[a.replace("@sub", str(sub_id)) for a in args])
            info = r.client_info()
            redir = int(info["redir"])
            return info["flags"], "@sub" if redir == sub_id else str(redir)
        finally:
            r.close()
            sub.close()

    for args in [(), ("REDIRECT", "@sub"), ("BCAST",), ("BCAST", "PREFIX", "x", "NOLOOP")]:
        assert flags(rill_server.port, *args) == flags(oracle_server.port, *args)


def test_errors_side_by_side(sbs):
    sbs.run([
        ("CLIENT", "TRACKING", "maybe"),
        ("CLIENT", "TRACKING"),
        ("CLIENT", "TRACKING", "ON", "REDIRECT"),
        ("CLIENT", "TRACKING", "ON", "REDIRECT", "x"),
        ("CLIENT", "TRACKING", "ON", "REDIRECT", "999999"),
        ("CLIENT", "TRACKING", "ON", "PREFIX", "a"),
        ("CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"),
        ("CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"),
        ("CLIENT", "TRACKING", "ON", "BOGUS"),
        ("CLIENT", "TRACKING", "OFF", "BOGUS"),
        ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOOBAR", "PREFIX", "FOO"),
        ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "FOOBAR"),
        ("CLIENT", "CACHING", "YES"),
        ("CLIENT", "CACHING"),
        ("CLIENT", "GETREDIR"),
        ("CLIENT", "GETREDIR", "x"),
        ("CLIENT", "TRACKINGINFO"),
        ("CLIENT", "TRACKINGINFO", "x"),
        ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FOO", "PREFIX", "BAR"),
        ("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "FO"),
        ("CLIENT", "TRACKING", "ON"),
        ("CLIENT", "TRACKINGINFO"),
        ("CLIENT", "CACHING", "YES"),
        ("CLIENT", "TRACKING", "OFF"),
        ("CLIENT", "TRACKING", "ON", "OPTIN"),
        ("CLIENT", "TRACKING", "ON", "OPTOUT"),
        ("CLIENT", "CACHING", "NO"),
        ("CLIENT", "CACHING", "MAYBE"),
        ("CLIENT", "TRACKING", "ON", "BCAST"),
        ("CLIENT", "TRACKING", "ON", "REDIRECT", "1", "REDIRECT", "1"),
        ("CLIENT", "TRACKING", "OFF"),
    ])


@pytest.mark.parametrize("resp3", [False, True])
def test_trackinginfo_shapes(rill_server, oracle_server, resp3):
    from tests.conftest import SideBySide

    s = SideBySide(rill_server.port, oracle_server.port, resp3=resp3)
    try:
        for args in [(), ("NOLOOP",), ("OPTIN",), ("OPTOUT",), ("BCAST",),
                     ("BCAST", "PREFIX", "foo", "PREFIX", "bar", "NOLOOP")]:
            s.check("CLIENT", "TRACKING", "ON", *args)
            s.check("CLIENT", "TRACKINGINFO")
            s.check("CLIENT", "GETREDIR")
            s.check("CLIENT", "TRACKING", "OFF")
        s.check("CLIENT", "TRACKINGINFO")
    finally:
        s.close()


def test_info_counters(rill_server, oracle_server):
    def counters(port: int) -> list:
        r = redis.Redis(port=port)
        tracker = redis.Redis(port=port)
        bcast = redis.Redis(port=port)
        try:
            r.flushall()
            tracker.execute_command("CLIENT", "TRACKING", "ON")
            tracker.mget("k1", "k2", "k3")
            bcast.execute_command("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p:", "PREFIX", "q:")
            r.set("k1", "x")
            first = r.info()
            tracker.execute_command("CLIENT", "TRACKING", "OFF")
            bcast.execute_command("CLIENT", "TRACKING", "OFF")
            second = r.info()
            fields = ("tracking_clients", "tracking_total_keys", "tracking_total_items",
                      "tracking_total_prefixes")
            return [[info[f] for f in fields] for info in (first, second)]
        finally:
            r.flushall()
            for c in (r, tracker, bcast):
                c.close()

    # Turning tracking off leaves the table as it is: ids are dropped lazily.
    assert counters(rill_server.port) == counters(oracle_server.port) == [[2, 2, 2, 2], [0, 2, 2, 0]]


def test_scripts_track_their_declared_keys_once_they_read(rill_server, oracle_server):
    same(rill_server, oracle_server, ["r", "w"], [
        ("r", "HELLO", "3"),
        ("r", "CLIENT", "TRACKING", "ON"),
        ("r", "EVAL", "redis.call('set', 'k3', 'bar')", "2", "k1", "k2"),  # no read: nothing
        ("w", "MSET", "k2", "1", "k1", "1"),
        ("r", "EVAL", "redis.call('get', 'k3')", "2", "k1", "k2"),
        ("w", "MSET", "k2", "2", "k1", "2"),
        ("read", "r"),
        ("read", "r"),
        ("r", "EVAL_RO", "redis.call('ping')", "2", "k1", "k2"),  # no read command
        ("w", "MSET", "k2", "2", "k1", "2"),
        ("r", "EVAL_RO", "redis.call('get', 'k1')", "2", "k1", "k2"),
        ("w", "MSET", "k2", "3", "k1", "3"),
        ("read", "r"),
        ("read", "r"),
        ("r", "CLIENT", "TRACKING", "ON", "NOLOOP"),
        ("r", "GET", "k1"),
        ("r", "EVAL", "return redis.call('set', 'k1', '2')", "1", "k1"),  # its own write
        ("r", "GET", "k1"),
    ])


def test_table_limit_invalidates_keys_as_if_changed(rill_server, oracle_server):
    script: list[Step] = [("sub", "SUBSCRIBE", "__redis__:invalidate"),
                          ("r", "CLIENT", "TRACKING", "ON", "REDIRECT", "@sub")]
    script += [("r", "GET", f"key{i}") for i in range(250)]
    script.append(("w", "CONFIG", "SET", "tracking-table-max-keys", "1"))
    script.append(("w", "PING"))  # the next command trims the table (and the cron goes on)
    script += [("read", "sub")] * 249
    script.append(("r", "INFO", "stats"))
    mine = transcript(rill_server.port, ["r", "sub", "w"], script)
    theirs = transcript(oracle_server.port, ["r", "sub", "w"], script)

    def invalidated(t):
        return sorted(reply for step, reply in t if step[0] == "read")

    # Which keys go first is the server's choice (Redis: a random walk); how many is not.
    assert len(set(invalidated(mine))) == len(set(invalidated(theirs))) == 249
    tracked = [reply for step, reply in mine if step[1:] == ("INFO", "stats")][0]
    assert b"tracking_total_keys:1\r\n" in tracked


def test_unblocked_blmove_gets_its_reply_before_the_invalidation(rill_server, oracle_server):
    same(rill_server, oracle_server, ["b", "w"], [
        ("w", "RPUSH", "dst", "a"),
        ("b", "HELLO", "3"),
        ("b", "CLIENT", "TRACKING", "ON"),
        ("b", "LRANGE", "dst", "0", "-1"),
        ("send", "b", "BLMOVE", "src", "dst", "LEFT", "LEFT", "0"),
        ("sleep", 0.1),
        ("w", "RPUSH", "src", "foo"),
        ("read", "b"),
        ("read", "b"),
        ("b", "PING"),
    ])


def test_reset_and_disconnect_end_tracking(rill_server, oracle_server):
    same(rill_server, oracle_server, ["r", "w"], [
        ("r", "CLIENT", "TRACKING", "ON", "BCAST"),
        ("r", "RESET"),
        ("r", "CLIENT", "TRACKINGINFO"),
        ("w", "SET", "k", "1"),
        ("r", "PING"),
    ])
    for port in (rill_server.port, oracle_server.port):
        r = redis.Redis(port=port)
        r.execute_command("CLIENT", "TRACKING", "ON", "BCAST")
        r.close()
        probe = redis.Redis(port=port)
        deadline = time.monotonic() + 5
        while probe.info("clients")["tracking_clients"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert probe.info("clients")["tracking_clients"] == 0
        assert probe.info("stats")["tracking_total_prefixes"] == 0
        probe.close()


def test_tracking_gates_open_and_close(inproc):
    """While a client tracks, commands take the path that remembers keys and the
    keyspace signals every modified key; once nobody tracks and nothing is tracked,
    both are back to what they cost without tracking."""
    from tests.support import run_inproc

    server, client, _ = inproc
    other = server.new_client()
    assert not server._special and not server.keyspace.signal_all
    run_inproc(server, client, "CLIENT", "TRACKING", "ON")
    assert server._special and not server.keyspace.signal_all  # nothing tracked yet
    run_inproc(server, client, "GET", "k")
    assert server.keyspace.signal_all and list(server.tracking.table) == [b"k"]
    run_inproc(server, client, "CLIENT", "TRACKING", "OFF")
    assert not server._special and server.keyspace.signal_all  # the table still holds k
    run_inproc(server, other, "SET", "k", "1")  # invalidated lazily: nobody to tell
    assert not server.keyspace.signal_all and server.tracking.table == {}
    run_inproc(server, client, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "p")
    assert server.keyspace.signal_all
    run_inproc(server, client, "RESET")
    assert not server._special and not server.keyspace.signal_all
    assert b"".join(client.out) == b"+RESET\r\n"  # and no invalidation with it


def test_watch_still_works_while_every_key_is_signalled(inproc):
    from tests.support import run_inproc

    server, client, _ = inproc
    tracker, writer = server.new_client(), server.new_client()
    run_inproc(server, tracker, "CLIENT", "TRACKING", "ON", "BCAST")
    assert server.keyspace.signal_all
    run_inproc(server, client, "WATCH", "w")
    run_inproc(server, writer, "SET", "unrelated", "1")
    run_inproc(server, client, "MULTI")
    run_inproc(server, client, "PING")
    assert run_inproc(server, client, "EXEC") == b"*1\r\n+PONG\r\n"
    run_inproc(server, client, "WATCH", "w")
    run_inproc(server, writer, "SET", "w", "1")
    run_inproc(server, client, "MULTI")
    assert run_inproc(server, client, "EXEC") == b"*-1\r\n"
