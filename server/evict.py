"""maxmemory: evicting keys as maxmemory-policy says, before a command runs (Redis's evict.c).

The server calls ``Evictor.perform`` before every command while maxmemory is set,
as Redis's processCommand does; a command that may grow memory is refused with the
OOM error when that could not bring the figure (server/memory.py) under the limit.

How keys are chosen, as in Redis:
- the LRU, LFU and TTL policies sample ``maxmemory-samples`` keys of every database
  (all keys, or only those with a TTL for volatile-*) into a pool of the 16 best
  candidates kept across calls, and evict the best that still exists. The score is
  the idle time (the LRU stamp the keyspace keeps per key), 255 less the decayed LFU
  counter, or how soon the TTL ends.
- the random policies take a random key, visiting the databases in turn.
- ``maxmemory-eviction-tenacity`` bounds the time one call spends; past it the rest
  is left to a loop callback that keeps evicting while the server serves clients
  (the command that triggered it is not refused).

An eviction deletes the key, propagates a DEL (UNLINK under lazyfree-lazy-eviction)
to the AOF and the replicas on its own, signals WATCH and client tracking, wakes
stream waiters, raises the ``evicted`` keyspace event and counts in INFO
``evicted_keys``. Replicas following a master leave eviction to it when
replica-ignore-maxmemory is yes; nothing is evicted while clients are paused.
"""

from __future__ import annotations

import random
import time
from bisect import insort
from typing import TYPE_CHECKING

from rill.storage.keyspace import Database, ScanLog, lfu_decayed

from . import notify as events
from .commands.values import LAZYFREE_THRESHOLD, free_effort
from .memory import SAMPLES, MemoryFigure, memory_of

if TYPE_CHECKING:
    from .server import Server

EVICT_OK = 0
EVICT_RUNNING = 1
EVICT_FAIL = 2

POOL_SIZE = 16
_random = random.random


def time_limit_us(tenacity: int) -> float:
    """evictionTimeLimitUs: 50 us a step up to 10, then 15% more a step, unlimited at 100."""
    if tenacity <= 10:
        return 50.0 * tenacity
    if tenacity < 100:
        return 500.0 * 1.15 ** (tenacity - 10)
    return float("inf")


class Evictor:
    """The server's eviction state: policy, the candidate pool and the counters."""

    def __init__(self, server: Server, figure: MemoryFigure) -> None:
        self.server = server
        self.figure = figure
        self.pool: list[tuple[float, int, bytes]] = []  # ascending: the best candidate last
        self.next_db = 0
        self.evicted_keys = 0
        self.dirty = -1  # server.dirty at the last call
        self.running = False  # a loop callback is evicting what a call left over
        self.exceeded_since = 0.0  # when the figure last went over maxmemory (0: it is not)
        self.exceeded_total = 0.0
        server.config.listeners.append(self._config_changed)
        self._config_changed("maxmemory-policy")

    def _config_changed(self, name: str) -> None:
        c = self.server.config
        policy = c["maxmemory-policy"]
        self.policy = policy
        self.volatile = policy.startswith("volatile")
        self.kind = policy.partition("-")[2] if policy != "noeviction" else ""
        self.samples = c.int("maxmemory-samples")
        self.limit_us = time_limit_us(c.int("maxmemory-eviction-tenacity"))
        self.lazy = c.bool("lazyfree-lazy-eviction")
        self.replica_ignores = c.bool("replica-ignore-maxmemory")
        if name == "maxmemory-policy":
            self.pool.clear()

    # -- INFO ----------------------------------------------------------------------
    def reset_stats(self) -> None:
        """CONFIG RESETSTAT."""
        self.evicted_keys = 0
        self.exceeded_total = 0.0
        if self.exceeded_since:
            self.exceeded_since = time.monotonic()

    def exceeded_ms(self) -> tuple[int, int]:
        """(total_eviction_exceeded_time, current_eviction_exceeded_time) in ms."""
        current = time.monotonic() - self.exceeded_since if self.exceeded_since else 0.0
        return int((self.exceeded_total + current) * 1000), int(current * 1000)

    # -- evicting ------------------------------------------------------------------
    def perform(self, db: Database | None = None) -> int:
        """performEvictions: EVICT_OK when under maxmemory (or nothing may be evicted now),
        EVICT_RUNNING when the time limit left work for later, EVICT_FAIL when over the
        limit with nothing left to evict (or noeviction). ``db``: the database the
        calling client writes to."""
        s = self.server
        # The states themselves, not Server's gating descriptors: this runs before every
        # command while maxmemory is set.
        if s._loading or s._pause_until or (s._replica_of is not None and self.replica_ignores):
            return EVICT_OK
        maxmemory = s._maxmemory
        figure = self.figure
        if s.dirty != self.dirty and db is not None:  # written to since the last call
            self.dirty = s.dirty
            if len(db.data) <= SAMPLES or db not in figure.active:
                figure.after_write(db)
        used = figure.for_eviction()
        if used <= maxmemory:
            if self.exceeded_since:
                self.exceeded_total += time.monotonic() - self.exceeded_since
                self.exceeded_since = 0.0
            return EVICT_OK
        if not self.exceeded_since:
            self.exceeded_since = time.monotonic()
        if not self.kind:
            return EVICT_FAIL
        # Evicting comes before the command runs: the client's own tracking
        # invalidations go out now, ahead of its reply (Redis's processCommand order).
        tracking = s.tracking
        current, tracking.current = tracking.current, None
        try:
            return self._evict_until(used, maxmemory)
        finally:
            tracking.current = current

    def _evict_until(self, used: int, maxmemory: int) -> int:
        start = time.perf_counter()
        freed = 0
        per_key = self.figure.per_key
        limit = self.limit_us / 1e6
        while used > maxmemory:
            found = self._pick()
            if found is None:
                return EVICT_FAIL
            db, key = found
            used -= per_key[db.id] or 0
            self._evict(db, key)
            freed += 1
            if not freed % 16 and time.perf_counter() - start > limit:
                self._continue_later()
                return EVICT_RUNNING
        return EVICT_OK

    def soon(self) -> None:
        """Evict from the event loop, without waiting for a command: CONFIG SET maxmemory
        under the figure frees memory at once, as Redis's updateMaxmemory starts its
        eviction time proc."""
        self._continue_later()

    def _continue_later(self) -> None:
        loop = self.server.loop
        if loop is not None and not self.running:
            self.running = True
            loop.call_soon(self._time_proc)

    def _time_proc(self) -> None:
        """evictionTimeProc: keep evicting between the loop's other work until done."""
        self.running = False
        if self.server.maxmemory and self.perform() == EVICT_RUNNING:
            self._continue_later()

    def _pick(self) -> tuple[Database, bytes] | None:
        dbs = self.server.keyspace.dbs
        if self.kind == "random":
            for _ in range(len(dbs)):
                db = dbs[self.next_db]
                self.next_db = (self.next_db + 1) % len(dbs)
                key = self._sample(db)
                if key is not None:
                    return db, key
            return None
        pool = self.pool
        candidates = self.figure.active or dbs  # the databases holding keys (cron's list)
        while True:
            populated = False
            for db in candidates:
                if db.expires if self.volatile else db.data:
                    self._populate(db)
                    populated = True
            if not populated and candidates is not dbs:
                candidates = dbs
                continue
            if not populated:
                return None
            while pool:
                _, db_id, key = pool.pop()
                db = dbs[db_id]
                if key in (db.expires if self.volatile else db.data):
                    return db, key
            # every candidate had gone: sample again

    def _sample(self, db: Database) -> bytes | None:
        """A random key of ``db`` (one with a TTL for volatile-*), or None."""
        run = self._sample_run(db, 1)
        return run[0] if run else None

    def _sample_run(self, db: Database, n: int, raw: bool = False) -> list[bytes]:
        """About ``n`` random keys of ``db`` (with a TTL for volatile-*): consecutive
        slots of a log of its keys from a random place, as Redis's dictGetSomeKeys
        reads consecutive buckets; one slice, not ``n`` separate draws. ``raw`` (all
        keys only): the slots as they are, some maybe deleted, for a caller that looks
        each key up anyway (a dict lookup is most of what sampling costs)."""
        if self.volatile:
            live: dict = db.expires
            if not live:
                return []
            log = db.volatile_log
            if len(log) < len(live) or len(log) > 2 * len(live) + 64:
                log = db.volatile_log = list(live)
            slots: list[bytes] = log
            total = len(log)
        else:
            live = db.data
            if not live:
                return []
            if len(live) <= 64:
                return random.sample(list(live), min(n, len(live)))
            scan = db.scan_log
            if scan is None:
                scan = db.scan_log = ScanLog(live)
            # the log's length read from its lists (its __len__ is a Python call): this
            # runs once per eviction
            elif len(scan.keys) + len(scan.front) - len(scan.dead) != len(live):
                scan.compact(live)
            for _ in range(2):
                total = len(scan.keys) + len(scan.front)
                start = int(_random() * total)  # randrange's checks cost as much as the rest
                if raw and len(scan.dead) * 4 < total:
                    # n slots, as Redis's dictGetSomeKeys returns up to n keys: the few
                    # deleted ones among them are skipped by the caller
                    return scan._slots(start, min(start + n, total))
                slots = scan._slots(start, min(start + 2 * n, total))
                found = [k for k in slots if k in live]
                if found:
                    return found[:n]
                # a run of deleted slots (evictions cluster where the old keys were):
                # drop them all, as SCAN's own compaction would later
                scan.compact(live)
            return [db._sample_key()]
        start = random.randrange(total)
        found = [k for k in slots[start:start + 2 * n] if k in live]
        return found[:n] or [next(iter(live))]

    def _populate(self, db: Database) -> None:
        """evictionPoolPopulate: sample keys of ``db`` into the pool by score."""
        pool = self.pool
        kind = self.kind
        access = db.access
        data = db.data
        volatile = self.volatile
        keys = self._sample_run(db, self.samples, raw=not volatile)
        if kind == "lru":  # allkeys-lru, the cache's policy: its own loop, one per eviction
            get = access.get
            clock, base, db_id = db.clock, db.access_base, db.id
            for key in keys:
                stamp = get(key)
                if stamp is None:
                    if not volatile and key not in data:
                        continue  # a deleted slot (a live key always has a stamp or the base)
                    stamp = base
                score = clock - stamp
                if len(pool) >= POOL_SIZE:
                    if score < pool[0][0]:
                        continue
                    del pool[0]
                insort(pool, (score, db_id, key))
            return
        for key in keys:
            if kind == "lfu":
                stamp = access.get(key)
                if stamp is None and not volatile and key not in data:
                    continue  # a deleted slot (a live key always has a stamp or the base)
                score: float = 255 - (5 if stamp is None else lfu_decayed(stamp, db.keyspace.lfu_decay_time))
            else:  # ttl: the sooner it expires, the better a candidate
                score = -db.expires[key]
            if len(pool) >= POOL_SIZE:
                if score < pool[0][0]:
                    continue
                del pool[0]
            insort(pool, (score, db.id, key))

    def _evict(self, db: Database, key: bytes) -> None:
        """deleteEvictedKeyAndPropagate and what performEvictions does around it."""
        s = self.server
        if self.lazy:
            value = db.data.get(key)
            if value is not None and free_effort(value, s) > LAZYFREE_THRESHOLD:
                db.keyspace.lazyfreed_objects += 1
        engine = s._active_active
        if engine is not None:
            # Active-Active: the eviction deletes the key at every instance, as an expiry
            # does (observed-remove), in the effect this DEL is sealed with.
            engine.key_expired(db.id, key, db.data.get(key))
        if s.propagating:
            s.propagate([(db.id, [b"UNLINK" if self.lazy else b"DEL", key])])
        db.delete(key)
        db.modified(key)
        s.blocking.signal(db.id, key)
        notifier = events.notifier
        if notifier is not None:
            notifier(db.id, "e", b"evicted", key)
        self.evicted_keys += 1


def evictor_of(server: Server) -> Evictor:
    """The server's Evictor, made on first use."""
    evictor = server.__dict__.get("evictor")
    if evictor is None:
        evictor = server.evictor = Evictor(server, memory_of(server))
    return evictor
