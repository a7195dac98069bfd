"""PeerLinks (server/activeactive/links.py) against a peer that speaks the link protocol.

The peer here is a small asyncio server of the test's own that answers HELLO, APPLY, PING
and MERGE as docs/active-active.md says a peer does, and records what it was sent; the
engine is a small stand-in with the attributes PeerLinks reads (region, seq, vc, the real
backlog, on_sealed). Then real rill-server instances, linked to each other: writes at one
reach the other, WAIT, a peer killed and restarted, PAUSE/RESUME, STATUS and INFO, the
peers changed at run time, a link that logs in.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import types

import pytest
import redis
from rill.protocol.effects import Effect, decode_apply, decode_vc, encode_effect_compact, encode_vc
from rill.protocol.parser import RequestParser
from rill.server.activeactive.backlog import Backlog, record_size
from rill.server.activeactive.links import DOWN, UP, PeerLinks
from rill.server.config import ConfigError, parse_peers
from rill.server.outcomes import Block

from tests.server.test_tls import certs, start_tls  # noqa: F401 - certs: the TLS tests' certificates fixture
from tests.support import RawClient, free_port, start_rill, wait_until

# -- stand-ins for the server and the engine -------------------------------------------------


RECORD = record_size(encode_effect_compact(Effect(1, 10, 1_700_000_000_000, {1: 9}, [(0, [b"XADD", b"k", b"1", b"1-1", b"f", b"v"])])))


class FakeEngine:
    def __init__(self, region: int = 1, backlog_records: int = 1000) -> None:
        self.region = region
        self.seq = 0
        self.vc: dict[int, int] = {}
        # Every record seal() makes is RECORD bytes in the backlog.
        self.backlog = Backlog(backlog_records * RECORD)
        self.on_sealed: list = []
        self.quiet_seals = False  # as the engine: the links set it while a flush is pending
        self.recovering: int | None = None  # not recovering lost own effects

    def seal(self, *args: bytes) -> int:
        """A local write: its effect record goes to the backlog and the links hear of it."""
        self.seq += 1
        vc = dict(self.vc)
        self.vc[self.region] = self.seq
        wire = encode_effect_compact(Effect(self.region, self.seq, int(time.time() * 1000), vc, [(0, [b"XADD", *args])]))
        self.backlog.append(self.seq, wire, int(time.time() * 1000))
        if not self.quiet_seals:
            for cb in self.on_sealed:
                cb(self.seq)
        return self.seq


class FakeConfig(dict):
    def int(self, name):
        return int(self[name])

    def bool(self, name):
        return self[name] == "yes"


class FakePersistence:
    def fork(self, work, name, reports=True):
        # a full sync's child: named for ps, and not the child INFO persistence describes
        assert (name, reports) == ("rill-active-active-sync", False)
        pid = os.fork()
        if pid:
            return pid
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)


class FakeBlocking:
    def __init__(self):
        self.unblocked = []

    def unblock(self, client, reply):
        client.blocked = None
        self.unblocked.append((client, reply() if callable(reply) else reply))


class FakeServer:
    def __init__(self, **config):
        self.loop = asyncio.get_running_loop()
        self.config = FakeConfig({"repl-timeout": "60", "tls-replication": "no", "active-active-user": "",
                                  "active-active-auth": "", **config})
        self.startup_hooks = []
        self.loading = False
        self.blocking = FakeBlocking()
        self.persistence = FakePersistence()


# -- a peer ---------------------------------------------------------------------------------


class FakePeer:
    """Answers the link protocol as a peer of region ``region`` that has applied
    ``applied`` of the sender's effects (a restart keeps it)."""

    def __init__(self, region: int = 2, applied: int = 0, password: bytes | None = None) -> None:
        self.region = region
        self.applied = applied
        self.password = password
        self.wants_full = 0  # HELLO's third element: send me everything
        self.gaps = 0
        self.cut_every = 0  # abort the connection after every so many requests (0: never)
        self.stall_once = False  # stop reading the first connection once HELLO is answered
        self.requests: list[list[bytes]] = []
        self.applies: list[int] = []  # seqs of the effects received, in order
        self.batches = 0  # APPLY commands received
        self.merges: list[tuple[bytes, bytes, bytes]] = []
        self.server: asyncio.AbstractServer | None = None
        self.port = 0
        self.transports: list = []

    async def start(self, port: int = 0) -> FakePeer:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: _PeerProtocol(self), "127.0.0.1", port)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self.server.close()
        for t in self.transports:
            t.abort()
        self.transports = []
        await self.server.wait_closed()

    def count(self, name: bytes) -> int:
        return sum(1 for r in self.requests if r[:2] == [b"ACTIVEACTIVE", name])

    def answer(self, argv: list[bytes]) -> bytes:
        self.requests.append(argv)
        if argv[0].upper() == b"AUTH":
            return b"+OK\r\n" if argv[-1] == self.password else b"-WRONGPASS invalid username-password pair\r\n"
        sub = argv[1].upper()
        if sub == b"HELLO":
            vc = encode_vc({int(argv[2]): self.applied})
            return b"*3\r\n:%d\r\n$%d\r\n%b\r\n:%d\r\n" % (self.region, len(vc), vc, self.wants_full)
        if sub == b"APPLY":
            self.batches += 1
            for e in decode_apply(argv):
                seq = e.seq
                self.applies.append(seq)
                if seq > self.applied + 1:
                    self.gaps += 1  # a link must never skip a sequence
                if seq == self.applied + 1:
                    self.applied = seq
            return b":%d\r\n" % self.applied
        if sub == b"PING":
            return b":%d\r\n" % self.applied
        if sub == b"MERGE":
            self.merges.append((argv[2], argv[3], argv[4]))
            self.applied = max(self.applied, decode_vc(argv[3]).get(int(argv[2]), 0))
            return b"+OK\r\n"
        return b"-ERR unknown\r\n"


class _PeerProtocol(asyncio.Protocol):
    def __init__(self, peer: FakePeer) -> None:
        self.peer = peer
        self.parser = RequestParser()

    def connection_made(self, transport):
        self.transport = transport
        self.peer.transports.append(transport)

    def data_received(self, data):
        out = []
        peer = self.peer
        for argv in self.parser.feed(data):
            out.append(peer.answer(argv))
            if peer.stall_once and argv[1:2] == [b"HELLO"]:
                peer.stall_once = False
                self.transport.write(b"".join(out))
                self.transport.pause_reading()  # alive, but it takes nothing more
                return
            if peer.cut_every and len(peer.requests) % peer.cut_every == 0:
                self.transport.write(b"".join(out))
                self.transport.abort()  # mid-pipeline, as a broken network does
                return
        self.transport.write(b"".join(out))


async def until(predicate, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached in time")


def linked(engine: FakeEngine, *peers: FakePeer, **config) -> PeerLinks:
    links = PeerLinks(FakeServer(**config), engine)
    links.configure([("127.0.0.1", p.port) for p in peers])
    return links


# -- tests ------------------------------------------------------------------------------------


def test_parse_peers():
    assert parse_peers(" 10.0.0.1:7001  host-b:7002 10.0.0.1:7001 [::1]:7003") == [
        ("10.0.0.1", 7001), ("host-b", 7002), ("::1", 7003)]
    assert parse_peers("") == []
    for bad in ("nohost", ":7001", "h:0", "h:65536", "h:x"):
        with pytest.raises(ConfigError):
            parse_peers(bad)


async def test_effects_made_before_the_link_are_sent_once_it_is_up_then_streamed():
    engine = FakeEngine()
    for i in range(3):
        engine.seal(b"k", b"1", b"%d-1" % i, b"f", b"v")
    peer = await FakePeer().start()
    links = linked(engine, peer)
    try:
        await until(lambda: peer.applied == 3)
        hello = next(r for r in peer.requests if r[1] == b"HELLO")
        assert hello == [b"ACTIVEACTIVE", b"HELLO", b"1", b"1:3"]
        for _ in range(200):
            engine.seal(b"k", b"1", b"5-1", b"f", b"v")
        await until(lambda: links.caught_up(203) == 1)
        assert peer.applies == list(range(1, 204))  # each once, in order
        [row] = links.status()
        assert row == {"peer": b"127.0.0.1:%d" % peer.port, "id": 2, "link": b"up", "sync": b"partial",
                       "paused": 0, "effects-sent": 203, "effects-acked": 203, "lag-effects": 0, "lag-ms": 0,
                       "backlog-bytes": 0}
        assert links.info_lines() == [
            f"peer0:host=127.0.0.1,port={peer.port},id=2,link=up,sync=partial,paused=0,sent=203,acked=203,"
            "lag_effects=0,lag_ms=0,backlog_bytes=0"]
    finally:
        links.close()
        await peer.stop()


async def test_links_cut_again_and_again_deliver_every_effect_in_order_without_gaps(monkeypatch):
    from rill.server.activeactive import links as links_module

    monkeypatch.setattr(links_module, "APPLY_BATCH", RECORD)  # an APPLY per effect: cut between any two
    engine = FakeEngine()
    peer = await FakePeer().start()
    peer.cut_every = 37
    links = linked(engine, peer)
    try:
        for _ in range(20):
            for _ in range(25):
                engine.seal(b"k", b"1", b"1-1", b"f", b"v")
            await asyncio.sleep(0.02)
        await until(lambda: links.caught_up(500), timeout=30)
        assert peer.applied == 500 and peer.gaps == 0
        assert peer.count(b"HELLO") > 5  # it was cut, and came back, many times
    finally:
        links.close()
        await peer.stop()


async def test_an_idle_link_pings_with_the_clock_and_reads_acks_from_the_replies():
    engine = FakeEngine()
    engine.vc[3] = 9  # effects applied from a third region
    peer = await FakePeer().start()
    links = linked(engine, peer)
    try:
        await until(lambda: peer.count(b"PING") >= 3)
        ping = next(r for r in peer.requests if r[1] == b"PING")
        assert ping == [b"ACTIVEACTIVE", b"PING", b"1", b"3:9"]
        # An acknowledgement that comes late (the peer applied an effect once its causes
        # arrived) is read from a PING's reply.
        engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        await until(lambda: links.caught_up(1))
    finally:
        links.close()
        await peer.stop()


async def test_a_dropped_link_resumes_after_what_the_peer_has_applied():
    engine = FakeEngine()
    peer = await FakePeer().start()
    port = peer.port
    links = linked(engine, peer)
    try:
        for _ in range(5):
            engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        await until(lambda: peer.applied == 5)
        # The one peer has the five: the backlog lets them go.
        await until(lambda: engine.backlog.first_seq == 6)
        assert len(engine.backlog) == 0 and engine.backlog.nbytes == 0
        await peer.stop()
        await until(lambda: links.status()[0]["link"] == b"down")
        for _ in range(5):
            engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        # Down, the peer's acknowledgement no longer holds: all ten count as lacking.
        assert links.status()[0]["effects-acked"] == 0 and links.status()[0]["lag-effects"] == 10
        assert links.status()[0]["backlog-bytes"] == engine.backlog.nbytes > 0 and len(engine.backlog) == 5
        # The peer comes back with what it acknowledged (its files kept it): it resumes there.
        again = FakePeer(applied=5)
        await again.start(port)
        try:
            await until(lambda: again.applied == 10)
            assert again.applies == [6, 7, 8, 9, 10]
            assert links.status()[0]["sync"] == b"partial"
            assert again.count(b"MERGE") == 0
        finally:
            await again.stop()
    finally:
        links.close()


async def test_a_peer_back_from_an_older_save_than_its_ack_gets_a_full_sync(monkeypatch):
    """Records every peer acknowledged are gone: a peer that comes back with fewer of them
    applied than it acknowledged (it restarted from an older save) gets a full sync, as
    when the backlog overflowed."""
    payload = b"state"
    state = types.ModuleType("rill.server.activeactive.state")
    state.dump_state = lambda server: payload
    monkeypatch.setitem(sys.modules, "rill.server.activeactive.state", state)
    engine = FakeEngine()
    peer = await FakePeer().start()
    port = peer.port
    links = linked(engine, peer)
    try:
        for _ in range(5):
            engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        await until(lambda: engine.backlog.first_seq == 6)
        await peer.stop()
        await until(lambda: links.status()[0]["link"] == b"down")
        engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        again = FakePeer(applied=3)
        await again.start(port)
        try:
            await until(lambda: again.merges)
            assert again.merges == [(b"1", b"1:6", payload)]
            assert links.status()[0]["sync"] == b"full"
            engine.seal(b"k", b"1", b"1-1", b"f", b"v")
            await until(lambda: again.applied == 7)
            assert again.applies == [7]
        finally:
            await again.stop()
    finally:
        links.close()


async def test_records_stay_until_every_peer_has_acknowledged_them():
    """Two peers: a record goes once both have it; one never heard from keeps them all."""
    engine = FakeEngine()
    fast = await FakePeer(region=2).start()
    slow = await FakePeer(region=3).start()
    slow_port = slow.port
    await slow.stop()  # not there yet: it has not said who it is
    links = linked(engine, fast, slow)
    try:
        for _ in range(4):
            engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        await until(lambda: fast.applied == 4)
        await asyncio.sleep(0.05)
        assert (engine.backlog.first_seq, len(engine.backlog)) == (1, 4)
        slow = await FakePeer(region=3, applied=2).start(slow_port)
        await until(lambda: slow.applied == 4)
        await until(lambda: len(engine.backlog) == 0)
        assert engine.backlog.first_seq == 5
    finally:
        links.close()
        await fast.stop()
        await slow.stop()


async def test_pause_queues_effects_in_the_backlog_and_resume_sends_them():
    engine = FakeEngine()
    a, b = await FakePeer(region=2).start(), await FakePeer(region=3).start()
    links = linked(engine, a, b)
    try:
        await until(lambda: all(r["link"] == b"up" for r in links.status()))
        assert links.pause(b"3")  # by region id
        assert links.pause(b"127.0.0.1:%d" % a.port)  # by host:port
        assert not links.pause(b"127.0.0.1:1") and not links.resume(b"9")
        for _ in range(4):
            engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        await asyncio.sleep(0.3)
        assert a.applied == b.applied == 0
        rows = links.status()
        assert [r["paused"] for r in rows] == [1, 1]
        assert [r["lag-effects"] for r in rows] == [4, 4]
        assert all(r["backlog-bytes"] > 0 and r["lag-ms"] >= 200 for r in rows)
        assert links.resume(b"2")
        await until(lambda: a.applied == 4)
        assert b.applied == 0
        assert links.resume(None)
        await until(lambda: b.applied == 4)
        assert [r["paused"] for r in links.status()] == [0, 0]
    finally:
        links.close()
        await a.stop()
        await b.stop()


async def test_wait_blocks_until_every_peer_has_applied_what_was_made_before_it():
    engine = FakeEngine()
    a, b = await FakePeer(region=2).start(), await FakePeer(region=3).start()
    links = linked(engine, a, b)
    server = links.server
    try:
        client = types.SimpleNamespace(blocked=None, in_exec=False)
        assert links.wait(client, engine.seq, 0) == 2  # nothing made yet: every peer is caught up
        await until(lambda: all(r["link"] == b"up" for r in links.status()))
        links.pause(b"3")
        engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        block = links.wait(client, engine.seq, 0)
        assert isinstance(block, Block) and block.keys == []
        client.blocked = types.SimpleNamespace(timeout_reply=block.timeout_reply)  # as the dispatcher parks it
        in_multi = types.SimpleNamespace(blocked=None, in_exec=True)
        await until(lambda: a.applied == 1)
        assert links.wait(in_multi, engine.seq, 0) == 1  # inside MULTI it answers at once
        assert server.blocking.unblocked == [] and block.timeout_reply() == 1
        engine.seal(b"k", b"1", b"2-1", b"f", b"v")  # made after the WAIT: not waited for
        links.resume(b"3")
        await until(lambda: server.blocking.unblocked)
        assert server.blocking.unblocked == [(client, 2)]
    finally:
        links.close()
        await a.stop()
        await b.stop()


async def test_wait_does_not_count_a_peer_whose_link_dropped_until_it_says_again_what_it_has():
    engine = FakeEngine()
    peer = await FakePeer().start()
    port = peer.port
    links = linked(engine, peer)
    client = types.SimpleNamespace(blocked=None, in_exec=False)
    try:
        for _ in range(3):
            engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        await until(lambda: peer.applied == 3)
        await until(lambda: links.caught_up(3) == 1)
        await peer.stop()
        await until(lambda: links.status()[0]["link"] == b"down")
        # It may be restarting without them: WAIT blocks rather than count it.
        assert links.caught_up(3) == 0
        block = links.wait(client, engine.seq, 0)
        assert isinstance(block, Block) and block.timeout_reply() == 0
        # Back with them (its files kept them): its HELLO says so, and it counts again.
        again = FakePeer(applied=3)
        await again.start(port)
        try:
            await until(lambda: links.caught_up(3) == 1)
            assert links.status()[0]["sync"] == b"partial"
        finally:
            await again.stop()
    finally:
        links.close()


async def test_removing_a_peer_closes_its_link_and_counts_it_out_of_waits(monkeypatch):
    state = types.ModuleType("rill.server.activeactive.state")
    state.dump_state = lambda server: b"state"
    monkeypatch.setitem(sys.modules, "rill.server.activeactive.state", state)
    engine = FakeEngine()
    a, b = await FakePeer(region=2).start(), await FakePeer(region=3).start()
    links = linked(engine, a, b)
    try:
        await until(lambda: all(r["link"] == b"up" for r in links.status()))
        links.pause(b"3")
        engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        client = types.SimpleNamespace(blocked=None, in_exec=False)
        block = links.wait(client, engine.seq, 0)
        client.blocked = types.SimpleNamespace(timeout_reply=block.timeout_reply)
        await until(lambda: a.applied == 1)
        links.configure([("127.0.0.1", a.port)])
        assert links.server.blocking.unblocked == [(client, 1)]
        assert [r["peer"] for r in links.status()] == [b"127.0.0.1:%d" % a.port]
        await until(lambda: not b.transports[0].get_extra_info("socket") or b.transports[0].is_closing())
        # With region 3 no longer configured, the record region 2 acknowledged went: the
        # peer added back lacks it and gets a full sync.
        assert len(engine.backlog) == 0
        links.configure([("127.0.0.1", a.port), ("127.0.0.1", b.port)])
        await until(lambda: links.status()[1]["link"] == b"up")
        await until(lambda: b.applied == 1)
        assert b.merges == [(b"1", b"1:1", b"state")] and links.status()[1]["sync"] == b"full"
    finally:
        links.close()
        await a.stop()
        await b.stop()


async def test_the_link_logs_in_with_the_configured_user_and_password():
    engine = FakeEngine()
    peer = await FakePeer(password=b"s3cret").start()
    links = linked(engine, peer, **{"active-active-user": "aa", "active-active-auth": "s3cret"})
    try:
        await until(lambda: links.status()[0]["link"] == b"up")
        assert peer.requests[0] == [b"AUTH", b"aa", b"s3cret"]
    finally:
        links.close()
    links = linked(engine, peer, **{"active-active-auth": "wrong"})
    try:
        await until(lambda: [b"AUTH", b"wrong"] in peer.requests)
        await asyncio.sleep(0.2)
        assert links.status()[0]["link"] == b"down"
        assert links.peers[0].state != UP
    finally:
        links.close()
        await peer.stop()


async def test_a_peer_that_has_more_of_our_effects_than_we_made_is_not_synced():
    engine = FakeEngine()
    engine.seal(b"k", b"1", b"1-1", b"f", b"v")
    peer = await FakePeer(applied=7).start()
    links = linked(engine, peer)
    try:
        await until(lambda: peer.count(b"HELLO") >= 1)
        await asyncio.sleep(0.1)
        assert peer.count(b"APPLY") == 0 and links.status()[0]["link"] == b"down"
        assert links.peers[0].state in (DOWN, "connecting", "handshake")
    finally:
        links.close()
        await peer.stop()


async def test_full_sync_when_the_backlog_no_longer_holds_what_the_peer_lacks(monkeypatch):
    engine = FakeEngine(backlog_records=4)
    for _ in range(10):
        engine.seal(b"k", b"1", b"1-1", b"f", b"v")
    payload = os.urandom(600_000)  # more than a pipe holds: the parent streams it
    state = types.ModuleType("rill.server.activeactive.state")
    state.dump_state = lambda server: payload
    monkeypatch.setitem(sys.modules, "rill.server.activeactive.state", state)
    peer = await FakePeer(applied=2).start()
    links = linked(engine, peer)
    try:
        await until(lambda: peer.merges)
        assert peer.merges == [(b"1", b"1:10", payload)]
        for _ in range(3):
            engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        await until(lambda: peer.applied == 13)
        assert peer.applies == [11, 12, 13]
        row = links.status()[0]
        assert (row["sync"], row["link"], row["effects-acked"]) == (b"full", b"up", 13)
    finally:
        links.close()
        await peer.stop()


async def test_a_full_sync_that_cannot_be_made_drops_the_link_and_retries(monkeypatch):
    engine = FakeEngine(backlog_records=2)
    for _ in range(5):
        engine.seal(b"k", b"1", b"1-1", b"f", b"v")

    def broken(server):
        raise RuntimeError("no")

    state = types.ModuleType("rill.server.activeactive.state")
    state.dump_state = broken
    monkeypatch.setitem(sys.modules, "rill.server.activeactive.state", state)
    peer = await FakePeer().start()
    links = linked(engine, peer)
    try:
        await until(lambda: peer.count(b"HELLO") >= 2)  # dropped, then dialled again
        assert peer.merges == [] and peer.count(b"APPLY") == 0
        state.dump_state = lambda server: b"state"
        await until(lambda: peer.merges, timeout=10)
        await until(lambda: links.caught_up(5))
    finally:
        links.close()
        await peer.stop()


async def test_a_peer_that_asks_for_a_full_sync_gets_one_though_the_backlog_holds_all(monkeypatch):
    engine = FakeEngine()
    for _ in range(3):
        engine.seal(b"k", b"1", b"1-1", b"f", b"v")
    state = types.ModuleType("rill.server.activeactive.state")
    state.dump_state = lambda server: b"everything"
    monkeypatch.setitem(sys.modules, "rill.server.activeactive.state", state)
    peer = await FakePeer(region=4, applied=3).start()
    peer.wants_full = 1  # it lost effects of its own that our state holds
    links = linked(engine, peer)
    try:
        await until(lambda: peer.merges)
        assert peer.merges == [(b"1", b"1:3", b"everything")]
        assert links.status()[0]["sync"] == b"full"
        assert links.peer_regions() == [4]
    finally:
        links.close()
        await peer.stop()


# -- real instances ---------------------------------------------------------------------------


def start_region(region: int, port: int, peers: list[int], *args: str, workdir: str | None = None):
    return start_rill("--active-active-id", str(region),
                      "--active-active-peers", " ".join(f"127.0.0.1:{p}" for p in peers), *args,
                      port=port, workdir=workdir)


def status(client: redis.Redis) -> list[dict]:
    """ACTIVEACTIVE STATUS as dicts (a map per peer in RESP3, a flat field/value array in RESP2)."""
    rows = client.execute_command("ACTIVEACTIVE", "STATUS")
    return [{k.decode(): v for k, v in row.items()} if isinstance(row, dict)
            else {row[i].decode(): row[i + 1] for i in range(0, len(row), 2)} for row in rows]


@pytest.fixture
def pair():
    """Regions 1 and 2 linked both ways; their ports, processes and clients."""
    ports = [free_port(), free_port()]
    servers = [start_region(1, ports[0], [ports[1]]), start_region(2, ports[1], [ports[0]])]
    clients = [redis.Redis(port=p) for p in ports]
    try:
        for c in clients:
            wait_until(lambda c=c: status(c)[0]["link"] == b"up")
        yield ports, servers, clients
    finally:
        for c in clients:
            c.close()
        for s in servers:
            s.stop()


def test_writes_at_one_instance_are_at_the_other_once_wait_says_so(pair):
    ports, _, (a, b) = pair
    ids = [a.xadd("s", {"f": i}) for i in range(20)]
    assert a.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
    assert [e[0] for e in b.xrange("s")] == ids
    [row] = status(a)
    assert list(row) == ["peer", "id", "link", "sync", "paused", "effects-sent", "effects-acked", "lag-effects",
                         "lag-ms", "backlog-bytes"]
    assert row == {"peer": b"127.0.0.1:%d" % ports[1], "id": 2, "link": b"up", "sync": b"partial", "paused": 0,
                   "effects-sent": 20, "effects-acked": 20, "lag-effects": 0, "lag-ms": 0, "backlog-bytes": 0}
    raw = RawClient(ports[0])
    info = raw.call("INFO", "active_active").decode()
    raw.close()
    assert (f"peer0:host=127.0.0.1,port={ports[1]},id=2,link=up,sync=partial,paused=0,sent=20,acked=20,"
            "lag_effects=0,lag_ms=0,backlog_bytes=0") in info.splitlines()


def test_pause_queues_effects_and_resume_drains_them_while_wait_blocks(pair):
    _, _, (a, b) = pair
    assert a.execute_command("ACTIVEACTIVE", "PAUSE", "2") == b"OK"
    first = a.xadd("s", {"f": "1"})
    a.xadd("s", {"f": "2"})
    assert a.execute_command("ACTIVEACTIVE", "WAIT", 200) == 0
    assert b.exists("s") == 0
    [row] = status(a)
    assert (row["paused"], row["lag-effects"], row["effects-acked"]) == (1, 2, 0)
    assert row["backlog-bytes"] > 0 and row["lag-ms"] >= 200
    # A WAIT with no timeout blocks its client until the RESUME lets the effects through.
    got = []
    waiter = redis.Redis(port=a.connection_pool.connection_kwargs["port"])
    thread = threading.Thread(target=lambda: got.append(waiter.execute_command("ACTIVEACTIVE", "WAIT", 0)))
    thread.start()
    try:
        wait_until(lambda: b"cmd=activeactive|wait" in a.execute_command("CLIENT", "LIST"))
        assert got == []
        assert a.execute_command("ACTIVEACTIVE", "RESUME") == b"OK"
        thread.join(10)
        assert got == [1]
    finally:
        thread.join(10)
        waiter.close()
    assert b.xrange("s")[0][0] == first and b.xlen("s") == 2
    assert status(a)[0]["paused"] == 0
    with pytest.raises(redis.ResponseError, match="no such Active-Active peer '9'"):
        a.execute_command("ACTIVEACTIVE", "PAUSE", "9")


def test_a_peer_killed_and_restarted_without_its_data_gets_a_full_sync(pair):
    """It acknowledged the first effect, which the backlog then let go: coming back empty,
    it needs more than the backlog holds."""
    ports, servers, (a, b) = pair
    a.xadd("s", {"f": "before"})
    assert a.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
    servers[1].kill()
    wait_until(lambda: status(a)[0]["link"] == b"down")
    for i in range(5):
        a.xadd("s", {"f": i})
    assert status(a)[0]["lag-effects"] == 6  # down: what it acknowledged no longer counts
    servers[1].start()
    b = redis.Redis(port=ports[1])
    try:
        assert a.execute_command("ACTIVEACTIVE", "WAIT", 10000) == 1
        assert b.xlen("s") == 6
        [row] = status(a)
        assert (row["link"], row["sync"], row["effects-acked"]) == (b"up", b"full", 6)
    finally:
        b.close()


def aa_info(client: redis.Redis) -> dict:
    return client.info("active_active")


def test_records_every_peer_acknowledged_are_freed_and_a_peer_back_from_its_aof_resumes_partially():
    ports = [free_port(), free_port()]
    a = start_region(1, ports[0], [ports[1]])
    b = start_region(2, ports[1], [ports[0]], "--appendonly", "yes", "--appendfsync", "always")
    ca, cb = redis.Redis(port=ports[0]), redis.Redis(port=ports[1])
    try:
        wait_until(lambda: status(ca)[0]["link"] == b"up")
        ids = [ca.xadd("s", {"n": i}) for i in range(3)]
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        wait_until(lambda: aa_info(ca)["active_active_backlog_bytes"] == 0)
        b.kill()
        ids += [ca.xadd("s", {"n": i}) for i in range(3, 8)]
        assert aa_info(ca)["active_active_backlog_bytes"] == status(ca)[0]["backlog-bytes"] > 0
        b.start()  # its AOF holds the three it acknowledged: the five after them follow
        cb = redis.Redis(port=ports[1])
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 10000) == 1
        [row] = status(ca)
        assert (row["link"], row["sync"], row["effects-acked"]) == (b"up", b"partial", 8)
        assert [e[0] for e in cb.xrange("s")] == ids
        wait_until(lambda: aa_info(ca)["active_active_backlog_bytes"] == 0)
    finally:
        ca.close()
        cb.close()
        a.stop()
        b.stop()


def test_a_peer_restarted_from_an_older_rdb_than_its_acks_gets_a_full_sync_and_converges():
    """The records it had acknowledged are gone; its RDB lacks some of them (entries, an
    XDEL, a whole-stream DEL): the full sync brings them, the deletions included."""
    ports = [free_port(), free_port()]
    a = start_region(1, ports[0], [ports[1]])
    b = start_region(2, ports[1], [ports[0]])
    ca, cb = redis.Redis(port=ports[0]), redis.Redis(port=ports[1])
    try:
        wait_until(lambda: status(ca)[0]["link"] == b"up" and status(cb)[0]["link"] == b"up")
        first = [ca.xadd("s", {"n": i}) for i in range(3)]
        ca.xadd("t", {"n": "gone later"})
        cb.xadd("s", {"n": "from b"})
        for c in (ca, cb):
            assert c.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        assert cb.save() is True
        more = [ca.xadd("s", {"n": i}) for i in range(3, 6)]
        ca.xdel("s", first[0])
        ca.delete("t")
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        wait_until(lambda: status(ca)[0]["backlog-bytes"] == 0)
        assert cb.exists("t") == 0 and cb.xlen("s") == 6
        b.kill()
        wait_until(lambda: status(ca)[0]["link"] == b"down")
        b.start()  # from the RDB saved before the last five effects of region 1
        cb = redis.Redis(port=ports[1])
        # (what it loaded, 4 entries and "t", may already be merged: the link is quick)
        wait_until(lambda: (status(ca)[0]["link"], status(ca)[0]["sync"]) == (b"up", b"full"))
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 10000) == 1
        assert cb.execute_command("ACTIVEACTIVE", "WAIT", 10000) == 1
        assert cb.exists("t") == 0
        assert cb.xrange("s") == ca.xrange("s")
        assert [e[0] for e in ca.xrange("s")][:2] == first[1:] and cb.xlen("s") == 6
        assert set(more) <= {e[0] for e in cb.xrange("s")}
        # And the stream flows on.
        last = ca.xadd("s", {"n": "after"})
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        assert cb.xrange("s")[-1][0] == last
    finally:
        ca.close()
        cb.close()
        a.stop()
        b.stop()


def test_a_deletion_every_peer_had_survives_a_restart_from_rdb_and_reaches_a_full_sync():
    """Region 1 deletes a stream whole; region 2 acknowledges it (region 1 frees the record
    and keeps it aside) but comes back from an RDB saved before it, holding an entry region
    1 never got. Region 1, restarted from its own RDB meanwhile, still has the deletion
    (AUX aa-backlog) and the full sync re-applies it: only region 2's last entry is left."""
    ports = [free_port(), free_port()]
    a = start_region(1, ports[0], [ports[1]])
    b = start_region(2, ports[1], [ports[0]])
    ca, cb = redis.Redis(port=ports[0]), redis.Redis(port=ports[1])
    try:
        wait_until(lambda: status(ca)[0]["link"] == b"up" and status(cb)[0]["link"] == b"up")
        cb.xadd("s", {"n": 1})
        cb.xadd("s", {"n": 2})
        assert cb.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        assert cb.execute_command("ACTIVEACTIVE", "PAUSE") == b"OK"
        last = cb.xadd("s", {"n": 3})  # region 1 never gets it
        assert cb.save() is True
        ca.delete("s")
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        wait_until(lambda: status(ca)[0]["backlog-bytes"] == 0)
        kept = aa_info(ca)["active_active_backlog_bytes"]
        assert kept > 0  # the DEL, kept aside
        assert [e[0] for e in cb.xrange("s")] == [last]
        cb.close()
        b.stop()
        assert ca.save() is True
        ca.close()
        a.stop()
        a.start()
        ca = redis.Redis(port=ports[0])
        assert aa_info(ca)["active_active_backlog_bytes"] == kept
        # Region 2 comes back from its RDB (entries 1-3, without the DEL), linked to no
        # one: region 1 has not seen entry 3 when it syncs it.
        b.argv[b.argv.index("--active-active-peers") + 1] = ""
        b.start()
        cb = redis.Redis(port=ports[1])
        wait_until(lambda: (status(ca)[0]["link"], status(ca)[0]["sync"]) == (b"up", b"full"))
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 10000) == 1
        assert [e[0] for e in cb.xrange("s")] == [last]
    finally:
        ca.close()
        cb.close()
        a.stop()
        b.stop()


def test_config_set_peers_removes_and_adds_links(pair):
    ports, _, (a, b) = pair
    assert a.config_set("active-active-peers", "") is True
    assert status(a) == []
    assert a.execute_command("ACTIVEACTIVE", "WAIT", 100) == 0  # no peer to wait for
    a.xadd("s", {"f": "v"})
    a.config_set("active-active-peers", f"127.0.0.1:{ports[1]}")
    wait_until(lambda: status(a)[0]["link"] == b"up")
    assert a.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
    assert b.xlen("s") == 1
    with pytest.raises(redis.ResponseError, match="Invalid Active-Active peer 'nope'"):
        a.config_set("active-active-peers", "nope")
    assert a.config_get("active-active-peers") == {"active-active-peers": f"127.0.0.1:{ports[1]}"}


def test_the_link_logs_in_with_active_active_user_and_auth():
    ports = [free_port(), free_port()]
    b = start_region(2, ports[1], [ports[0]], "--requirepass", "pw2")
    a = start_region(1, ports[0], [ports[1]], "--active-active-auth", "wrong")
    ca, cb = redis.Redis(port=ports[0]), redis.Redis(port=ports[1], password="pw2")
    try:
        time.sleep(0.5)
        assert status(ca)[0]["link"] == b"down"
        assert "Unable to AUTH" in a.log() or "AUTH refused" in a.log()
        ca.config_set("active-active-auth", "pw2")
        wait_until(lambda: status(ca)[0]["link"] == b"up")
        cb.acl_setuser("peer", enabled=True, passwords=["+pw3"], commands=["+activeactive"])
        ca.config_set("active-active-user", "peer")
        ca.config_set("active-active-auth", "pw3")
        ca.xadd("s", {"f": "v"})
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        assert cb.xlen("s") == 1
    finally:
        ca.close()
        cb.close()
        a.stop()
        b.stop()


def test_links_use_tls_when_tls_replication_is_on(request):
    tls_dir = request.getfixturevalue("certs")
    a = start_tls("rill", tls_dir, "--tls-replication", "yes", "--active-active-id", "1")
    b = start_tls("rill", tls_dir, "--tls-replication", "yes", "--active-active-id", "2",
                  "--active-active-peers", f"127.0.0.1:{a.tls_port}")
    ca, cb = redis.Redis(port=a.port), redis.Redis(port=b.port)
    try:
        # Only the TLS ports are named: a link that did not speak TLS would never come up.
        ca.config_set("active-active-peers", f"127.0.0.1:{b.tls_port}")
        for c in (ca, cb):
            wait_until(lambda c=c: status(c)[0]["link"] == b"up")
        ca.xadd("s", {"from": "1"})
        cb.xadd("s", {"from": "2"})
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        assert cb.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        assert ca.xrange("s") == cb.xrange("s") and ca.xlen("s") == 2
    finally:
        ca.close()
        cb.close()
        a.stop()
        b.stop()


async def test_effects_made_in_one_loop_iteration_go_out_as_one_apply_per_peer_and_a_lone_one_goes_alone():
    """The links flush once per loop iteration (as Redis writes its replicas' buffers before
    sleeping): the effects of many clients' writes in one iteration travel as one APPLY to
    each peer, not one write each; and one effect made with nothing after it still goes."""
    engine = FakeEngine()
    a, b = await FakePeer(region=2).start(), await FakePeer(region=3).start()
    links = linked(engine, a, b)
    try:
        await until(lambda: all(r["link"] == b"up" for r in links.status()))
        for _ in range(50):  # one iteration: nothing yields to the loop in between
            engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        await until(lambda: a.applied == b.applied == 50)
        assert (a.batches, b.batches) == (1, 1)
        assert a.applies == b.applies == list(range(1, 51))
        engine.seal(b"k", b"1", b"2-1", b"f", b"v")  # alone: no later write pushes it out
        await until(lambda: a.applied == b.applied == 51)
        assert (a.batches, b.batches) == (2, 2)
    finally:
        links.close()
        await a.stop()
        await b.stop()


async def test_records_go_out_as_the_backlog_holds_them_never_encoded_again(monkeypatch):
    """The engine encodes a record once, when the effect is made; links write those bytes."""
    from rill.server.activeactive import links as links_module

    engine = FakeEngine()
    a, b = await FakePeer(region=2).start(), await FakePeer(region=3).start()
    links = linked(engine, a, b)
    encoded = []
    real = links_module.encode_command

    def counting(argv):
        if argv[:2] == [b"ACTIVEACTIVE", b"APPLY"]:
            encoded.append(argv[2])
        return real(argv)

    monkeypatch.setattr(links_module, "encode_command", counting)
    try:
        await until(lambda: all(r["link"] == b"up" for r in links.status()))
        for _ in range(10):
            engine.seal(b"k", b"1", b"1-1", b"f", b"v")
        await until(lambda: a.applied == b.applied == 10)
        assert encoded == []
    finally:
        links.close()
        await a.stop()
        await b.stop()


async def test_nothing_is_dialled_while_the_dataset_loads():
    engine = FakeEngine()
    peer = await FakePeer().start()
    server = FakeServer()
    server.loading = True
    links = PeerLinks(server, engine)
    links.configure([("127.0.0.1", peer.port)])
    try:
        await asyncio.sleep(0.3)
        assert peer.requests == [] and links.status()[0]["link"] == b"down"
        server.loading = False
        await until(lambda: links.status()[0]["link"] == b"up")
    finally:
        links.close()
        await peer.stop()


def test_an_instance_killed_and_restarted_from_its_aof_still_ships_its_unsent_effects():
    ports = [free_port(), free_port()]
    a = start_region(1, ports[0], [ports[1]], "--appendonly", "yes", "--appendfsync", "always")
    b = start_region(2, ports[1], [ports[0]])
    ca, cb = redis.Redis(port=ports[0]), redis.Redis(port=ports[1])
    try:
        wait_until(lambda: status(ca)[0]["link"] == b"up")
        first = ca.xadd("s", {"n": "sent"})
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        ca.execute_command("ACTIVEACTIVE", "PAUSE")
        unsent = [ca.xadd("s", {"n": i}) for i in range(3)]
        a.kill()
        assert cb.xlen("s") == 1
        a.start()  # its sequence and backlog come back from the AOF; a pause does not
        ca = redis.Redis(port=ports[0])
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 10000) == 1
        [row] = status(ca)
        assert (row["sync"], row["effects-acked"]) == (b"partial", 4)
        assert [e[0] for e in cb.xrange("s")] == [first, *unsent]
    finally:
        ca.close()
        cb.close()
        a.stop()
        b.stop()


def test_a_peer_the_backlog_no_longer_covers_gets_a_full_sync_then_the_stream():
    ports = [free_port(), free_port()]
    a = start_region(1, ports[0], [ports[1]], "--active-active-backlog-size", "16384")
    b = start_region(2, ports[1], [ports[0]])
    ca, cb = redis.Redis(port=ports[0]), redis.Redis(port=ports[1])
    try:
        wait_until(lambda: status(ca)[0]["link"] == b"up")
        b.kill()
        # More than the 16 KB backlog holds, while the peer is away.
        ids = [ca.xadd("s", {"n": i, "pad": "x" * 100}) for i in range(300)]
        b.start()  # an empty dataset: it needs all 300, and the backlog no longer has the first
        cb = redis.Redis(port=ports[1])
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 20000) == 1
        [row] = status(ca)
        assert (row["link"], row["sync"], row["effects-acked"]) == (b"up", b"full", 300)
        assert [e[0] for e in cb.xrange("s")] == ids == [e[0] for e in ca.xrange("s")]
        assert "full sync of effects up to 300 started by pid" in a.log()  # made in a fork
        # The stream flows again after the merge.
        more = ca.xadd("s", {"n": "after"})
        assert ca.execute_command("ACTIVEACTIVE", "WAIT", 5000) == 1
        assert cb.xrange("s", "-", "+")[-1][0] == more
    finally:
        ca.close()
        cb.close()
        a.stop()
        b.stop()


async def test_a_full_sync_the_peer_stops_taking_is_dropped_and_made_again(monkeypatch):
    engine = FakeEngine(backlog_records=2)
    for _ in range(5):
        engine.seal(b"k", b"1", b"1-1", b"f", b"v")
    payload = os.urandom(8 << 20)  # more than the socket buffers hold
    state = types.ModuleType("rill.server.activeactive.state")
    state.dump_state = lambda server: payload
    monkeypatch.setitem(sys.modules, "rill.server.activeactive.state", state)
    peer = await FakePeer().start()
    peer.stall_once = True
    links = linked(engine, peer, **{"repl-timeout": "1"})
    try:
        await until(lambda: peer.merges, timeout=20)
        assert peer.merges == [(b"1", b"1:5", payload)] and peer.count(b"HELLO") == 2
        await until(lambda: links.caught_up(5))
    finally:
        links.close()
        await peer.stop()


async def test_no_full_sync_goes_out_while_own_lost_effects_are_being_recovered():
    """A snapshot taken before our lost effects come back would tell the peer it has them."""
    engine = FakeEngine(backlog_records=2)
    for _ in range(5):
        engine.seal(b"k", b"1", b"1-1", b"f", b"v")
    engine.recovering = 0
    peer = await FakePeer(region=2).start()
    links = linked(engine, peer)
    try:
        await until(lambda: links.status()[0]["id"] == 2)
        await asyncio.sleep(0.3)
        assert links.status()[0]["link"] == b"down" and peer.merges == []
    finally:
        links.close()
        await peer.stop()


async def test_a_peer_that_stops_reading_leaves_the_records_in_the_backlog_not_in_the_socket_buffer():
    """The link writes a backlog chunk at a time and stops once the transport is past its
    high-water mark: what the peer does not take stays in the backlog (one copy), and
    goes out when it drains."""
    engine = FakeEngine(backlog_records=1_100_000)  # ~50 MB: nothing is dropped here
    peer = FakePeer()
    peer.stall_once = True  # answers HELLO, then takes nothing more on this connection
    await peer.start()
    links = linked(engine, peer)
    try:
        await until(lambda: links.status()[0]["link"] == b"up")
        big = b"x" * (1 << 20)
        for _ in range(30):  # 30 MB: more than the socket buffers of loopback hold
            engine.seal(b"k", b"1", b"1-1", b"f", big)
        await asyncio.sleep(0.5)
        p = links.peers[0]
        transport = p.conn.transport
        assert p.conn.writing_paused
        assert p.sent < 30
        # Past the high-water mark by at most the one record (its own chunk) written last.
        assert transport.get_write_buffer_size() <= transport.get_write_buffer_limits()[1] + len(big) + 1024
    finally:
        links.close()
        await peer.stop()
