"""The keyspace: numbered databases of keys, values and expiry times.

No I/O and no clock of its own beyond ``time.time``: the server wires the
hooks (``on_modified`` for WATCH, ``on_expired`` for propagating the DEL of an
expired key) and drives active expiry from its timer.
"""

from __future__ import annotations

import random
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

from .glob import compile_glob


def now_ms() -> int:
    """Wall-clock milliseconds, the unit of every expiry time."""
    return int(time.time() * 1000)


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
        """Visit ``count`` log positions from ``cursor``; return (next cursor, live keys)."""
        pos = self._position(cursor)
        log = self.log
        end = min(pos + max(count, 1), len(log))
        keys = [k for k in log[pos:end] if k in live]
        if end >= len(log):
            return 0, keys
        return (end << self.EPOCH_BITS) | (self.epoch & ((1 << self.EPOCH_BITS) - 1)), keys


class Database:
    """One numbered database: a dict of keys and a dict of expiry times (ms)."""

    __slots__ = ("id", "data", "expires", "watched", "scan_order", "keyspace")

    def __init__(self, db_id: int, keyspace: Keyspace) -> None:
        self.id = db_id
        self.data: dict[bytes, Any] = {}
        self.expires: dict[bytes, int] = {}
        # key -> watchers; maintained by the server's WATCH implementation.
        self.watched: dict[bytes, list] = {}
        self.scan_order = ScanOrder()
        self.keyspace = keyspace

    def __len__(self) -> int:
        return len(self.data)

    # -- lookups -----------------------------------------------------------
    def lookup(self, key: bytes) -> Any:
        """The live value of ``key`` or None, deleting it first if it has expired."""
        value = self.data.get(key)
        if value is not None and self.expires:
            when = self.expires.get(key)
            if when is not None and when <= now_ms() and self.keyspace.expire_allowed:
                self._expire(key)
                return None
        return value

    def lookup_read(self, key: bytes) -> Any:
        """``lookup`` that counts a keyspace hit or miss, as read commands do."""
        value = self.lookup(key)
        if value is None:
            self.keyspace.misses += 1
        else:
            self.keyspace.hits += 1
        return value

    def contains(self, key: bytes) -> bool:
        return self.lookup(key) is not None

    def is_expired(self, key: bytes) -> bool:
        """Whether ``key`` exists but its time has passed (not yet deleted)."""
        when = self.expires.get(key)
        return when is not None and when <= now_ms()

    # -- writes ------------------------------------------------------------
    def set(self, key: bytes, value: Any, keep_ttl: bool = False) -> None:
        """Store ``value`` under ``key``; any TTL is dropped unless ``keep_ttl``."""
        data = self.data
        if key not in data:
            self.scan_order.added(key, data)
        data[key] = value
        if not keep_ttl and self.expires:
            self.expires.pop(key, None)

    def delete(self, key: bytes) -> bool:
        """Remove ``key``; whether it existed."""
        if self.data.pop(key, None) is None:
            return False
        if self.expires:
            self.expires.pop(key, None)
        return True

    def get_expire(self, key: bytes) -> int | None:
        return self.expires.get(key)

    def set_expire(self, key: bytes, when_ms: int) -> None:
        self.expires[key] = when_ms

    def persist(self, key: bytes) -> bool:
        return self.expires.pop(key, None) is not None

    def modified(self, key: bytes) -> None:
        """Tell WATCH that ``key`` changed (Redis's signalModifiedKey)."""
        if self.watched and key in self.watched:
            self.keyspace.on_modified(self, key)

    def _expire(self, key: bytes) -> None:
        self.data.pop(key, None)
        self.expires.pop(key, None)
        self.keyspace.expired_keys += 1
        self.keyspace.on_expired(self, key)

    def flush(self) -> None:
        self.data.clear()
        self.expires.clear()
        self.scan_order.clear()

    # -- iteration ---------------------------------------------------------
    def random_key(self) -> bytes | None:
        """A random live key (expired ones met on the way are deleted)."""
        for _ in range(100):
            if not self.data:
                return None
            key = random.choice(list(self.data)) if len(self.data) < 64 else self._sample_key()
            if self.lookup(key) is not None:
                return key
        return next(iter(self.data), None)

    def _sample_key(self) -> bytes:
        log = self.scan_order.log
        data = self.data
        while True:
            key = log[random.randrange(len(log))]
            if key in data:
                return key

    def keys(self, pattern: bytes) -> Iterator[bytes]:
        match = compile_glob(pattern)
        now = now_ms()
        expires = self.expires
        for key in list(self.data):
            if match(key):
                when = expires.get(key) if expires else None
                if when is None or when > now:
                    yield key

    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        return self.scan_order.scan(self.data, cursor, count)

    def active_expire(self, budget: int = 20) -> int:
        """Sample keys with a TTL and delete the expired ones; how many were deleted.

        Like Redis's active expiry cycle: keep sampling while more than a quarter
        of a sample had expired, up to ``budget`` rounds.
        """
        expires = self.expires
        removed = 0
        for _ in range(budget):
            if not expires:
                break
            n = min(20, len(expires))
            keys = random.sample(list(expires), n) if len(expires) <= 200 else self._sample_expiring(n)
            now = now_ms()
            hit = 0
            for key in keys:
                when = expires.get(key)
                if when is not None and when <= now:
                    self._expire(key)
                    hit += 1
            removed += hit
            if hit * 4 <= n:
                break
        return removed

    def _sample_expiring(self, n: int) -> list[bytes]:
        # dict order is insertion order; a random window is a cheap, fair-enough sample
        keys = []
        it_start = random.randrange(len(self.expires))
        for i, key in enumerate(self.expires):
            if i >= it_start:
                keys.append(key)
                if len(keys) >= n:
                    break
        return keys


class Keyspace:
    """All databases plus the counters INFO reports about them."""

    def __init__(self, databases: int = 16) -> None:
        self.dbs = [Database(i, self) for i in range(databases)]
        self.hits = 0
        self.misses = 0
        self.expired_keys = 0
        # Replicas and AOF loading must not expire keys on their own.
        self.expire_allowed = True
        self.on_modified: Callable[[Database, bytes], None] = lambda db, key: None
        self.on_expired: Callable[[Database, bytes], None] = lambda db, key: None

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

    def flush_all(self) -> None:
        for db in self.dbs:
            db.flush()
