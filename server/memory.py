"""used_memory: the bytes rill's data holds, as INFO, MEMORY STATS and maxmemory read it.

Redis reads its allocator's counter. CPython has none that is cheap and exact
(tracemalloc costs every allocation), so the figure is built from parts:

- per database, the tables of its dicts (keys, access stamps, expiry times) read
  with ``sys.getsizeof`` at every call (O(1)), plus the key count times the mean heap
  size of one key and its value (storage.footprint), that mean taken from random
  keys by the cron. A write costs nothing; the figure moves the moment keys come or
  go, and follows values that grow or shrink within a cron period or so.
- the clients' memory (Client.memory_usage: buffers, queued MULTI commands,
  subscriptions...), the replication backlog and the AOF buffer. The cron sums them
  all; a client that goes takes its share with it at once. Under maxmemory a client
  is re-weighed as soon as a read leaves part of a big command buffered, and under
  maxmemory-clients also after its commands run and after each write, as Redis
  tracks clients' memory (replies between cron runs are what key eviction may miss).
  Like Redis, replica output buffers and the AOF buffer are left out of what eviction
  compares with maxmemory.
- client eviction (maxmemory-clients): when the normal and pub/sub clients together
  weigh the limit or more, the heaviest evictable ones are dropped until they weigh
  less (see ``evict_clients``).
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

import ctypes
import gc
import logging
import math
import os
import random
import resource
import sys
import time
from collections import deque
from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any

from rill.storage.footprint import bytes_size, value_size

if TYPE_CHECKING:
    from rill.storage.keyspace import Database

    from .client import Client
    from .server import Server

log = logging.getLogger("rill")
NOTICE = 25  # the log level main.py names NOTICE (Redis's default verbosity)

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_sizeof = sys.getsizeof
# An expiry time (ms since the epoch) and an LFU stamp are int objects of their own;
# LRU stamps share the clock's int.
_INT = _sizeof(1 << 40)


# A dict's table, per key it holds, averaged over a table's life (see dict_table): CPython
# gives a dict 2**k slots with an index of 4 bytes each (2 below 2**16 slots) and room for
# 2/3 * 2**k entries of 24 bytes, and doubles it when full; over a doubling, from half
# full to full, bytes per key average (4 + 16) * 3 * ln 2.
TABLE_PER_KEY = (4 + 16) * 3 * math.log(2)
_EMPTY_DICT = _sizeof({})
_3_EMPTY_DICTS = 3 * _EMPTY_DICT  # a database's keys, access stamps and expiry times
# What an access stamp (an int of its own under LFU) and an expiry time count, table slot included
_LFU_PER_KEY = TABLE_PER_KEY + _INT
_EXPIRE_PER_KEY = TABLE_PER_KEY + _INT


def dict_table(n: int) -> int:
    """The bytes the figure counts for a dict of ``n`` keys: an empty dict's, plus
    TABLE_PER_KEY a key.

    Not the table's size now, which moves in steps: a doubling when a dict fills (10 MB
    at 150k keys), and at twice what its keys need whenever the deleted slots of a dict
    whose keys come and go fill it (a cache at maxmemory: a key in and one evicted per
    write). The figure jumping by a step would evict a fifth of a cache at once, or hold
    it at a step's edge. Redis's tables grow with the key count, and Redis 7 does not
    grow one that would pass maxmemory. The difference (within a third of the tables
    either way) is resident all the same: it shows in used_memory_rss and the
    fragmentation ratio, as allocator slack does. tests/server/test_memory.py holds
    the figure to what tracemalloc counts."""
    return _EMPTY_DICT + int(n * TABLE_PER_KEY)

# Keys sampled per database per refresh, and how many recent samples the mean keeps.
SAMPLES = 32
WINDOW = 512
# A database is re-sampled at most this often (seconds), less often when large
# (each sampling walks part of the dict: see _walk).
REFRESH_MIN = 0.1
REFRESH_PER_KEY = 1e-6
# One sampling walks past fewer than twice this many keys (see MemoryFigure._walk):
# about a millisecond, where a walk from the start to a random place took up to a full pass.
WALK_MAX = 1 << 15
# The least maxmemory-clients means, so that a tiny setting cannot cut everyone off.
CLIENT_EVICTION_MIN = 128 * 1024


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


def _malloc_trim() -> Any:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS)."""
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


_MALLOC_TRIM = _malloc_trim()


def purge() -> bool:
    """MEMORY PURGE: collect unreachable cycles, then hand the C heap's free pages back to
    the system (what Redis's purge of jemalloc's dirty pages does); True if glibc released
    any. Only on request, never from the cron: malloc_trim walks every free chunk, and
    took 0.45-0.7 s on a 1 GB heap holding 150k free chunks (mallinfo2, which a cron would
    need to decide, 0.37 s), a stall no client should see unasked."""
    gc.collect()
    trim = _MALLOC_TRIM
    return bool(trim(0)) if trim is not None else False


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
        self.per_key_table = [TABLE_PER_KEY] * len(self.samples)  # per_key + a table slot
        self.clients_normal = 0  # the sum of the normal clients' ``mem``
        self.clients_replicas = 0
        self.clients_limit = 0  # maxmemory-clients in bytes (0: no client eviction)
        self.evicted_clients = 0
        self.backlog = 0
        self.aof_buffer = 0
        self.startup = sum(self.db_overhead(db) for db in server.keyspace.dbs)
        self.peak = self.startup
        # for_eviction's parts, summed by refresh(): what is not per key, and the
        # databases that hold keys.
        self.evict_base = self.startup
        # The Evictor, once there is one: it keeps evict_base + clients_normal as a C
        # double, which _base_changed updates (perform read the two per command).
        self.evictor: Any = None
        self.active: list[Database] = []
        # The evictor's per-database snapshots of the keys (Evictor.snaps), once there is
        # one: _refresh_db samples them rather than walking a dict to a random place.
        self.snaps: list[list[bytes] | None] | None = None
        # Per database: the dict the last sampling walk went through, and where it stopped.
        self.walks: list[tuple[dict, Iterator[bytes]] | None] = [None] * len(self.samples)
        self.refresh()
        server.config.listeners.append(self._config_changed)
        self.configure()

    def _config_changed(self, name: str) -> None:
        if name in ("maxmemory", "maxmemory-clients"):
            self.configure()

    def configure(self) -> None:
        """maxmemory or maxmemory-clients changed: the client limit in bytes (a percentage
        is of maxmemory, and means nothing without it), whether connections re-weigh their
        clients (``server.client_mem``: under either setting), and, under a lower limit,
        client eviction at once."""
        server = self.server
        c = server.config
        setting, maxmemory = c.int("maxmemory-clients"), c.int("maxmemory")
        limit = int(maxmemory * -setting / 100) if setting < 0 else setting
        self.clients_limit = max(limit, CLIENT_EVICTION_MIN) if limit else 0
        server.client_mem = self if maxmemory or self.clients_limit else None
        if self.clients_limit:
            loop = server.loop
            if loop is not None:
                loop.call_soon(self.evict_clients)

    # -- the figure ----------------------------------------------------------------
    def db_overhead(self, db: Database) -> int:
        """The tables of a database's dicts (dict_table) and its expiry times (Redis's
        dict overhead). for_eviction has a copy inline: a change here belongs there too."""
        size = _3_EMPTY_DICTS + int((len(db.data) + len(db.access) + len(db.expires)) * TABLE_PER_KEY)
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

    def _base_changed(self) -> None:
        """evict_base or clients_normal changed (every place that sets either calls this):
        the evictor's copy of their sum, what Evictor.perform starts its figure from before
        every command. The int sum as a float: the value the figure's first float
        addition made of it when perform read the two itself."""
        evictor = self.evictor
        if evictor is not None:
            evictor.base_f = float(self.evict_base + self.clients_normal)

    def not_counted_for_evict(self) -> int:
        """What eviction leaves out: replica output buffers and the AOF buffer."""
        return self.clients_replicas + self.aof_buffer

    # -- clients -------------------------------------------------------------------
    def track(self, client: Client) -> None:
        """``client``'s buffers changed: re-weigh it, then evict clients if together
        they now weigh maxmemory-clients or more. Replicas are the cron's to sum."""
        if client.repl is not None or client.kind == "replica":
            return
        mem = client.memory_usage()
        self.clients_normal += mem - client.mem
        client.mem = mem
        self._base_changed()
        if self.clients_limit and self.clients_normal >= self.clients_limit:
            self.evict_clients()

    def forget(self, client: Client) -> None:
        """A client went: its share leaves its sum now, not at the next cron."""
        if client.repl is not None or client.kind == "replica":
            self.clients_replicas -= client.mem
        else:
            self.clients_normal -= client.mem
            self._base_changed()
        client.mem = 0

    def evict_clients(self) -> None:
        """Redis's evictClients: while the normal and pub/sub clients together weigh
        maxmemory-clients or more, drop the heaviest that may be evicted (not CLIENT
        NO-EVICT, not a replica or a master link), logging each and counting it in INFO
        ``evicted_clients``. Clients that are exempt still count in the sum."""
        limit = self.clients_limit
        if not limit or self.clients_normal < limit:
            return
        self.buffers()  # weigh everyone afresh: a transport may have drained since
        if self.clients_normal < limit:
            return
        candidates = [c for c in self.server.clients.values()
                      if not c.no_evict and c.repl is None and c.kind not in ("replica", "master") and c.id >= 0]
        candidates.sort(key=lambda c: c.mem, reverse=True)
        for client in candidates:
            if self.clients_normal < limit:
                return
            log.log(NOTICE, "Evicting client: %s", client.info_line().decode(errors="replace"))
            self.evicted_clients += 1
            client.close_now()
            self.forget(client)  # close_now forgets it too; an internal client has none
        if self.clients_normal >= limit:
            log.warning("Over client maxmemory after evicting all evictable clients")

    def for_eviction(self) -> int:
        """used_memory less what is not counted for eviction (Redis's getMaxmemoryState).

        Called before every command while maxmemory is set, so it reads only the
        databases that held keys at the last refresh (their tables and key counts, as
        INFO does); the buffers are the cron's sum. db_overhead and dataset's sum, in
        one float expression a database: a key's bytes with its table slot are one
        coefficient (``per_key_table``), and one int() at the end (an int() of a float
        costs as much as the rest of a line)."""
        total = self.evict_base + self.clients_normal
        coef = self.per_key_table
        for db in self.active:
            expires = db.expires
            total += (len(db.data) * coef[db.id] + _3_EMPTY_DICTS
                      + len(db.access) * (_LFU_PER_KEY if db.lfu else TABLE_PER_KEY))
            if expires:
                total += len(expires) * _EXPIRE_PER_KEY + _sizeof(db.volatile_log)
        return int(total)

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
        # While a fork child (a snapshot, a replica's full sync, an AOF rewrite) shares
        # the parent's pages, walking a big dict to a random offset takes a reference
        # to every key it passes: each page it writes a refcount on is copied. At 500k
        # keys such a walk went from 2 ms to 50 ms of CPU (in-process, loaded machine),
        # and it was the longest stall of the loop during a replica's full sync. The
        # means already taken stand in until the child is gone (Redis likewise stops
        # resizing its dicts while a child runs).
        forked = child_running(self.server)
        for db in self.server.keyspace.dbs:
            n = len(db.data)
            if not n:
                self.walks[db.id] = None  # holds no emptied (or replaced) dict
                self.per_key[db.id] = 0.0
                self.per_key_table[db.id] = TABLE_PER_KEY
                if db.expires:
                    idle_tables += self.db_overhead(db)
                continue
            active.append(db)
            if now - self.samples[db.id].at >= max(REFRESH_MIN, n * REFRESH_PER_KEY):
                self._refresh_db(db, now, forked)
        self.buffers()
        self.active[:] = active  # in place: the evictor holds this list
        self.evict_base = self.startup + self.backlog + idle_tables
        self._base_changed()
        self.used()
        if self.clients_limit and self.clients_normal >= self.clients_limit:
            self.evict_clients()

    def _refresh_db(self, db: Database, now: float, forked: bool = False) -> float:
        """Re-sample ``db``'s mean key size; with ``forked``, only if that walks no dict."""
        sample = self.samples[db.id]
        sample.at = now
        data = db.data
        n = len(data)
        keys: list[bytes] = []
        if n <= SAMPLES:
            sample.sizes.clear()
            sample.total = 0
            keys = list(data)
        else:
            snaps = self.snaps
            snap = snaps[db.id] if snaps is not None else None
            if snap is not None and len(snap) > 2 * SAMPLES:
                # the evictor's snapshot of the keys (server/evict.py): a random run of it
                # costs nothing like walking the dict to a random place (5 ms at 200k
                # keys, a few times a second under maxmemory)
                start = random.randrange(len(snap) - SAMPLES + 1)
                keys = [k for k in snap[start:start + SAMPLES] if k in data]
            if not keys:
                if forked:
                    return self.per_key[db.id]
                keys = self._walk(db.id, data, n)
        for key in keys:
            sample.add(entry_size(key, data[key]))
        self.per_key[db.id] = pk = sample.mean()
        self.per_key_table[db.id] = pk + TABLE_PER_KEY
        return pk

    def _walk(self, i: int, data: dict, n: int) -> list[bytes]:
        """SAMPLES keys of ``data`` a random distance (under WALK_MAX) past where the last
        walk through it stopped. A walk from the start to a random place passed half the
        keys on average, on the loop: 5 ms at 500k keys, and several times that just
        after a fork child has gone (each page it writes a refcount on faults once).
        Successive walks go round the dict, so one that keeps its size is sampled all
        over; one whose size changed since starts a new round among its first WALK_MAX
        keys (a dict always growing is sampled among its oldest keys)."""
        skip = random.randrange(min(n - SAMPLES + 1, WALK_MAX))
        walk = self.walks[i]
        if walk is not None and walk[0] is data:
            try:
                keys = list(islice(walk[1], skip, skip + SAMPLES))
            except RuntimeError:  # the dict changed size since
                keys = []
            if len(keys) == SAMPLES:
                return keys
        it = iter(data)
        self.walks[i] = (data, it)
        return list(islice(it, skip, skip + SAMPLES))

    def buffers(self) -> None:
        """Weigh every client's buffers now. The cron does it each tick; INFO memory and
        MEMORY STATS/DOCTOR do it too, as Redis sums them when asked: a pipeline served
        between two ticks would otherwise leave its replicas' stream out of the figure."""
        normal = replicas = 0
        for client in self.server.clients.values():
            if client.repl is not None or client.kind == "replica":
                # A replica's output includes the stream held back for it until its first
                # ACK after a diskless sync (Client.output_bytes).
                client.mem = size = client.querybuf_len + client.output_bytes()
                replicas += size
            else:
                client.mem = size = client.memory_usage()
                normal += size
        self.clients_normal, self.clients_replicas = normal, replicas
        self._base_changed()
        p = self.server.__dict__.get("persistence")
        master = getattr(p, "master", None) if p is not None else None  # replication's master side
        backlog = getattr(master, "backlog", None) if master is not None else None
        self.backlog = len(backlog) if backlog is not None else 0
        writer = getattr(p, "writer", None) if p is not None else None
        buf = getattr(writer, "buf", None) if writer is not None else None
        self.aof_buffer = len(buf) if buf is not None else 0


def child_running(server: Server) -> bool:
    """Whether a fork child (a snapshot, a replica's full sync, an AOF rewrite) shares the
    server's pages now: persistence.child_pid, which disk.py and the master's diskless
    fork both set. A pass over a big dict's keys then copies every page it writes a
    reference count on (the cron's sampling walk, the evictor's snapshot)."""
    p = server.__dict__.get("persistence")
    return getattr(p, "child_pid", None) is not None


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
