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
  allkeys-lru and allkeys-lfu (a cache's policies, an eviction per write once full)
  take a lean path (``_evict_pooled``) that samples a snapshot of each database's keys,
  renewed once an eighth of it has changed, rather than a log kept current on every
  write (see ``_snapshot``); the pool and the scores are the same.
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
from bisect import bisect_left
from time import perf_counter, perf_counter_ns
from typing import TYPE_CHECKING

from rill.storage.keyspace import LFU_INIT_VAL, Database, ScanLog, lfu_decayed

from . import notify as events
from .commands.values import LAZYFREE_THRESHOLD, free_effort
from .memory import (
    _3_EMPTY_DICTS,
    _EXPIRE_PER_KEY,
    _LFU_PER_KEY,
    SAMPLES,
    TABLE_PER_KEY,
    MemoryFigure,
    _sizeof,
    child_running,
    memory_of,
)

if TYPE_CHECKING:
    from .server import Server

EVICT_OK = 0
EVICT_RUNNING = 1
EVICT_FAIL = 2

POOL_SIZE = 16
# perform's and _evict_pooled's copies of these: compiled, C integers (evict.pxd), where
# each return and each pool test was a module-dict lookup and a conversion
_OK, _RUNNING, _FAIL = EVICT_OK, EVICT_RUNNING, EVICT_FAIL
_POOL_MAX = POOL_SIZE
_SAMPLES = SAMPLES  # perform's "few keys" bound, a C integer compiled
# Evictions between two looks at whether a fork child has gone, while one keeps a
# snapshot due for renewal (see Evictor._snapshot)
RENEW_RECHECK = 1024
_random = random.random
_getrandbits = random.getrandbits  # compiled, a C global (evict.pxd): no module-dict lookup
# notify's namespace, where its ``notifier`` lives: compiled, a typed dict (evict.pxd), so
# that an eviction reads ``notifier`` with one dict lookup rather than a module global and
# a module attribute (the same object: a module's attributes are its dict's entries, and
# CONFIG SET notify-keyspace-events, or a test, sets it there)
_NOTIFY_NS = vars(events)
# The pool (score, db id, key), ascending, is bisected with (score,): a 1-tuple sorts
# ahead of every entry of the same score, and no key function is called per probe
# (compiled, evict.pxd's _pool_put bisects the scores as doubles).

# What an evicted key's slots in its database's dicts (keys, access stamps) count for
_KEY_TABLES = 2 * TABLE_PER_KEY
_UNBOUNDED = float("-inf")  # the worst score while the pool has room
# The empty tables' figure as a float: perform reads it into a C double per call, which
# from an int is a conversion call (the sum is the same: the float it was added as)
_EMPTY_TABLES = float(_3_EMPTY_DICTS)
# An access stamp's table share by kind (LFU's counter is an int object of its own).
# Compiled, these, _KEY_TABLES and _EMPTY_TABLES are C doubles (evict.pxd), so perform's
# per-command sum and an eviction's decrement read no module global and convert nothing:
# the same values (floats already), the same float operations in the same order.
_LRU_STAMP = TABLE_PER_KEY
_LFU_STAMP = _LFU_PER_KEY
# perform's "used < maxmemory + 1" as one C double comparison: maxmemory + 1 as a float,
# exact below 2**53 (gates_changed). Above that it is infinite: a figure of 9 PB or more,
# the only one that comparison could then refuse, is not one a process reaches.
_EXACT_BELOW = float(2**53)


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
        # evict_base + clients_normal, which the figure keeps here (see _base_changed)
        self.base_f = 0.0
        figure.evictor = self
        figure._base_changed()
        self.pool: list[tuple[float, int, bytes]] = []  # ascending: the best candidate last
        # Containers read per eviction, held here (C fields when compiled) rather than
        # reached through the server and the figure each time: none is ever replaced
        # (SWAPDB swaps databases' contents, the blocking registry empties its dict in
        # place, the figure updates its per-database lists and ``active`` in place).
        self.dbs: list[Database] = server.keyspace.dbs
        self.waiters = server.blocking.waiters
        self.per_key: list[float] = figure.per_key
        self.per_key_table: list[float] = figure.per_key_table
        self.active: list[Database] = figure.active  # the databases holding keys
        # per database: _evict_pooled's snapshot of its keys, and when to take the next
        ndb = len(server.keyspace.dbs)
        self.snaps: list[list[bytes] | None] = [None] * ndb
        # beside each snapshot taken under an LRU policy, its keys' stamps as they were
        # then, and the stamp dict they came from (see _snapshot)
        self.snap_stamps: list[list[int] | None] = [None] * ndb
        self.snap_access: list[dict | None] = [None] * ndb
        self.snap_renew = [0] * ndb
        self.snap_limit = [0] * ndb
        self.snap_empty = [0] * ndb  # samples in a row that found only deleted slots
        figure.snaps = self.snaps  # the figure's sampling reads them too
        server.cron_hooks.append(self._cron)
        self.next_db = 0
        self.evicted_keys = 0
        self.dirty = -1  # server.dirty at the last call
        self.running = False  # a loop callback is evicting what a call left over
        self.exceeded_since = 0.0  # when the figure last went over maxmemory (0: it is not)
        self.exceeded_total = 0.0
        self.samples = 0  # maxmemory-samples (_config_changed)
        server.config.listeners.append(self._config_changed)
        self._config_changed("maxmemory-policy")

    def _config_changed(self, name: str) -> None:
        c = self.server.config
        policy = c["maxmemory-policy"]
        self.policy = policy
        self.volatile = policy.startswith("volatile")
        self.kind = policy.partition("-")[2] if policy != "noeviction" else ""
        self.lru = self.kind == "lru"
        samples = c.int("maxmemory-samples")
        if samples != self.samples:
            self.snaps[:] = [None] * len(self.snaps)  # their wrap-around pads are that long
        self.samples = samples
        self.limit_s = time_limit_us(c.int("maxmemory-eviction-tenacity")) / 1e6
        # the cache's policies (all keys, LRU or LFU) take the lean path
        self.pooled = self.kind in ("lru", "lfu") and not self.volatile
        self.untimed_down = self._evict_pooled if self.pooled else self._evict_picked
        # The latency monitor's eviction-cycle and eviction-del events, as Redis records
        # them: the clock is read for them only while latency-monitor-threshold is set.
        self.timed = c.int("latency-monitor-threshold") > 0
        self.evict_down = self._evict_down_timed if self.timed else self.untimed_down
        self.lazy = c.bool("lazyfree-lazy-eviction")
        self.replica_ignores = c.bool("replica-ignore-maxmemory")
        if name == "maxmemory-policy":
            self.pool.clear()
            # the stamps beside them may be of the other kind (LRU clock, LFU counter)
            self.snaps[:] = [None] * len(self.snaps)
        self.gates_changed()

    def gates_changed(self) -> None:
        """The server's gating states changed (Server._update_special calls this, as
        does a change of replica-ignore-maxmemory): perform reads these copies, C fields
        when compiled, instead of the Server's attributes before every command.
        """
        s = self.server
        self.suspended = bool(s._loading or s._pause_until or (s._replica_of is not None and self.replica_ignores))
        self.maxmemory = s._maxmemory
        # as _evict_pooled takes it (a float: below the figure there, so under 2**53, exact)
        self.maxmemory_f = float(s._maxmemory)
        # perform's bound: int(used) <= maxmemory while used < this (see _EXACT_BELOW)
        self.under_f = float(s._maxmemory + 1) if s._maxmemory + 1 <= _EXACT_BELOW else float("inf")
        self.tracking = bool(s._tracking_active)
        # the Active-Active engine (setting it refreshes the gates, and so this copy)
        self.engine = s._active_active

    # -- INFO ----------------------------------------------------------------------
    def reset_stats(self) -> None:
        """CONFIG RESETSTAT."""
        self.evicted_keys = 0
        self.snaps[:] = [None] * len(self.snaps)  # their snap_renew counts evicted_keys
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
        # loading, a client pause, or following a master (with replica-ignore-maxmemory),
        # as gates_changed keeps it: this runs before every command while maxmemory is set
        if self.suspended:
            return _OK
        s = self.server
        maxmemory = self.maxmemory
        figure = self.figure
        dirty = s.dirty
        if dirty != self.dirty and db is not None:  # written to since the last call
            self.dirty = dirty
            if len(db.data) <= _SAMPLES or db not in self.active:
                figure.after_write(db)
        # figure.for_eviction(), inline (its float left as it is: int() of a float costs
        # as much as a line); a change there belongs here too. Compiled, ``used`` is a C
        # double: the same additions in the same order as the Python float they make.
        # Its first term, evict_base + clients_normal, is the figure's copy here (the
        # int sum as a float, which is what the first float addition made of it).
        used = self.base_f
        coef = self.per_key_table
        empty = _EMPTY_TABLES
        for d in self.active:
            expires = d.expires
            per_key = coef[d.id]
            per_stamp = _LFU_STAMP if d.lfu else _LRU_STAMP
            used += len(d.data) * per_key + empty + len(d.access) * per_stamp
            if expires:
                used += len(expires) * _EXPIRE_PER_KEY + _sizeof(d.volatile_log)
        if used < self.under_f:  # int(used) <= maxmemory, as for_eviction() compares
            if self.exceeded_since:
                self.exceeded_total += time.monotonic() - self.exceeded_since
                self.exceeded_since = 0.0
            return _OK
        if not self.exceeded_since:
            self.exceeded_since = time.monotonic()
        if not self.kind:
            return _FAIL
        if not self.tracking:
            if self.pooled and not self.timed:  # a full cache's usual call: no bound method made
                return self._evict_pooled(int(used), self.maxmemory_f)
            return self.evict_down(int(used), maxmemory)
        # Evicting comes before the command runs: the client's own tracking
        # invalidations go out now, ahead of its reply (Redis's processCommand order).
        tracking = s.tracking
        current = tracking.current
        if current is not None:
            tracking.current = None
        try:
            return self.evict_down(int(used), maxmemory)
        finally:
            if current is not None:
                tracking.current = current

    def _evict_down_timed(self, used: int, maxmemory: int) -> int:
        """The eviction loop timed as a whole: the latency monitor's eviction-cycle."""
        start = perf_counter_ns()
        try:
            return self.untimed_down(used, maxmemory)
        finally:
            self.server.latency_event("eviction-cycle", perf_counter_ns() - start)

    def _evict_picked(self, used: int, maxmemory: int) -> int:
        """performEvictions' loop for the random, TTL and volatile policies: pick, evict,
        until under maxmemory or past the tenacity's time limit."""
        start = perf_counter()
        per_key = self.figure.per_key
        freed = 0
        while used > maxmemory:
            found = self._pick()
            if found is None:
                return EVICT_FAIL
            db, key = found
            used -= per_key[db.id] + _KEY_TABLES
            self._evict(db, key)
            freed += 1
            if not freed & 15 and perf_counter() - start > self.limit_s:
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
        candidates = self.active or dbs  # the databases holding keys (cron's list)
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
        """evictionPoolPopulate: sample keys of ``db`` into the pool by score (the
        policies _evict_pooled does not take: volatile-lru, volatile-lfu, volatile-ttl)."""
        pool = self.pool
        kind = self.kind
        access = db.access
        data = db.data
        volatile = self.volatile
        db_id = db.id
        for key in self._sample_run(db, self.samples, raw=not volatile):
            if kind == "lru":
                stamp = access.get(key)
                if stamp is None:
                    if not volatile and key not in data:
                        continue  # a deleted slot (a live key always has a stamp or the base)
                    stamp = db.access_base
                score: float = db.clock - stamp
            elif kind == "lfu":
                stamp = access.get(key)
                if stamp is None and not volatile and key not in data:
                    continue  # a deleted slot (a live key always has a stamp or the base)
                score = 255 - (LFU_INIT_VAL if stamp is None else lfu_decayed(stamp, db.keyspace.lfu_decay_time))
            else:  # ttl: the sooner it expires, the better a candidate
                score = -db.expires[key]
            _pool_insert(pool, score, db_id, key)

    def _evict_pooled(self, used: int, maxmemory: int) -> int:
        """performEvictions' loop for allkeys-lru and allkeys-lfu, a cache's policies
        (one eviction per write once full): _pick, _populate and _evict in one frame, the
        same samples, scores, pool and eviction, with the calls and the per-key checks a
        rejected sample does not need taken out. Written for the bytecodes it runs (each
        costs tens of instructions): the usual call evicts one key and returns before
        the time limit's clock is read at all."""
        s = self.server
        pool = self.pool
        dbs = self.dbs
        candidates = self.active or dbs  # the databases holding keys (cron's list)
        snaps = self.snaps
        n = self.samples
        lru = self.lru
        freed = 0
        start = 0.0
        stamps = None
        while True:
            # evictionPoolPopulate, for each database
            populated = False
            for db in candidates:
                data = db.data
                if not data:
                    continue
                populated = True
                db_id = db.id
                snap = snaps[db_id]
                if snap is None or self.evicted_keys >= self.snap_renew[db_id]:
                    snap = self._snapshot(db)
                if snap is not None:
                    # maxmemory-samples consecutive slots of the database's snapshot from
                    # a random place, as dictGetSomeKeys reads consecutive buckets (the
                    # snapshot repeats its first slots at its end: the buckets wrap); a
                    # deleted key's slot is skipped below (see _snapshot). Read in place:
                    # a slice was a list made and freed per eviction.
                    i = _getrandbits(32)
                    i %= len(snap) - n
                    slots = snap
                    end = i + n
                    stamps = self.snap_stamps[db_id]
                    if stamps is None or db.access is not self.snap_access[db_id]:
                        stamps = None  # none taken (LFU, or keys without one), or SWAPDB since
                        if _COMPILED:
                            _prefetch_run(slots, i, end)  # noqa: F821 (evict.pxd)
                else:
                    stamps = None
                    slots = self._sample_run(db, n, raw=True)
                    i = 0
                    end = len(slots)
                if lru:
                    # an LRU stamp is the clock at the last access; a live key without
                    # one (loaded, never touched since) counts from the base
                    access = db.access
                    now = db.clock
                    ident = db.id  # the pool's entries hold it as an object, made once
                    dead = 0
                    worst = pool[0][0] if len(pool) >= _POOL_MAX else _UNBOUNDED
                    for j in range(i, end):
                        if stamps is not None:
                            # The key's stamp when the snapshot was taken: a stamp only
                            # moves forward, so the idle time it gives is at least the
                            # key's own. No better than the pool's worst, the key's own
                            # is not either, and it is passed over, as it would be, without
                            # reading the key or its stamp (two or three cache misses on
                            # a large cache; the stamps are a few shared clock values).
                            st = stamps[j]
                            if now - st <= worst:
                                continue
                        key = slots[j]
                        stamp = access.get(key)
                        if stamp is None:
                            if key not in data:
                                dead += 1
                                continue
                            stamp = db.access_base
                        # compiled, the stamp as a C integer and the score a C double:
                        # the pool holds it as a float, which _pool_put reads in place
                        # (an int took a conversion call per probe)
                        st = stamp
                        idle = now - st
                        if idle <= worst:
                            continue  # no better than the pool's worst: Redis skips it too
                        score = idle
                        if _COMPILED:  # the same insertion, in C (evict.pxd)
                            _pool_put(pool, score, (score, ident, key), _POOL_MAX)  # noqa: F821
                            if len(pool) >= _POOL_MAX:
                                worst = _pool_head(pool)  # noqa: F821 (evict.pxd)
                            continue
                        k = bisect_left(pool, (score,))
                        if len(pool) >= _POOL_MAX:
                            del pool[0]
                            k -= 1
                            pool.insert(k, (score, ident, key))
                            worst = pool[0][0]
                        else:
                            pool.insert(k, (score, ident, key))
                            if len(pool) >= _POOL_MAX:
                                worst = pool[0][0]
                else:
                    dead = self._score_into_pool(db, slots[i:end], lru)
                if dead and snap is not None:
                    self._dead_slots(db, dead, dead == end - i)
            if not populated:
                if candidates is dbs:
                    return _FAIL
                candidates = dbs
                continue
            # the best candidate that still exists (every one gone: sample again)
            while pool:
                _, db_id, key = pool.pop()
                db = dbs[db_id]
                if key in db.data:
                    break
            else:
                continue
            per_key = self.per_key[db_id]  # compiled, a C double: no float made
            used -= per_key + _KEY_TABLES
            # deleteEvictedKeyAndPropagate (_evict), inline: a change there belongs here
            if self.lazy:
                value = db.data.get(key)
                if value is not None and free_effort(value, s) > LAZYFREE_THRESHOLD:
                    db.keyspace.lazyfreed_objects += 1
            engine = self.engine
            if engine is not None:  # deleted at every region, as _evict does
                engine.key_expired(db_id, key, db.data.get(key))
            if s.propagating:
                s.propagate([(db_id, [b"UNLINK" if self.lazy else b"DEL", key])])
            if self.timed:
                deleting = perf_counter_ns()
                db.delete(key)
                s.latency_event("eviction-del", perf_counter_ns() - deleting)
            else:
                # db.delete(key), inline (interpreted, its call and frame cost more than
                # the deletion; compiled, the fields read here are C reads just as there);
                # a change there belongs here
                data = db.data
                if type(data) is dict:
                    plain = data  # compiled, a C dict pop, not a method looked up and called
                    popped = plain.pop(key, None)
                else:  # a dict subclass (see evict.pxd)
                    popped = data.pop(key, None)
                if popped is not None:
                    scan = db.scan_log
                    if scan is not None and scan.removed(key, data):
                        db.scan_log = None
                    access = db.access
                    access.pop(key, None)
                    if db.expires:
                        db.expires.pop(key, None)
                    if db.unshared:
                        db.unshared.pop(key, None)
            watched = db.watched  # db.modified(key), its test inline
            if watched and key in watched:
                db.keyspace.on_modified(db, key)
            if self.waiters:
                s.blocking.signal(db_id, key)
            notifier = _NOTIFY_NS["notifier"]  # events.notifier
            if notifier is not None:
                notifier(db_id, "e", b"evicted", key)
            self.evicted_keys += 1
            if used <= maxmemory:
                return _OK
            freed += 1
            if freed == 1:
                # more than one key to go: the time limit counts from here (the first
                # eviction, a few microseconds, is left out of it)
                start = perf_counter()
            elif not freed & 15 and perf_counter() - start > self.limit_s:
                self._continue_later()
                return _RUNNING

    def _dead_slots(self, db: Database, dead: int, all_dead: bool) -> None:
        """A sample ran into ``dead`` deleted keys' slots of the snapshot: take a new one
        once an eighth of it is gone (evictions, and deletions sampling ran into: each
        brings ``snap_renew`` one nearer), or after eight samples in a row that found
        nothing, or once the database has grown an eighth. Evicted keys cluster (LRU
        takes the oldest, which sit together), so a sample of deleted slots alone is no
        sign that most of the snapshot has gone."""
        db_id = db.id
        self.snap_renew[db_id] -= dead
        if all_dead:
            empty = self.snap_empty[db_id] = self.snap_empty[db_id] + 1
        else:
            empty = self.snap_empty[db_id] = 0
        if empty >= 8 or (len(db.data) > self.snap_limit[db_id] and not child_running(self.server)):
            self.snaps[db_id] = None

    def _cron(self) -> None:
        """Drop the snapshot of a database grown an eighth since it was taken (its new
        keys are sampled from the next one); _evict_pooled leaves that check to the
        cron, as a database at maxmemory does not grow. Not while a fork child runs
        (see _snapshot)."""
        snaps = self.snaps
        if child_running(self.server):
            return
        dbs = self.server.keyspace.dbs
        for db_id, snap in enumerate(snaps):
            if snap is not None and len(dbs[db_id].data) > self.snap_limit[db_id]:
                snaps[db_id] = None

    def _score_into_pool(self, db: Database, slots: list[bytes], lru: bool) -> int:
        """_evict_pooled's samples scored one by one into the pool (LFU, or LRU while
        some live keys have no stamp yet, as after a load: they count from the base);
        returns how many slots were deleted keys'."""
        pool = self.pool
        data = db.data
        get = db.access.get
        db_id = db.id
        dead = 0
        worst = pool[0][0] if len(pool) >= POOL_SIZE else _UNBOUNDED
        decay = db.keyspace.lfu_decay_time
        clock, base = db.clock, db.access_base
        for key in slots:
            stamp = get(key)
            if stamp is None:
                if key not in data:
                    dead += 1  # a deleted slot (a live key always has a stamp or the base)
                    continue
                score = clock - base if lru else 255 - LFU_INIT_VAL
            else:
                score = clock - stamp if lru else 255 - lfu_decayed(stamp, decay)
            if score <= worst:
                continue
            _pool_insert(pool, score, db_id, key)
            if len(pool) >= POOL_SIZE:
                worst = pool[0][0]
        return dead

    def _snapshot(self, db: Database) -> list[bytes] | None:
        """A new snapshot of ``db``'s keys for _evict_pooled to sample (None for a
        database of at most 64 keys: those are sampled from the keys themselves).

        Keeping a log of the keys current costs every write of a new key and every
        delete (SCAN's log does that while an iteration is open); a list of the keys
        taken now and then costs nothing per write and, taken once per eighth of the
        database's keys deleted or added, little per eviction (``list(dict)`` copies
        pointers: about 1 ms for 150k keys, once per 19k evictions). What it gives up:
        keys written since the snapshot (at most an eighth of the database) are not
        sampled until the next one, and they are the newest, which LRU would evict
        last and LFU spares anyway (a new key counts LFU_INIT_VAL).

        Its first maxmemory-samples slots are repeated at its end, so that a sample
        starting near the end wraps around without a second slice (the snapshots are
        dropped when maxmemory-samples changes).

        While a fork child shares the pages, a snapshot due for renewal is kept (asked
        again after RENEW_RECHECK more evictions): taking a new one writes a reference
        count on every key and dropping the old one another, so each page holding keys
        is copied (200k keys: 3.6k pages, 14 MB, and the renewal 5x slower, in-process).
        Only a missing one is taken then (_dead_slots drops a spent one, eight samples
        in a row of deleted keys, child or not). Until the child is gone, keys written
        since are not sampled and the evicted keys' objects stay referenced by the old
        one."""
        data = db.data
        db_id = db.id
        old = self.snaps[db_id]
        if old is not None and child_running(self.server):
            self.snap_renew[db_id] = self.evicted_keys + RENEW_RECHECK
            return old
        if len(data) <= 64:
            self.snaps[db_id] = None
            return None
        access = db.access
        if self.lru and len(access) == len(data):
            # Every key has a stamp (the stamps' keys are the data's): the keys in the
            # stamps' order and, beside them, each one's stamp now, both in one pass
            # over the stamp dict. Only the candidates a stale stamp lets through are
            # looked up (_evict_pooled). What that gives up: a key whose stamp went back
            # since (RENAME or MOVE onto a name the snapshot holds, RESTORE ... IDLETIME
            # over it) is scored by its former, newer stamp until the next snapshot,
            # as a key written since is not sampled until then.
            n = len(access)
            if _COMPILED:  # the same two lists, taken in one C walk (evict.pxd)
                snap, stamps = _keys_and_values(access, self.samples)  # noqa: F821 (evict.pxd)
            else:
                snap = list(access)
                stamps = list(access.values())
                snap += snap[:self.samples]
                stamps += stamps[:self.samples]
            self.snap_access[db_id] = access
        else:
            snap = list(data)
            n = len(snap)
            snap += snap[:self.samples]
            stamps = None
            self.snap_access[db_id] = None
        self.snap_stamps[db_id] = stamps
        if _COMPILED:
            # Out of the cyclic collector's sight: it would otherwise visit every slot of
            # them (a cache miss per key object on a large cache) in each collection of the
            # generation they sit in; measured, those passes were most of the at-limit
            # SET's cache misses. They hold only keys (bytes) and stamps (ints), which
            # refer to nothing, so they can never be part of a cycle.
            _untrack(snap)  # noqa: F821 (evict.pxd)
            if stamps is not None:
                _untrack(stamps)  # noqa: F821 (evict.pxd)
        self.snaps[db_id] = snap
        eighth = max(n >> 3, 16)
        # evictions (counted by evicted_keys) and deleted slots seen before the next one
        self.snap_renew[db_id] = self.evicted_keys + eighth
        self.snap_limit[db_id] = n + eighth  # ... or the database grown this much
        self.snap_empty[db_id] = 0
        return snap

    def _evict(self, db: Database, key: bytes) -> None:
        """deleteEvictedKeyAndPropagate and what performEvictions does around it
        (_evict_pooled has its own copy inline)."""
        s = self.server
        if self.lazy:
            value = db.data.get(key)
            if value is not None and free_effort(value, s) > LAZYFREE_THRESHOLD:
                db.keyspace.lazyfreed_objects += 1
        engine = self.engine
        if engine is not None:
            # Active-Active: the eviction deletes the key at every instance, as an expiry
            # does (observed-remove), in the effect this DEL is sealed with.
            engine.key_expired(db.id, key, db.data.get(key))
        if s.propagating:
            s.propagate([(db.id, [b"UNLINK" if self.lazy else b"DEL", key])])
        if self.timed:  # the latency monitor's eviction-del: the deletion alone
            deleting = perf_counter_ns()
            db.delete(key)
            s.latency_event("eviction-del", perf_counter_ns() - deleting)
        else:
            db.delete(key)
        watched = db.watched  # db.modified(key), its test inline
        if watched and key in watched:
            db.keyspace.on_modified(db, key)
        blocking = s.blocking
        if blocking.waiters:
            blocking.signal(db.id, key)
        notifier = events.notifier
        if notifier is not None:
            notifier(db.id, "e", b"evicted", key)
        self.evicted_keys += 1


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython): where the fastest form differs between the modes, this picks it.
_COMPILED = type(_probe).__name__ != "function"


def _pool_insert(pool: list[tuple[float, int, bytes]], score: float, db_id: int, key: bytes) -> None:
    """Put a sample in the pool as evictionPoolPopulate does: ahead of the entries
    scoring the same, and, when the pool is full, only if it beats the worst (which
    then goes). The pool (score, db id, key), ascending, is bisected with (score,): a
    1-tuple sorts ahead of every entry of the same score."""
    full = len(pool) >= POOL_SIZE
    if full and score <= pool[0][0]:
        return
    if _COMPILED:  # the same insertion, in C (evict.pxd's _pool_put)
        _pool_put(pool, score, (score, db_id, key), _POOL_MAX)  # noqa: F821
        return
    k = bisect_left(pool, (score,))
    if full:
        del pool[0]
        k -= 1
    pool.insert(k, (score, db_id, key))


def evictor_of(server: Server) -> Evictor:
    """The server's Evictor, made on first use."""
    evictor = server.__dict__.get("evictor")
    if evictor is None:
        evictor = server.evictor = Evictor(server, memory_of(server))
    return evictor
