"""Workloads redis-benchmark cannot express, driven by one asyncio client process.

The same client code measures both servers, so its own cost (Python, one core shared
with the server on small machines) weighs on both sides of the ratio alike.
"""

from __future__ import annotations

import asyncio
import time

import hiredis

from .harness import Arg, BenchError, encode

try:  # the client loop is faster on uvloop, which rill depends on anyway
    import uvloop

    _new_loop = uvloop.new_event_loop
except ImportError:  # pragma: no cover
    _new_loop = asyncio.new_event_loop


def run(coro):
    """Run a coroutine on a fresh (uv)loop."""
    loop = _new_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


class AConn:
    """A minimal asyncio RESP connection (hiredis parses replies)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.r = reader
        self.w = writer
        self.parser = hiredis.Reader()

    @classmethod
    async def open(cls, port: int) -> AConn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    def send(self, *args: Arg) -> None:
        self.w.write(encode(args))

    async def read(self) -> object:
        while True:
            reply = self.parser.gets()
            if reply is not False:
                return reply
            data = await self.r.read(1 << 16)
            if not data:
                raise BenchError("connection closed by the server")
            self.parser.feed(data)

    async def call(self, *args: Arg) -> object:
        self.send(*args)
        return await self.read()

    def close(self) -> None:
        self.w.close()


def _check(reply: object) -> object:
    if isinstance(reply, hiredis.ReplyError):
        raise BenchError(str(reply))
    return reply


# -- XREADGROUP COUNT 10 + XACK ----------------------------------------------------------


async def consumer_loop(port: int, key: str, group: str, consumers: int, count: int = 10) -> tuple[int, float]:
    """Consumers read ``count`` new entries each turn and XACK them, until the group is drained.

    Returns (entries acknowledged, seconds).
    """
    conns = [await AConn.open(port) for _ in range(consumers)]
    done = 0

    async def consume(i: int, conn: AConn) -> None:
        nonlocal done
        name = f"c{i}"
        while True:
            reply = _check(await conn.call("XREADGROUP", "GROUP", group, name, "COUNT", count,
                                           "STREAMS", key, ">"))
            if not reply:
                return
            entries = reply[0][1]
            if not entries:
                return
            ids = [e[0] for e in entries]
            acked = _check(await conn.call("XACK", key, group, *ids))
            done += acked

    start = time.perf_counter()
    try:
        await asyncio.gather(*(consume(i, c) for i, c in enumerate(conns)))
    finally:
        for c in conns:
            c.close()
    return done, time.perf_counter() - start


# -- wake-up latency of blocked clients --------------------------------------------------


def percentile(samples: list[float], p: float) -> float:
    s = sorted(samples)
    if not s:
        raise BenchError("no samples")
    k = min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))
    return s[k]


async def wake_latency(port: int, key: str, waiters: int, rounds: int) -> list[float]:
    """Latencies (ms) from a producer's RPUSH of one item to the BLPOP waiter receiving it.

    ``waiters`` clients block in BLPOP on one key; each round the producer pushes one item
    per waiter, one command at a time, while every other waiter stays parked.
    """
    conns = [await AConn.open(port) for _ in range(waiters)]
    producer = await AConn.open(port)
    admin = await AConn.open(port)
    sent: dict[bytes, int] = {}
    latencies: list[float] = []
    received = 0
    round_done = asyncio.Event()
    target = 0

    async def waiter(conn: AConn) -> None:
        nonlocal received
        while True:
            conn.send("BLPOP", key, 0)
            reply = _check(await conn.read())
            now = time.perf_counter_ns()
            item = reply[1]
            latencies.append((now - sent[item]) / 1e6)
            received += 1
            if received >= target:
                round_done.set()

    async def all_blocked() -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            info = await admin.call("INFO", "clients")
            if isinstance(info, bytes):
                for line in info.decode().splitlines():
                    if line.startswith("blocked_clients:") and int(line.split(":")[1]) >= waiters:
                        return
            else:  # no INFO yet: give the BLPOPs time to arrive
                await asyncio.sleep(1.0)
                return
            await asyncio.sleep(0.01)
        raise BenchError(f"the {waiters} waiters did not all block")

    tasks = [asyncio.ensure_future(waiter(c)) for c in conns]
    try:
        seq = 0
        for _ in range(rounds):
            await all_blocked()
            target += waiters
            round_done.clear()
            for _ in range(waiters):
                item = b"%d" % seq
                seq += 1
                sent[item] = time.perf_counter_ns()
                _check(await producer.call("RPUSH", key, item))
            try:
                await asyncio.wait_for(round_done.wait(), 30)
            except TimeoutError:
                raise BenchError(f"only {received} of {target} pushed items reached a waiter") from None
            for t in tasks:
                if t.done() and t.exception():
                    raise t.exception()
    finally:
        for t in tasks:
            t.cancel()
        for c in [*conns, producer, admin]:
            c.close()
        await asyncio.gather(*tasks, return_exceptions=True)
    return latencies


# -- Active-Active convergence lag -------------------------------------------------------


async def convergence_lag(port_a: int, port_b: int, key: str, rate: int, seconds: float) -> list[float]:
    """Latencies (ms) from sending an XADD at one region to reading it at its peer.

    A writer sends ``rate`` XADDs a second for ``seconds`` to ``port_a``, in batches every
    10 ms, each entry stamped with its send time (perf_counter_ns: same host); a reader
    at ``port_b`` follows the stream with blocking XREADs and measures each entry's age.
    """
    writer = await AConn.open(port_a)
    reader = await AConn.open(port_b)
    total = int(rate * seconds)
    per_batch = max(1, rate // 100)
    latencies: list[float] = []

    async def write() -> None:
        sent = 0
        start = time.perf_counter()
        while sent < total:
            n = min(per_batch, total - sent)
            for _ in range(n):
                writer.send("XADD", key, "*", "t", time.perf_counter_ns())
            for _ in range(n):
                _check(await writer.read())
            sent += n
            pause = start + sent / rate - time.perf_counter()
            if pause > 0:
                await asyncio.sleep(pause)

    async def read() -> None:
        last = b"0-0"
        deadline = time.monotonic() + seconds + 30
        while len(latencies) < total and time.monotonic() < deadline:
            reply = _check(await reader.call("XREAD", "COUNT", 1000, "BLOCK", 1000, "STREAMS", key, last))
            now = time.perf_counter_ns()
            if not reply:
                continue
            for sid, fields in reply[0][1]:
                latencies.append((now - int(fields[1])) / 1e6)
                last = sid

    try:
        await asyncio.gather(write(), read())
    finally:
        writer.close()
        reader.close()
    return latencies
