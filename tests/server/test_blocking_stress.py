"""Stress: many blocked clients, concurrent producers, random timeouts and disconnects.

1000 list consumers (100 blocked per key on 10 keys) run BLPOP/BRPOP/BLMPOP/
BLMOVE with random timeouts against 4 concurrent producers (plain and MULTI
pushes), and some consumers drop their connection while blocked. A dropping
consumer half-closes its socket and reads until EOF, so a reply the server sent
just before it noticed is still counted. At the end:

- every produced list item was delivered exactly once (no loss, no duplicate);
- every reply answered exactly one request (a second reply would arrive with
  nothing pending, or before the PONG that closes each connection);
- nothing is left blocked or stuck, and the run ends within a bounded time.

When the server has streams (XADD), XREAD BLOCK waiters join: each starts with
``$`` on an empty stream, follows with the last ID it saw, drops and resumes at
random, and must see every entry exactly once, in order.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections import Counter

import hiredis
import pytest

from tests.support import encode_command, start_rill

LIST_KEYS = [f"sq:{i}" for i in range(10)]
CONSUMERS_PER_KEY = 100
PRODUCERS = 4
ITEMS = 20000
STREAM_KEYS = ["ss:0", "ss:1"]
STREAM_WAITERS_PER_KEY = 50
STREAM_ENTRIES = 1000
DEADLINE = 90.0  # seconds for the whole run; it normally takes a fraction


class Conn(asyncio.Protocol):
    """A RESP client that pairs every reply with exactly one request."""

    def __init__(self, errors: list[str]) -> None:
        self.reader = hiredis.Reader()
        self.pending: list[asyncio.Future] = []
        self.errors = errors
        self.closed = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:  # type: ignore[override]
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            reply = self.reader.gets()
            if reply is False:
                break
            if not self.pending:
                self.errors.append(f"unexpected reply with nothing pending: {reply!r}")
                continue
            fut = self.pending.pop(0)
            if not fut.done():
                fut.set_result(reply)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc) -> None:
        for fut in self.pending:
            if not fut.done():
                fut.set_result(ConnectionError("closed"))
        self.pending.clear()
        if not self.closed.done():
            self.closed.set_result(None)

    def send(self, *args) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.pending.append(fut)
        assert self.transport is not None
        self.transport.write(encode_command(args))
        return fut

    async def call(self, *args):
        return await self.send(*args)

    async def drop(self) -> None:
        """Half-close and read what the server still sends until it closes."""
        assert self.transport is not None
        sock = self.transport.get_extra_info("socket")
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        await asyncio.wait_for(self.closed, 10)

    async def finish(self) -> None:
        """Prove no stray reply is queued: the next reply must be our PONG."""
        assert await self.call("PING") == b"PONG"
        await self.drop()


async def connect(port: int, errors: list[str]) -> Conn:
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(lambda: Conn(errors), "127.0.0.1", port)
    return proto


def _items(reply) -> list[bytes]:
    """Elements carried by a list-pop reply."""
    if reply is None:
        return []
    if isinstance(reply, bytes):  # BLMOVE
        return [reply]
    if isinstance(reply[1], list):  # BLMPOP: [key, [elements]]
        return list(reply[1])
    return [reply[1]]  # BLPOP/BRPOP: [key, element]


async def list_consumer(port, key_index, rng, received, moved, errors, stop, stats):
    key = LIST_KEYS[key_index]
    other = LIST_KEYS[(key_index + 1) % len(LIST_KEYS)]
    conn = await connect(port, errors)
    while not stop.is_set():
        timeout = rng.choice(["0", "0", "0.1", "0.5", "1"])
        kind = rng.random()
        if kind < 0.55:
            args = ("BLPOP", key, timeout)
        elif kind < 0.7:
            args = ("BRPOP", key, other, timeout)
        elif kind < 0.85:
            args = ("BLMPOP", timeout, "2", key, other, rng.choice(["LEFT", "RIGHT"]), "COUNT", "3")
        else:
            args = ("BLMOVE", key, "sink", "LEFT", "RIGHT", timeout)
        fut = conn.send(*args)
        if rng.random() < 0.02:
            # drop while (probably) blocked; whatever the server sent before noticing still counts
            await asyncio.sleep(rng.random() * 0.05)
            await conn.drop()
            stats["drop"] += 1
            if fut.done() and not isinstance(fut.result(), Exception):
                got = _items(fut.result())
                received.extend(got)
                if args[0] == "BLMOVE":
                    moved.extend(got)
            conn = await connect(port, errors)
            continue
        stopper = asyncio.ensure_future(stop.wait())
        done, _ = await asyncio.wait({fut, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if fut not in done:
            break
        reply = fut.result()
        if isinstance(reply, (Exception, hiredis.ReplyError)):
            errors.append(f"{args}: {reply!r}")
            break
        got = _items(reply)
        stats["served" if got else "timeout"] += 1
        received.extend(got)
        if args[0] == "BLMOVE":
            moved.extend(got)
    # finishing: a still-pending wait is dropped; anything sent before the drop still counts
    if conn.pending:
        fut = conn.pending[0]
        await conn.drop()
        if fut.done() and not isinstance(fut.result(), Exception):
            got = _items(fut.result())
            received.extend(got)
            if args[0] == "BLMOVE":
                moved.extend(got)
    else:
        await conn.finish()


async def producer(port, index, rng, errors, produced_done):
    conn = await connect(port, errors)
    n = 0
    mine = ITEMS // PRODUCERS
    while n < mine:
        batch = [f"p{index}-{n + i}" for i in range(min(rng.randint(1, 5), mine - n))]
        n += len(batch)
        key = rng.choice(LIST_KEYS)
        if rng.random() < 0.2:
            half = len(batch) // 2
            replies = await asyncio.gather(
                conn.send("MULTI"),
                conn.send("LPUSH", key, *batch[:half]) if half else conn.send("PING"),
                conn.send("RPUSH", rng.choice(LIST_KEYS), *batch[half:]),
                conn.send("EXEC"),
            )
            if not isinstance(replies[-1], list):
                errors.append(f"EXEC: {replies!r}")
        else:
            cmd = rng.choice(["LPUSH", "RPUSH"])
            reply = await conn.call(cmd, key, *batch)
            if not isinstance(reply, int):
                errors.append(f"{cmd}: {reply!r}")
        if rng.random() < 0.1:
            await asyncio.sleep(0.001)
    await conn.finish()
    produced_done.append(index)


def _record_entries(reply, seen: list[bytes]) -> bytes | None:
    """Append the IDs an XREAD reply carries; the last one, if any."""
    last = None
    if isinstance(reply, list):
        for entry_id, _fields in reply[0][1]:
            seen.append(entry_id)
            last = entry_id
    return last


async def stream_waiter(port, key, rng, seen, errors, stop, started):
    conn = await connect(port, errors)
    fut = conn.send("XREAD", "BLOCK", "0", "STREAMS", key, "$")
    started.append(1)
    last = None
    while True:
        stopper = asyncio.ensure_future(stop.wait())
        done, _ = await asyncio.wait({fut, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if fut not in done:
            break
        reply = fut.result()
        if isinstance(reply, (Exception, hiredis.ReplyError)):
            errors.append(f"XREAD {key}: {reply!r}")
            break
        last = _record_entries(reply, seen) or last
        if last is None:
            errors.append("XREAD with $ returned before any entry")
            break
        block = rng.choice(["0", "100", "500"])
        fut = conn.send("XREAD", "BLOCK", block, "COUNT", str(rng.randint(1, 50)), "STREAMS", key, last)
        if rng.random() < 0.02:
            # drop while (probably) blocked, keep what was sent before, resume after the last ID
            await asyncio.sleep(rng.random() * 0.05)
            await conn.drop()
            if fut.done():
                last = _record_entries(fut.result(), seen) or last
            conn = await connect(port, errors)
            fut = conn.send("XREAD", "BLOCK", block, "STREAMS", key, last)
    if conn.pending:
        pending = conn.pending[0]
        await conn.drop()
        if pending.done():
            _record_entries(pending.result(), seen)
    else:
        await conn.finish()


async def stream_producer(port, rng, errors, ids):
    conn = await connect(port, errors)
    for i in range(STREAM_ENTRIES):
        key = rng.choice(STREAM_KEYS)
        reply = await conn.call("XADD", key, "*", "n", str(i))
        if not isinstance(reply, bytes):
            errors.append(f"XADD: {reply!r}")
            break
        ids[key].append(reply)
        if rng.random() < 0.05:
            await asyncio.sleep(0.001)
    await conn.finish()


async def blocked_clients(admin: Conn) -> int:
    info = await admin.call("INFO", "clients")
    return int(info.split(b"blocked_clients:")[1].split(b"\r\n")[0])


async def run(port: int) -> dict:
    rng = random.Random(20261120)
    errors: list[str] = []
    received: list[bytes] = []
    moved: list[bytes] = []
    stop = asyncio.Event()
    stats: Counter = Counter()
    admin = await connect(port, errors)
    has_streams = (await admin.call("COMMAND", "INFO", "XADD"))[0] is not None

    consumers = [
        asyncio.ensure_future(
            list_consumer(port, k, random.Random(rng.random()), received, moved, errors, stop, stats)
        )
        for k in range(len(LIST_KEYS))
        for _ in range(CONSUMERS_PER_KEY)
    ]
    stream_seen: dict[tuple[str, int], list[bytes]] = {}
    stream_ids: dict[str, list[bytes]] = {k: [] for k in STREAM_KEYS}
    waiters = []
    if has_streams:
        started: list[int] = []
        for key in STREAM_KEYS:
            for i in range(STREAM_WAITERS_PER_KEY):
                seen = stream_seen[(key, i)] = []
                waiters.append(asyncio.ensure_future(
                    stream_waiter(port, key, random.Random(rng.random()), seen, errors, stop, started)
                ))
        while len(started) < len(waiters):
            await asyncio.sleep(0.01)
    # let most consumers block before producing
    while await blocked_clients(admin) < len(consumers) // 2:
        await asyncio.sleep(0.01)

    produced_done: list[int] = []
    producers = [
        asyncio.ensure_future(producer(port, i, random.Random(rng.random()), errors, produced_done))
        for i in range(PRODUCERS)
    ]
    if has_streams:
        producers.append(asyncio.ensure_future(stream_producer(port, rng, errors, stream_ids)))
    await asyncio.gather(*producers)

    # wait until every item was delivered (or time runs out), then stop everyone
    loop = asyncio.get_running_loop()
    give_up = loop.time() + 30
    while len(received) < ITEMS and loop.time() < give_up and not errors:
        await asyncio.sleep(0.02)
    if has_streams:
        want = {k: len(v) for k, v in stream_ids.items()}
        while loop.time() < give_up and any(
            len(s) < want[key] for (key, _), s in stream_seen.items()
        ):
            await asyncio.sleep(0.02)
    stop.set()
    await asyncio.gather(*consumers, *waiters)

    leftovers = []
    for key in LIST_KEYS:
        leftovers += await admin.call("LRANGE", key, "0", "-1")
    sink = await admin.call("LRANGE", "sink", "0", "-1")
    # every consumer connection is gone: nothing may be left blocked
    deadline = loop.time() + 5
    while True:
        blocked = await blocked_clients(admin)
        if blocked == 0 or loop.time() > deadline:
            break
        await asyncio.sleep(0.02)
    await admin.finish()
    return {
        "errors": errors, "received": received, "moved": moved, "leftovers": leftovers, "sink": sink,
        "blocked": blocked, "stream_seen": stream_seen, "stream_ids": stream_ids,
        "has_streams": has_streams, "stats": stats,
    }


@pytest.mark.timeout(180)
def test_stress_blocking_lists_and_streams():
    server = start_rill("--maxclients", "5000")
    try:
        started = time.monotonic()
        result = asyncio.run(asyncio.wait_for(run(server.port), DEADLINE))
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    assert result["errors"] == []
    produced = Counter(f"p{p}-{i}".encode() for p in range(PRODUCERS) for i in range(ITEMS // PRODUCERS))
    got = Counter(result["received"]) + Counter(result["leftovers"])
    duplicates = {k: v for k, v in got.items() if v > 1}
    assert not duplicates, f"delivered more than once: {list(duplicates)[:10]}"
    assert got == produced, f"lost: {list(produced - got)[:10]}, unknown: {list(got - produced)[:10]}"
    # most items went through blocked consumers, not left in lists
    assert len(result["received"]) == ITEMS and not result["leftovers"]
    assert Counter(result["sink"]) == Counter(result["moved"])
    assert result["blocked"] == 0
    # the run did exercise what it is about
    stats = result["stats"]
    assert stats["drop"] > 0 and stats["timeout"] > 0 and stats["served"] > ITEMS // 5
    if result["has_streams"]:
        for (key, _), seen in result["stream_seen"].items():
            assert seen == result["stream_ids"][key], f"{key}: waiter missed or repeated entries"
    assert elapsed < DEADLINE
