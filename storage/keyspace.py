"""The keyspace: numbered databases of keys, values and expiry times.

No I/O and no clock of its own beyond ``time.time``: the server wires the
hooks (``on_modified`` for WATCH, ``on_expired`` for propagating the DEL of an
expired key, ``on_new``/``on_miss`` for keyspace events) and drives active
expiry from its timer.

Writers go through ``set``/``delete``/``set_expire`` so that SCAN's order and
active expiry's sample stay complete; code that fills ``data`` directly (a bulk
loader) calls ``reindex()`` afterwards. Expiry follows Redis: a key is expired
once ``now > when`` (an expiry equal to now still lives).

Every key also has an access stamp, Redis's per-object ``lru`` field: the LRU
clock (seconds) of its last access, or under an LFU policy the minute of its
last access and a logarithmic access counter (OBJECT IDLETIME / FREQ). Lookups
stamp the key; ``peek`` is the no-touch lookup TYPE, TTL, EXISTS and OBJECT use.
A key without a stamp (bulk-loaded) counts from the database's ``access_base``.
"""

from __future__ import annotations

import random
import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from .glob import compile_glob


def now_ms() -> int:
    """Wall-clock milliseconds, the unit of every expiry time."""
    return int(time.time() * 1000)


# The time lookups judge expiry by: the wall clock, or while a script or a transaction
# runs, the moment it began. Redis holds it there so that a key cannot expire half way
# through one (what is propagated stays consistent); TTLs and new expiry times still
# read the wall clock, as there.
_frozen_ms: int | None = None


def expiry_now() -> int:
    frozen = _frozen_ms
    return int(time.time() * 1000) if frozen is None else frozen


def freeze_expiry_clock() -> int | None:
    """Hold expiry_now() at this moment (a nested hold keeps the outer one); returns
    what release_expiry_clock restores."""
    global _frozen_ms
    held = _frozen_ms
    if held is None:
        _frozen_ms = int(time.time() * 1000)
    return held


def release_expiry_clock(held: int | None) -> None:
    global _frozen_ms
    _frozen_ms = held


# LFU, as Redis's evict.c keeps it: (minutes << 8) | counter, the counter starting
# at 5, growing logarithmically and losing one per decay period without access.
LFU_INIT_VAL = 5


def lfu_minutes() -> int:
    return int(time.time() // 60) & 0xFFFF


def lfu_decayed(stamp: int, decay_time: int) -> int:
    """LFUDecrAndReturn: the counter of ``stamp`` less one per elapsed decay period."""
    counter = stamp & 0xFF
    if decay_time:
        last, now = stamp >> 8, lfu_minutes()
        elapsed = now - last if now >= last else 0xFFFF - last + now
        periods = elapsed // decay_time
        if periods:
            counter = 0 if periods > counter else counter - periods
    return counter


def lfu_incremented(counter: int, log_factor: int) -> int:
    """LFULogIncr: one more access, ever less likely to count as the counter grows."""
    if counter == 255:
        return 255
    base = max(counter - LFU_INIT_VAL, 0)
    if random.random() < 1.0 / (base * log_factor + 1):
        counter += 1
    return counter


class ScanOrder:
    """A cursor-stable order over the keys of a dict, for SCAN's guarantees.

    Keys are appended to a log when created; deletion leaves the entry behind
    until the log is compacted. A cursor is a position in the log (plus the
    compaction epoch it was issued in), so an element present for the whole
    iteration is returned, and one that comes and goes may be returned or not,
    as Redis promises. Compaction keeps the log within about twice the live size
    and remembers how to translate positions issued before it.
    """

    __slots__ = ("log", "epoch", "_prev_live")

    EPOCH_BITS = 8

    def __init__(self) -> None:
        self.log: list[bytes] = []
        self.epoch = 0
        self._prev_live: list[int] | None = None  # live positions in the previous log

    def added(self, key: bytes, live: dict) -> None:
        log = self.log
        log.append(key)
        if len(log) > 1024 and len(log) > 2 * len(live):
            self._compact(live)

    def clear(self) -> None:
        self.log = []
        self.epoch += 1
        self._prev_live = []

    def _compact(self, live: dict) -> None:
        seen: set[bytes] = set()
        positions: list[int] = []
        new_log: list[bytes] = []
        for i, key in enumerate(self.log):
            if key in live and key not in seen:
                seen.add(key)
                positions.append(i)
                new_log.append(key)
        self.log = new_log
        self._prev_live = positions
        self.epoch += 1

    def _position(self, cursor: int) -> int:
        mask = (1 << self.EPOCH_BITS) - 1
        epoch, index = cursor & mask, cursor >> self.EPOCH_BITS
        if epoch == self.epoch & mask:
            return index
        if epoch == (self.epoch - 1) & mask and self._prev_live is not None:
            return bisect_left(self._prev_live, index)
        return 0  # too old to translate: restarting may repeat keys but never misses one

    def scan(self, live: dict, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """Collect about ``count`` live keys from ``cursor``; return (next cursor, keys).

        Like Redis's dictScan loop: stop once ``count`` keys were gathered or
        ten times as many positions were visited (a log full of deleted keys
        must not make one call slow); filtering happens afterwards, so a call
        may return fewer keys than asked, or none, before the end.
        """
        count = max(count, 1)
        pos = self._position(cursor)
        log = self.log
        n = len(log)
        keys: list[bytes] = []
        limit = min(n, pos + count * 10)
        step = count
        while pos < limit and len(keys) < count:
            end = min(pos + step, limit)
            keys.extend(k for k in log[pos:end] if k in live)
            pos = end
            step = count - len(keys)
        if pos >= n:
            return 0, keys
        return (pos << self.EPOCH_BITS) | (self.epoch & ((1 << self.EPOCH_BITS) - 1)), keys


class WatchAll(dict):
    """``Database.watched`` while every modified key must be signalled.

    Writers test ``db.watched and key in db.watched`` before signalling, so a plain
    dict costs them one test when nobody watches. Client tracking needs to hear of
    every modification (any key may be cached, or match a broadcast prefix): with
    this mapping in place every key reads as watched, while the real WATCH entries
    stay what ``get``/``items`` return.
    """

    __slots__ = ()

    def __contains__(self, key: object) -> bool:
        return True

    def __bool__(self) -> bool:
        return True


class Database:
    """One numbered database: a dict of keys and a dict of expiry times (ms)."""

    __slots__ = ("id", "data", "expires", "watched", "scan_order", "keyspace", "volatile_log",
                 "access", "access_base", "clock", "lfu", "avg_ttl")

    def __init__(self, db_id: int, keyspace: Keyspace) -> None:
        self.id = db_id
        self.data: dict[bytes, Any] = {}
        self.expires: dict[bytes, int] = {}
        # key -> watchers; maintained by the server's WATCH implementation (a
        # WatchAll while the keyspace signals every modification).
        self.watched: dict[bytes, list] = WatchAll() if keyspace.signal_all else {}
        self.scan_order = ScanOrder()
        self.keyspace = keyspace
        # Keys that were given a TTL, in order, for O(1) random sampling by
        # active expiry; entries go stale when the TTL goes and are compacted.
        self.volatile_log: list[bytes] = []
        # Access stamps (see the module docstring); clock and lfu mirror the keyspace's.
        self.access: dict[bytes, int] = {}
        self.clock = keyspace.lru_clock
        self.access_base = self.clock
        self.lfu = keyspace.lfu
        # INFO keyspace's avg_ttl (ms): a running average of the TTLs active expiry samples.
        self.avg_ttl = 0

    def __len__(self) -> int:
        return len(self.data)

    # -- lookups -----------------------------------------------------------
    def lookup(self, key: bytes) -> Any:
        """The live value of ``key`` or None, deleting it first if it has expired; an
        access, so the key's stamp is renewed."""
        value = self.data.get(key)
        if value is not None:
            if self.expires:
                when = self.expires.get(key)
                if when is not None and when < expiry_now() and self.keyspace.expire_allowed:
                    if not self.keyspace.expire_paused:
                        self._expire(key)
                    return None
            if self.lfu:
                self._lfu_touch(key)
            else:
                self.access[key] = self.clock
        return value

    def peek(self, key: bytes) -> Any:
        """``lookup`` without renewing the access stamp (Redis's LOOKUP_NOTOUCH)."""
        value = self.data.get(key)
        if value is not None and self.expires:
            when = self.expires.get(key)
            if when is not None and when < expiry_now() and self.keyspace.expire_allowed:
                if not self.keyspace.expire_paused:
                    self._expire(key)
                return None
        return value

    def lookup_read(self, key: bytes) -> Any:
        """``lookup`` that counts a keyspace hit or miss, as read commands do."""
        return self._count(key, self.lookup(key))

    def peek_read(self, key: bytes) -> Any:
        """``peek`` that counts a keyspace hit or miss (TYPE, TTL, EXISTS)."""
        return self._count(key, self.peek(key))

    def _count(self, key: bytes, value: Any) -> Any:
        if value is None:
            self.keyspace.misses += 1
            if self.keyspace.on_miss is not None:
                self.keyspace.on_miss(self, key)
        else:
            self.keyspace.hits += 1
        return value

    # -- access stamps -------------------------------------------------------
    def touch(self, key: bytes) -> None:
        """An access to ``key`` by a command that found it without ``lookup``."""
        if self.lfu:
            self._lfu_touch(key)
        else:
            self.access[key] = self.clock

    def _lfu_touch(self, key: bytes) -> None:
        ks = self.keyspace
        stamp = self.access.get(key)
        counter = LFU_INIT_VAL if stamp is None else lfu_decayed(stamp, ks.lfu_decay_time)
        self.access[key] = (lfu_minutes() << 8) | lfu_incremented(counter, ks.lfu_log_factor)

    def _stamp_new(self, key: bytes) -> None:
        self.access[key] = (lfu_minutes() << 8) | LFU_INIT_VAL if self.lfu else self.clock

    def idle_seconds(self, key: bytes) -> int:
        """OBJECT IDLETIME: seconds since the key's last access (LRU stamps)."""
        return max(0, self.clock - self.access.get(key, self.access_base))

    def frequency(self, key: bytes) -> int:
        """OBJECT FREQ: the decayed LFU counter (a key never stamped counts as new)."""
        stamp = self.access.get(key)
        if stamp is None:
            return LFU_INIT_VAL
        return lfu_decayed(stamp, self.keyspace.lfu_decay_time)

    def set_idle(self, key: bytes, seconds: int) -> None:
        """RESTORE ... IDLETIME: stamp the key as last used ``seconds`` ago."""
        self.access[key] = self.clock - seconds

    def set_frequency(self, key: bytes, freq: int) -> None:
        """RESTORE ... FREQ: the LFU counter, stamped now."""
        self.access[key] = (lfu_minutes() << 8) | freq

    def contains(self, key: bytes) -> bool:
        return self.lookup(key) is not None

    def is_expired(self, key: bytes) -> bool:
        """Whether ``key`` exists but its time has passed (not yet deleted)."""
        when = self.expires.get(key)
        return when is not None and when < expiry_now()

    # -- writes ------------------------------------------------------------
    def set(self, key: bytes, value: Any, keep_ttl: bool = False) -> None:
        """Store ``value`` under ``key``; any TTL is dropped unless ``keep_ttl``."""
        data = self.data
        if key not in data:
            self.scan_order.added(key, data)
            data[key] = value
            self._stamp_new(key)
            if self.keyspace.on_new is not None:
                self.keyspace.on_new(self, key)
        else:
            data[key] = value
            if not self.lfu:  # a new object in Redis: a fresh LRU stamp, LFU kept
                self.access[key] = self.clock
        if not keep_ttl and self.expires:
            self.expires.pop(key, None)

    def delete(self, key: bytes) -> bool:
        """Remove ``key``; whether it existed."""
        if self.data.pop(key, None) is None:
            return False
        self.access.pop(key, None)
        if self.expires:
            self.expires.pop(key, None)
        return True

    def get_expire(self, key: bytes) -> int | None:
        return self.expires.get(key)

    def set_expire(self, key: bytes, when_ms: int) -> None:
        """Give ``key`` (which must exist) an absolute expiry time in ms."""
        expires = self.expires
        if key not in expires:
            self.volatile_log.append(key)
        expires[key] = when_ms

    def persist(self, key: bytes) -> bool:
        return self.expires.pop(key, None) is not None

    def modified(self, key: bytes) -> None:
        """Tell WATCH that ``key`` changed (Redis's signalModifiedKey)."""
        if self.watched and key in self.watched:
            self.keyspace.on_modified(self, key)

    def _expire(self, key: bytes) -> None:
        self.data.pop(key, None)
        self.access.pop(key, None)
        self.expires.pop(key, None)
        self.keyspace.expired_keys += 1
        self.keyspace.on_expired(self, key)

    def flush(self) -> None:
        self.data.clear()
        self.access.clear()
        self.access_base = self.clock
        self.expires.clear()
        self.scan_order.clear()
        self.volatile_log = []
        self.avg_ttl = 0

    # -- iteration ---------------------------------------------------------
    def random_key(self) -> bytes | None:
        """RANDOMKEY: a random live key; expired ones met on the way are deleted.

        When expiry is not allowed (replica, loading) and every key is volatile,
        give up after 100 expired picks and return one of them, as Redis does;
        while a pause keeps expired keys in place, give up with none.
        """
        data = self.data
        tries = 100
        paused = self.keyspace.expire_paused
        while data:
            key = self._sample_key()
            when = self.expires.get(key) if self.expires else None
            if when is None or when >= expiry_now():
                return key
            if not self.keyspace.expire_allowed or paused:
                if len(self.expires) == len(data):
                    tries -= 1
                    if tries == 0:
                        return None if paused else key
                continue
            self._expire(key)
        return None

    def _sample_key(self) -> bytes:
        data = self.data
        if len(data) < 64:
            return random.choice(list(data))
        log = self.scan_order.log
        for _ in range(64):
            key = log[random.randrange(len(log))]
            if key in data:
                return key
        # The log is mostly stale (or was bypassed): fall back to the dict.
        self.reindex()
        return random.choice(self.scan_order.log)

    def keys(self, pattern: bytes) -> list[bytes]:
        """KEYS: live keys matching ``pattern`` (expired ones are skipped, not deleted).

        ``*`` alone takes every key, the empty one included, as Redis's
        shortcut does (the glob itself never matches an empty string).
        """
        now = now_ms()
        expires = self.expires
        if pattern == b"*":
            if not expires:
                return list(self.data)
            return [k for k in self.data if (w := expires.get(k)) is None or w >= now]
        match = compile_glob(pattern)
        if not expires:
            return [k for k in self.data if match(k)]
        return [k for k in self.data if match(k) and ((w := expires.get(k)) is None or w >= now)]

    def reindex(self) -> None:
        """Rebuild SCAN's order from the dict, for code that filled ``data`` directly."""
        self.scan_order.clear()
        self.scan_order.log = list(self.data)

    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        return self.scan_order.scan(self.data, cursor, count)

    def active_expire(self, budget: int = 16) -> int:
        """Sample keys with a TTL and delete the expired ones; how many were deleted.

        Like Redis's active expiry cycle: rounds of 20 samples, repeated while
        more than 10% of a round had expired, up to ``budget`` rounds. Each round's
        live samples move ``avg_ttl`` 2% of the way towards their mean TTL.
        """
        expires = self.expires
        if not expires:
            self.avg_ttl = 0
            return 0
        if not self.keyspace.expire_allowed or self.keyspace.expire_paused:
            return 0
        log = self.volatile_log
        if len(log) < len(expires) or len(log) > 2 * len(expires) + 64:
            log = self.volatile_log = list(expires)  # bypassed, or mostly stale
        removed = 0
        for _ in range(budget):
            if not expires:
                break
            if len(log) <= 20:
                sample = list(log)
            else:
                n = len(log)
                sample = [log[random.randrange(n)] for _ in range(20)]
            now = now_ms()
            hit = 0
            ttl_sum = ttl_samples = 0
            for key in sample:
                when = expires.get(key)
                if when is None:
                    continue
                if when < now:
                    self._expire(key)
                    hit += 1
                elif when > now:
                    ttl_sum += when - now
                    ttl_samples += 1
            if ttl_samples:
                avg = ttl_sum // ttl_samples
                self.avg_ttl = (self.avg_ttl or avg) // 50 * 49 + avg // 50
            removed += hit
            if hit * 10 <= len(sample):
                break
        return removed


class Keyspace:
    """All databases plus the counters INFO reports about them."""

    def __init__(self, databases: int = 16) -> None:
        self.lru_clock = int(time.monotonic())
        self.dbs = [Database(i, self) for i in range(databases)]
        self.hits = 0
        self.misses = 0
        self.expired_keys = 0
        # Values released through the lazy-free path (UNLINK, FLUSHALL ASYNC, ...) that
        # Redis would hand to its free thread. rill frees them at once (CPython frees by
        # reference count) but reports the count Redis users read in INFO.
        self.lazyfreed_objects = 0
        # Replicas and AOF loading must not expire keys on their own.
        self.expire_allowed = True
        # While CLIENT PAUSE holds, the dataset stays as it is: keys whose time has
        # passed read as missing but are not deleted (nor counted, nor propagated)
        # until the pause ends, as Redis does.
        self.expire_paused = False
        self.on_modified: Callable[[Database, bytes], None] = lambda db, key: None
        self.on_expired: Callable[[Database, bytes], None] = lambda db, key: None
        # Keyspace events Redis fires from the lookup layer, for the pub/sub family
        # to install: "new" when a key is created (dbAdd), "keymiss" when a read
        # lookup finds nothing. None (the default) costs one test.
        self.on_new: Callable[[Database, bytes], None] | None = None
        self.on_miss: Callable[[Database, bytes], None] | None = None

    # The LRU clock (seconds) every access is stamped with, advanced by ``tick``;
    # an LFU maxmemory-policy switches the stamps to LFU counters.
    lru_clock = int(time.monotonic())
    lfu = False
    lfu_log_factor = 10
    lfu_decay_time = 1

    def tick(self) -> None:
        """Advance the LRU clock (the server's cron, as Redis's serverCron does)."""
        clock = int(time.monotonic())
        if clock != self.lru_clock:
            self.lru_clock = clock
            for db in self.dbs:
                db.clock = clock

    def set_lfu(self, enabled: bool, log_factor: int, decay_time: int) -> None:
        """maxmemory-policy, lfu-log-factor and lfu-decay-time as configured."""
        self.lfu, self.lfu_log_factor, self.lfu_decay_time = enabled, log_factor, decay_time
        for db in self.dbs:
            db.lfu = enabled

    def __getitem__(self, index: int) -> Database:
        return self.dbs[index]

    def __len__(self) -> int:
        return len(self.dbs)

    def swap(self, a: int, b: int) -> None:
        """SWAPDB: exchange the contents of two databases (clients keep their index)."""
        da, db = self.dbs[a], self.dbs[b]
        da.data, db.data = db.data, da.data
        da.expires, db.expires = db.expires, da.expires
        da.scan_order, db.scan_order = db.scan_order, da.scan_order
        da.volatile_log, db.volatile_log = db.volatile_log, da.volatile_log
        da.access, db.access = db.access, da.access
        da.access_base, db.access_base = db.access_base, da.access_base
        da.avg_ttl, db.avg_ttl = db.avg_ttl, da.avg_ttl

    signal_all = False

    def set_signal_all(self, on: bool) -> None:
        """Signal every modified key to ``on_modified`` (on), or only WATCHed ones (off)."""
        if on == self.signal_all:
            return
        self.signal_all = on
        kind = WatchAll if on else dict
        for db in self.dbs:
            db.watched = kind(db.watched)

    def flush_all(self) -> None:
        for db in self.dbs:
            db.flush()
