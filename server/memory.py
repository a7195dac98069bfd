"""used_memory: the bytes rill's data holds, as INFO, MEMORY STATS and maxmemory read it.

Redis reads its allocator's counter. CPython has none that is cheap and exact
(tracemalloc costs every allocation), so the figure is built from parts:

- per database, the tables of its dicts (keys, access stamps, expiry times) read
  with ``sys.getsizeof`` at every call (O(1)), plus the key count times the mean heap
  size of one key and its value (storage.footprint), that mean taken from random
  keys by the cron. A write costs nothing; the figure moves the moment keys come or
  go, and follows values that grow or shrink within a cron period or so.
- the clients' query and output buffers, the replication backlog and the AOF
  buffer, summed by the cron (they change with every reply; Redis counts them too,
  and, like Redis, leaves replica output buffers and the AOF buffer out of what
  eviction compares with maxmemory).
- ``used_memory_startup``: the empty databases' tables. The interpreter's own heap
  (tens of MB, against Redis's 1 MB at start) is not counted, so that maxmemory means
  what it means to Redis users: room for data (Redis's own suite sets ``maxmemory 11mb``
  and fills 5 MB). RSS, and the fragmentation ratio of RSS over the figure, show the
  interpreter; STARTUP_RSS (the resident size when this module is imported, before
  any data) lets MEMORY DOCTOR tell the interpreter from fragmentation.

Sampling is exact in the mean for keys alike in size (a cache, a queue) and drifts
when a few keys dwarf all others; the cron's window of recent samples keeps the
variance down (tests/server/test_memory.py holds the figure to within 15% of what
tracemalloc counts for every type).
"""

from __future__ import annotations

import os
import random
import resource
import sys
import time
from collections import deque
from itertools import islice
from typing import TYPE_CHECKING, Any

from rill.storage.footprint import bytes_size, value_size

if TYPE_CHECKING:
    from rill.storage.keyspace import Database

    from .server import Server

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_sizeof = sys.getsizeof
# An expiry time (ms since the epoch) and an LFU stamp are int objects of their own;
# LRU stamps share the clock's int.
_INT = _sizeof(1 << 40)

# Keys sampled per database per refresh, and how many recent samples the mean keeps.
SAMPLES = 32
WINDOW = 512
# A database is re-sampled at most this often (seconds), less often when large
# (sampling walks the dict to a random offset, about 5 ns a key).
REFRESH_MIN = 0.1
REFRESH_PER_KEY = 1e-6


def rss() -> int:
    """The process's resident set size (INFO used_memory_rss)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:  # pragma: no cover - non-Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# The process before any data: the interpreter and rill's modules, read when this module
# is first imported (the server imports it at start-up, before loading a dataset).
STARTUP_RSS = rss()


def entry_size(key: bytes, value: Any) -> int:
    """Heap bytes of one key and its value."""
    return bytes_size(key) + value_size(value)


class _DbSample:
    """The recent per-key sizes of one database and when they were last taken."""

    __slots__ = ("sizes", "total", "at")

    def __init__(self) -> None:
        self.sizes: deque[int] = deque(maxlen=WINDOW)
        self.total = 0
        self.at = 0.0

    def add(self, size: int) -> None:
        sizes = self.sizes
        if len(sizes) == WINDOW:
            self.total -= sizes[0]
        sizes.append(size)
        self.total += size

    def mean(self) -> float:
        return self.total / len(self.sizes) if self.sizes else 0.0


class MemoryFigure:
    """The server's used_memory and its parts (see the module docstring)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.samples = [_DbSample() for _ in server.keyspace.dbs]
        # Per database: the mean heap bytes of a key and its value.
        self.per_key = [0.0] * len(self.samples)
        self.clients_normal = 0
        self.clients_replicas = 0
        self.backlog = 0
        self.aof_buffer = 0
        self.startup = sum(self.db_overhead(db) for db in server.keyspace.dbs)
        self.peak = self.startup
        # for_eviction's parts, summed by refresh(): what is not per key, and the
        # databases that hold keys.
        self.evict_base = self.startup
        self.active: list[Database] = []
        self.refresh()

    # -- the figure ----------------------------------------------------------------
    def db_overhead(self, db: Database) -> int:
        """The tables of a database's dicts and its expiry times (Redis's dict overhead)."""
        size = _sizeof(db.data) + _sizeof(db.access) + _sizeof(db.expires)
        if db.expires:
            size += len(db.expires) * _INT + _sizeof(db.volatile_log)
        if db.lfu:
            size += len(db.access) * _INT
        return size

    def dataset(self) -> int:
        """Keys and values: the key count times the sampled mean, per database."""
        total = 0
        per_key = self.per_key
        for db in self.server.keyspace.dbs:
            n = len(db.data)
            if n:
                pk = per_key[db.id]
                if not pk:
                    pk = self._refresh_db(db, time.monotonic())
                total += int(n * pk)
        return total

    def overhead(self) -> int:
        """used_memory_overhead: startup, buffers, backlog and dict tables."""
        return (self.startup + self.clients_normal + self.clients_replicas + self.backlog
                + self.aof_buffer + sum(self.db_overhead(db) for db in self.server.keyspace.dbs
                                        if db.data or db.expires))

    def used(self) -> int:
        """used_memory."""
        used = self.overhead() + self.dataset()
        if used > self.peak:
            self.peak = used
        return used

    def not_counted_for_evict(self) -> int:
        """What eviction leaves out: replica output buffers and the AOF buffer."""
        return self.clients_replicas + self.aof_buffer

    def for_eviction(self) -> int:
        """used_memory less what is not counted for eviction (Redis's getMaxmemoryState).

        Called before every command while maxmemory is set, so it reads only the
        databases that held keys at the last refresh (their tables and key counts, as
        INFO does); the buffers are the cron's sum."""
        total = self.evict_base
        per_key = self.per_key
        for db in self.active:
            total += int(len(db.data) * per_key[db.id]) + self.db_overhead(db)
        return total

    def after_write(self, db: Database) -> None:
        """After a write in ``db``: if it just got its first keys it joins ``active`` now
        rather than at the next refresh, and if it has at most SAMPLES keys it is sized
        exactly again (cheap for it, and one value there can be most of the data)."""
        n = len(db.data)
        if n:
            if db not in self.active:
                self.active.append(db)
            if n <= SAMPLES:
                self._refresh_db(db, time.monotonic())

    # -- the cron's part -------------------------------------------------------------
    def refresh(self) -> None:
        """Re-sample databases due for it and sum the buffers (the cron calls this)."""
        now = time.monotonic()
        active = []
        idle_tables = 0  # databases without keys but with tables not yet shrunk
        for db in self.server.keyspace.dbs:
            n = len(db.data)
            if not n:
                self.per_key[db.id] = 0.0
                if db.expires:
                    idle_tables += self.db_overhead(db)
                continue
            active.append(db)
            if now - self.samples[db.id].at >= max(REFRESH_MIN, n * REFRESH_PER_KEY):
                self._refresh_db(db, now)
        self._buffers()
        self.active = active
        self.evict_base = self.startup + self.clients_normal + self.backlog + idle_tables
        self.used()

    def _refresh_db(self, db: Database, now: float) -> float:
        sample = self.samples[db.id]
        sample.at = now
        data = db.data
        n = len(data)
        if n <= SAMPLES:
            sample.sizes.clear()
            sample.total = 0
            keys: list[bytes] = list(data)
        else:
            start = random.randrange(n - SAMPLES + 1)
            keys = list(islice(data, start, start + SAMPLES))
        for key in keys:
            sample.add(entry_size(key, data[key]))
        self.per_key[db.id] = pk = sample.mean()
        return pk

    def _buffers(self) -> None:
        normal = replicas = 0
        for client in self.server.clients.values():
            size = client.querybuf_len + sum(map(len, client.out)) + client.output_backlog()
            if client.repl is not None or client.kind == "replica":
                replicas += size
            else:
                normal += size
        self.clients_normal, self.clients_replicas = normal, replicas
        p = self.server.__dict__.get("persistence")
        master = getattr(p, "master", None) if p is not None else None  # replication's master side
        backlog = getattr(master, "backlog", None) if master is not None else None
        self.backlog = len(backlog) if backlog is not None else 0
        writer = getattr(p, "writer", None) if p is not None else None
        buf = getattr(writer, "buf", None) if writer is not None else None
        self.aof_buffer = len(buf) if buf is not None else 0


def memory_of(server: Server) -> MemoryFigure:
    """The server's MemoryFigure, made (and hooked into its cron) on first use."""
    figure = server.__dict__.get("memory")
    if figure is None:
        figure = server.memory = MemoryFigure(server)
        server.cron_hooks.append(figure.refresh)
    return figure


def used_memory(server: Server) -> int:
    """INFO used_memory of ``server``."""
    return memory_of(server).used()
