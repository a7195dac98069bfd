"""The keyspace: numbered databases of keys, values and expiry times.

No I/O and no clock of its own beyond ``time.time``: the server wires the
hooks (``on_modified`` for WATCH, ``on_expired`` for propagating the DEL of an
expired key, ``on_new``/``on_miss`` for keyspace events) and drives active
expiry from its timer.

Writers go through ``set``/``delete``/``set_expire`` so that SCAN's log (while
an iteration is open) and active expiry's sample stay complete; code that fills
``data`` directly (a bulk loader) calls ``reindex()`` afterwards. Expiry follows Redis: a key is expired
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
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable
from itertools import chain, compress
from operator import neg
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


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython). Compiled, the lookups read the data dict through keyspace.pxd's ``_c_data_get``,
# a name that exists only in the compiled module; ``_COMPILED`` guards it.
_COMPILED = type(_probe).__name__ != "function"

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


# Where the numbering of a new log's first slots starts. Each log numbers its first slots
# above every number an earlier log handed out, so a cursor that outlives its log (the
# log was dropped, or the data reloaded) lies before all of a new log's first slots:
# resuming from it walks the whole new log and misses nothing. New keys are numbered
# downwards from a log's lowest number; 2**56 leaves room for 7e16 of them.
_next_base = 1 << 56


class ScanLog:
    """The order SCAN, SSCAN, HSCAN and ZSCAN walk while an iteration is open.

    Why this shape. Redis walks its own hash table with a reverse-binary cursor. A
    Python dict's table can't be walked, and any order fixed by the keys themselves
    (by hash) costs a pass of Python code over every key before the first page, about
    half a second per million keys, or a sorted index kept on every write. A dict does
    keep insertion order, and ``list(live)`` copies it in C in milliseconds, so the
    log starts from that and keeps these rules:

    - Every key has one slot, numbered; the numbers increase along the walk, and a
      cursor is the number of the next slot to visit. Numbers never change, so a
      cursor stays valid whatever happens to the slots around it.
    - A deleted key's slot stays, marked in ``dead``; if the key comes back while the
      slot is there it takes the slot again. (The log this replaces appended a second
      slot instead, so a churned key was returned once per round: 350 "keys" from a
      database of 2.)
    - A key that is new to the log goes to the *front*, numbered below every slot,
      where no open iteration will look again (each has passed the front already).
      An iteration therefore visits only slots that existed when it began: it ends
      even while keys keep coming and going, and a key whose dead slot was compacted
      away and which then comes back can't be met a second time.
    - Dead slots are compacted away once they are more than half of the log, so it
      stays under about twice the live size however much churn there is.

    So a full iteration returns every key present all along exactly once, and any
    other key at most once.

    The log lives only while it is needed: the owner builds it for the first page
    (or RANDOMKEY's sample) and drops it when an iteration ends and no other is open
    (``open`` counts iterations begun at cursor 0 and not finished). Without a log a
    write costs one ``is None`` test. An iteration left unfinished (a client that
    broke out of its loop, or went away) would keep the log, and the cost, for good;
    so the owner also drops it after a long stretch of writes without a page: four
    times the log's size, at least IDLE_MIN (``added`` and ``removed`` say when).

    A cursor that outlives its log resumes a new one from its start: keys present all
    along are still all returned, some a second time. That takes an iteration idle
    for that stretch of writes, an open count gone wrong (an iteration resumed from a
    made-up cursor finished), or the data flushed or reloaded.

    The owner reports every new key (``added``) and every removed one (``removed``);
    ``page`` repairs the log if a write went around it (the live count disagrees).
    """

    __slots__ = ("keys", "seqs", "front", "front_neg", "low", "dead", "open", "budget")

    # Compaction waits for this many dead slots, so a small log isn't rebuilt per delete.
    COMPACT_MIN = 1024
    # The least number of writes without a page before the log is given up.
    IDLE_MIN = 4096

    def __init__(self, live: Iterable[bytes]) -> None:
        global _next_base
        self.keys: list[bytes] = list(live)  # the main run, numbered upwards
        base = _next_base
        _next_base = base + len(self.keys) + 1
        # A range until the first compaction: an array filled from a range would cost
        # a Python int per key, ten times what copying the keys costs.
        self.seqs: range | array = range(base, base + len(self.keys))
        # Keys new since the main run was made, newest last; they come first in the
        # walk, newest first. front_neg holds minus their numbers (ascending, for bisect).
        self.front: list[bytes] = []
        self.front_neg = array("q")
        self.low = base  # the lowest number given out; the next front slot gets one less
        self.dead: set[bytes] = set()
        self.open = 0
        self.budget = max(4 * len(self.keys), self.IDLE_MIN)  # writes left before giving up

    def __len__(self) -> int:
        return len(self.keys) + len(self.front)

    def added(self, key: bytes) -> bool:
        """``key`` is new in the live collection; True: drop the log (long idle)."""
        self.budget -= 1
        if self.budget < 0:
            return True
        dead = self.dead
        if key in dead:
            dead.remove(key)  # back in its own slot
            return False
        low = self.low - 1
        self.low = low
        self.front.append(key)
        self.front_neg.append(-low)
        return False

    def removed(self, key: bytes, live: Collection[bytes]) -> bool:
        """``key`` left the live collection; True: drop the log (long idle)."""
        self.budget -= 1
        if self.budget < 0:
            return True
        dead = self.dead
        dead.add(key)
        if len(dead) > self.COMPACT_MIN and 2 * len(dead) > len(self.keys) + len(self.front):
            self.compact(live)
        return False

    def compact(self, live: Collection[bytes]) -> None:
        """Drop dead slots and fold the front into the main run; every surviving
        slot keeps its number, so no cursor needs translating."""
        keys = self.front[::-1] + self.keys
        seqs = chain(map(neg, reversed(self.front_neg)), self.seqs)
        keep = list(map(live.__contains__, keys))
        self.keys = list(compress(keys, keep))
        self.seqs = array("q", compress(seqs, keep))
        self.front = []
        self.front_neg = array("q")
        self.dead = set()
        if len(self.keys) != len(live):
            self._repair(live)

    def _repair(self, live: Collection[bytes]) -> None:
        """A write went around the log: keep each key's first slot, put missing keys
        in the front."""
        seen: set[bytes] = set()
        keys: list[bytes] = []
        seqs = array("q")
        for key, seq in zip(self.keys, self.seqs, strict=True):
            if key not in seen:
                seen.add(key)
                keys.append(key)
                seqs.append(seq)
        self.keys, self.seqs = keys, seqs
        for key in live:
            if key not in seen:
                self.added(key)

    def sample(self) -> bytes:
        """A slot's key, uniformly (it may be dead)."""
        front = self.front
        i = random.randrange(len(front) + len(self.keys))
        return front[i] if i < len(front) else self.keys[i - len(front)]

    def _slots(self, a: int, b: int) -> list[bytes]:
        """The keys of walk positions [a, b): the front newest first, then the main run."""
        nf = len(self.front)
        if a >= nf:
            return self.keys[a - nf : b - nf]
        stop = nf - 1 - b
        part = self.front[nf - 1 - a : stop if stop >= 0 else None : -1]
        if b > nf:
            part += self.keys[: b - nf]
        return part

    def page(self, live: Collection[bytes], cursor: int, count: int) -> tuple[int, list[bytes]]:
        """Collect about ``count`` live keys from ``cursor``; return (next cursor, keys).

        Like Redis's dictScan loop: stop once ``count`` keys were gathered or ten times
        as many slots were visited (dead slots must not make one call slow); MATCH and
        TYPE filter afterwards, so a call may return fewer keys than asked, or none,
        before the end. Keeps the count of open iterations.
        """
        if len(self.keys) + len(self.front) - len(self.dead) != len(live):
            self.compact(live)
        nf = len(self.front)
        total = nf + len(self.keys)
        self.budget = max(4 * total, self.IDLE_MIN)
        if cursor == 0:
            self.open += 1
            pos = 0
        else:
            # walk position of the first slot numbered >= cursor
            in_front = bisect_right(self.front_neg, -cursor)
            pos = nf - in_front if in_front else nf + bisect_left(self.seqs, cursor)
        count = max(count, 1)
        limit = min(total, pos + count * 10)
        found: list[bytes] = []
        want = count
        while pos < limit and want > 0:
            end = min(pos + want, limit)
            found.extend(filter(live.__contains__, self._slots(pos, end)))
            pos = end
            want = count - len(found)
        if pos >= total:
            self.open -= 1
            return 0, found
        return (-self.front_neg[nf - 1 - pos] if pos < nf else self.seqs[pos - nf]), found


def scan_step(log: ScanLog | None, live: Collection[bytes], cursor: int,
              count: int) -> tuple[ScanLog | None, int, list[bytes]]:
    """One SCAN-family call over ``live``: (the log to keep, next cursor, keys).

    Builds the log when there is none (a non-zero cursor then counts as an iteration
    in flight) and gives back None once the last open iteration has finished, so that
    writes stop paying for a scan nobody runs.
    """
    if log is None:
        log = ScanLog(live)
        if cursor:
            log.open = 1
    cursor, keys = log.page(live, cursor, count)
    if cursor == 0 and log.open <= 0:
        return None, 0, keys
    return log, cursor, keys


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

    __slots__ = ("id", "data", "expires", "watched", "scan_log", "keyspace", "volatile_log",
                 "access", "access_base", "clock", "lfu", "avg_ttl", "unshared")

    def __init__(self, db_id: int, keyspace: Keyspace) -> None:
        self.id = db_id
        self.data: dict[bytes, Any] = {}
        self.expires: dict[bytes, int] = {}
        # key -> watchers; maintained by the server's WATCH implementation (a
        # WatchAll while the keyspace signals every modification).
        self.watched: dict[bytes, list] = WatchAll() if keyspace.signal_all else {}
        # SCAN's order while an iteration is open (and RANDOMKEY's sample); None otherwise.
        self.scan_log: ScanLog | None = None
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
        # String values that look like a small integer but are, in Redis, an object of
        # their own rather than the shared integer a write would have made of them:
        # key -> the OBJECT ENCODING of that object, b"embstr" for an INCRBYFLOAT result
        # (never int-encoded) or b"int" for a COPY (refcount 1). Usually empty; an entry
        # goes whenever the key's value is replaced or the key goes, and moves with
        # RENAME/MOVE/SWAPDB as Redis's object does.
        self.unshared: dict[bytes, bytes] = {}

    def __len__(self) -> int:
        return len(self.data)

    # -- lookups -----------------------------------------------------------
    def lookup(self, key: bytes) -> Any:
        """The live value of ``key`` or None, deleting it first if it has expired; an
        access, so the key's stamp is renewed."""
        value = _c_data_get(self.data, key) if _COMPILED else self.data.get(key)  # noqa: F821
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
        value = _c_data_get(self.data, key) if _COMPILED else self.data.get(key)  # noqa: F821
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
            data[key] = value
            if self.scan_log is not None and self.scan_log.added(key):
                self.scan_log = None
            self._stamp_new(key)
            if self.keyspace.on_new is not None:
                self.keyspace.on_new(self, key)
        else:
            data[key] = value
            if not self.lfu:  # a new object in Redis: a fresh LRU stamp, LFU kept
                self.access[key] = self.clock
            if self.unshared:  # a new key has none: delete and expiry dropped it
                self.unshared.pop(key, None)
        if not keep_ttl and self.expires:
            self.expires.pop(key, None)

    def delete(self, key: bytes) -> bool:
        """Remove ``key``; whether it existed."""
        if self.data.pop(key, None) is None:
            return False
        if self.scan_log is not None and self.scan_log.removed(key, self.data):
            self.scan_log = None
        self.access.pop(key, None)
        if self.expires:
            self.expires.pop(key, None)
        if self.unshared:
            self.unshared.pop(key, None)
        return True

    def get_expire(self, key: bytes) -> int | None:
        return self.expires.get(key)

    def set_expire(self, key: bytes, when_ms: int) -> None:
        """Give ``key`` (which must exist) an absolute expiry time in ms."""
        expires = self.expires
        if key not in expires:
            self.volatile_log.append(key)
        expires[key] = when_ms
        hook = self.keyspace.on_set_expire
        if hook is not None:
            hook(self, key)

    def expire_if_due(self, key: bytes) -> bool:
        """Delete ``key`` if its time has passed, even while expiry is held (a writable
        replica's own keys, which no master will ever DEL); True if it went."""
        when = self.expires.get(key)
        if when is None or when >= expiry_now():
            return False
        self._expire(key)
        return True

    def persist(self, key: bytes) -> bool:
        return self.expires.pop(key, None) is not None

    def modified(self, key: bytes) -> None:
        """Tell WATCH that ``key`` changed (Redis's signalModifiedKey)."""
        if self.watched and key in self.watched:
            self.keyspace.on_modified(self, key)

    def _expire(self, key: bytes) -> None:
        value = self.data.pop(key, None)
        if value is not None and self.scan_log is not None:
            if self.scan_log.removed(key, self.data):
                self.scan_log = None
        self.access.pop(key, None)
        self.expires.pop(key, None)
        if self.unshared:
            self.unshared.pop(key, None)
        self.keyspace.expired_keys += 1
        self.keyspace.on_expired(self, key, value)

    def flush(self) -> None:
        self.data.clear()
        self.access.clear()
        self.access_base = self.clock
        self.expires.clear()
        self.scan_log = None
        self.volatile_log = []
        self.avg_ttl = 0
        self.unshared.clear()

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
        # A dict can't be indexed, so sample SCAN's log (built here if no scan is open;
        # at most half of it is dead slots, and each key has one slot, so it's uniform).
        log = self.scan_log
        if log is None:
            log = self.scan_log = ScanLog(data)
        elif len(log) - len(log.dead) != len(data):
            log.compact(data)
        for _ in range(64):
            key = log.sample()
            if key in data:
                return key
        return random.choice(list(data))  # a log that writes went around

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
        """Forget SCAN's log, for code that filled ``data`` directly (the next page
        builds a new one; a cursor from before restarts it from the head)."""
        self.scan_log = None

    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """One SCAN page: (next cursor, keys), expired keys included (see ``ScanLog``)."""
        self.scan_log, cursor, keys = scan_step(self.scan_log, self.data, cursor, count)
        return cursor, keys

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
    """All databases plus the counters INFO reports about them.

    Compiled, an extension type (keyspace.pxd): its attributes are C fields, so every
    attribute is set here, before the databases (which read lru_clock, lfu and
    signal_all) are made."""

    def __init__(self, databases: int = 16) -> None:
        # The LRU clock (seconds) every access is stamped with, advanced by ``tick``;
        # an LFU maxmemory-policy switches the stamps to LFU counters.
        self.lru_clock = int(time.monotonic())
        self.lfu = False
        self.lfu_log_factor = 10
        self.lfu_decay_time = 1
        # Whether a small integer value is one shared object (OBJECT REFCOUNT); the server
        # turns it off under an LRU or LFU maxmemory-policy, as Redis does.
        self.shared_integers = True
        # Whether every modified key is signalled (set_signal_all), not only WATCHed ones.
        self.signal_all = False
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
        # (database, key, the value that went): WATCH, keyspace events, the DEL's propagation.
        self.on_expired: Callable[[Database, bytes, Any], None] = lambda db, key, value: None
        # Keyspace events Redis fires from the lookup layer, for the pub/sub family
        # to install: "new" when a key is created (dbAdd), "keymiss" when a read
        # lookup finds nothing. None (the default) costs one test.
        self.on_new: Callable[[Database, bytes], None] | None = None
        # Called after every set_expire while installed (a replica: the keys its own
        # clients give a TTL, which it must expire itself). None costs one test.
        self.on_set_expire: Callable[[Database, bytes], None] | None = None
        self.on_miss: Callable[[Database, bytes], None] | None = None

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
        da.scan_log, db.scan_log = db.scan_log, da.scan_log
        da.volatile_log, db.volatile_log = db.volatile_log, da.volatile_log
        da.access, db.access = db.access, da.access
        da.access_base, db.access_base = db.access_base, da.access_base
        da.avg_ttl, db.avg_ttl = db.avg_ttl, da.avg_ttl
        da.unshared, db.unshared = db.unshared, da.unshared

    def set_signal_all(self, on: bool) -> None:
        """Signal every modified key to ``on_modified`` (on), or only WATCHed ones (off)."""
        if on == self.signal_all:
            return
        self.signal_all = on
        kind = WatchAll if on else dict
        for db in self.dbs:
            db.watched = kind(db.watched)
