"""Consumer groups (streamCG): last delivered ID, entries_read, the PEL and consumers.

The stream's group operations (reading, claiming, lag) are methods of
:class:`~.stream.Stream`, because they need its entries; this module holds the state they
work on.
"""

from __future__ import annotations

from typing import NamedTuple

from ..rax import Rax
from .ids import format_sid

SCG_INVALID_ENTRIES_READ = -1

# Consumer-group reference policies of deletions and trims (Redis 8.2).
REF_KEEP = 0  # KEEPREF: PELs keep the IDs (Redis 7's only behaviour)
REF_DEL = 1  # DELREF: PEL references go with the entry
REF_ACKED = 2  # ACKED: only entries no group references are removed


class NACK:
    """A pending entry: last delivery time, delivery count, owner (streamNACK).

    The same object sits in the group PEL and in its consumer's PEL.
    """

    __slots__ = ("delivery_time", "delivery_count", "consumer")

    def __init__(
        self, delivery_time: int, delivery_count: int = 1, consumer: Consumer | None = None
    ) -> None:
        self.delivery_time = delivery_time
        self.delivery_count = delivery_count
        self.consumer = consumer

    def __repr__(self) -> str:
        name = self.consumer.name if self.consumer is not None else None
        return f"NACK(time={self.delivery_time}, count={self.delivery_count}, consumer={name!r})"


class Consumer:
    """A consumer: name, seen/active times (ms) and its own PEL (int ID -> NACK).

    ``seen_time`` is the last time the consumer attempted an interaction; ``active_time``
    the last time it successfully read or claimed (Redis 7.2; -1 = never).  Redis 7.0 only
    has seen_time; its RDB loader sets active_time = seen_time.
    """

    __slots__ = ("name", "seen_time", "active_time", "pel")

    def __init__(self, name: bytes, seen_time: int, active_time: int = -1) -> None:
        self.name = name
        self.seen_time = seen_time
        self.active_time = active_time
        self.pel: Rax = Rax()

    def __repr__(self) -> str:
        return f"Consumer({self.name!r}, pending={len(self.pel)})"


class ConsumerGroup:
    """A consumer group (streamCG): last delivered ID, entries_read, PEL and consumers.

    ``entries_read`` is -1 (SCG_INVALID_ENTRIES_READ) when unknown.  The PEL is a Rax so
    XPENDING ranges and XAUTOCLAIM cursors are ordered seeks.
    """

    __slots__ = ("name", "last_id", "entries_read", "pel", "consumers", "nacked")

    def __init__(
        self, name: bytes, last_id: int = 0, entries_read: int = SCG_INVALID_ENTRIES_READ
    ) -> None:
        self.name = name
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel: Rax = Rax()
        self.consumers: dict[bytes, Consumer] = {}
        # XNACKed IDs in release order (the PEL's "NACKed portion"); None while empty.
        self.nacked: dict[int, None] | None = None

    def release(self, sid: int, count: int) -> bool:
        """XNACK one pending ID: no owner, delivery time 0, delivery count ``count``, and
        to the back of the released FIFO. False if ``sid`` is not pending."""
        nack = self.pel.get(sid)
        if nack is None:
            return False
        if nack.consumer is not None:
            nack.consumer.pel.discard(sid)
            nack.consumer = None
        nack.delivery_time = 0
        nack.delivery_count = count
        nacked = self.nacked
        if nacked is None:
            nacked = self.nacked = {}
        else:
            nacked.pop(sid, None)
        nacked[sid] = None
        return True

    def unrelease(self, sid: int) -> None:
        """``sid`` was delivered, claimed or acknowledged: it leaves the released FIFO."""
        nacked = self.nacked
        if nacked and nacked.pop(sid, 1) is None and not nacked:
            self.nacked = None

    def is_released(self, sid: int) -> bool:
        nacked = self.nacked
        return nacked is not None and sid in nacked

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.name!r}, last_id={format_sid(self.last_id).decode()}, "
            f"entries_read={self.entries_read}, pending={len(self.pel)})"
        )

    # ------------------------------------------------------------------ consumers

    def lookup_consumer(self, name: bytes) -> Consumer | None:
        """The named consumer or None (no seen_time refresh: callers decide)."""
        return self.consumers.get(name)

    def create_consumer(self, name: bytes, now_ms: int) -> Consumer | None:
        """Create a consumer; None if it already exists (streamCreateConsumer)."""
        if name in self.consumers:
            return None
        c = Consumer(name, now_ms, -1)
        self.consumers[name] = c
        return c

    def get_or_create_consumer(self, name: bytes, now_ms: int) -> tuple[Consumer, bool]:
        """``(consumer, created)``; an existing consumer's seen_time is refreshed to now,
        as streamLookupConsumer(SLC_DEFAULT) does."""
        c = self.consumers.get(name)
        if c is not None:
            c.seen_time = now_ms
            return c, False
        c = Consumer(name, now_ms, -1)
        self.consumers[name] = c
        return c, True

    def delete_consumer(self, name: bytes) -> int | None:
        """Delete a consumer and its pending entries from the group PEL; return how many
        were pending, or None if there is no such consumer (streamDelConsumer)."""
        c = self.consumers.pop(name, None)
        if c is None:
            return None
        pel = self.pel
        for sid in c.pel.keys():
            pel.discard(sid)
        n = len(c.pel)
        c.pel.clear()
        return n

    def consumers_sorted(self) -> list[Consumer]:
        """Consumers in byte-wise name order (rax order, as XINFO/RDB list them)."""
        return [self.consumers[k] for k in sorted(self.consumers)]

    # ------------------------------------------------------------------ PEL

    def deliver(self, sid: int, consumer: Consumer, now_ms: int) -> NACK:
        """Record that ``sid`` was delivered to ``consumer`` (XREADGROUP without NOACK).

        A new NACK gets count 1; an existing one (e.g. after XGROUP SETID) moves to this
        consumer with its time reset to now and its count reset to 1, as Redis does.
        """
        nack = self.pel.get(sid)
        if nack is None:
            nack = NACK(now_ms, 1, consumer)
            self.pel.insert(sid, nack)
        else:
            old = nack.consumer
            if old is not None:
                old.pel.discard(sid)
            nack.consumer = consumer
            nack.delivery_time = now_ms
            nack.delivery_count = 1
            if self.nacked:
                self.unrelease(sid)
        consumer.pel.insert(sid, nack)
        consumer.active_time = now_ms
        return nack

    def deliver_new(self, sids: list[int], consumer: Consumer, now_ms: int) -> None:
        """:meth:`deliver` for ascending ``sids`` (an XREADGROUP ``>`` batch).

        IDs beyond every pending one -- the usual case, as ``>`` reads past the group's
        last_id -- get their NACKs appended to both PELs in bulk.
        """
        if not sids:
            return
        last = self.pel.last_key()
        if last is not None and sids[0] <= last:
            for sid in sids:
                self.deliver(sid, consumer, now_ms)
            return
        nacks = []
        for _ in sids:
            # Made by the type's allocator, its fields set here: no __init__ call (in the
            # compiled build a C allocation and three slot stores, not a Python call).
            nack = NACK.__new__(NACK)
            nack.delivery_time = now_ms
            nack.delivery_count = 1
            nack.consumer = consumer
            nacks.append(nack)
        self.pel.extend(sids, nacks)
        # The consumer's PEL is a subset of the group's: these IDs are beyond it too.
        consumer.pel.extend(sids, nacks)
        consumer.active_time = now_ms

    def ack_many(self, sids: list[int]) -> int:
        """:meth:`ack` for each of ``sids`` (XACK); how many were pending."""
        nacks = self.pel.pop_many(sids)
        owner = None
        mine: list[int] = []
        acked = 0
        for i, nack in enumerate(nacks):
            if nack is None:
                continue
            acked += 1
            c = nack.consumer
            if c is None:
                continue
            # Usually one consumer acknowledges its own deliveries: their removal from
            # its PEL goes in one batch; any other owner's one by one.
            if owner is None:
                owner = c
            if c is owner:
                mine.append(sids[i])
            else:
                c.pel.discard(sids[i])
        if owner is not None:
            owner.pel.pop_many(mine)
        if acked and self.nacked:
            for sid in sids:
                self.unrelease(sid)
        return acked

    def ack(self, sid: int) -> bool:
        """Remove ``sid`` from the group and owner PELs; True if it was pending (XACK)."""
        nack = self.pel.pop(sid, None)
        if nack is None:
            return False
        if nack.consumer is not None:
            nack.consumer.pel.discard(sid)
        if self.nacked:
            self.unrelease(sid)
        return True

    # RDB loading comes in Redis's order: the group PEL first (owners unknown), then each
    # consumer with the IDs it owns.

    def load_nack(self, sid: int, delivery_time: int, delivery_count: int) -> bool:
        """Add an owner-less NACK from an RDB group PEL; False if ``sid`` is a duplicate."""
        if sid in self.pel:
            return False
        self.pel.insert(sid, NACK(delivery_time, delivery_count, None))
        return True

    def load_consumer(self, name: bytes, seen_time: int, active_time: int) -> Consumer | None:
        """Add a consumer from an RDB (type 19 has no active_time: pass seen_time, as Redis
        does); None if the name is a duplicate."""
        if name in self.consumers:
            return None
        c = Consumer(name, seen_time, active_time)
        self.consumers[name] = c
        return c

    def load_owner(self, consumer: Consumer, sid: int) -> bool:
        """Give the group PEL's NACK ``sid`` to ``consumer`` (an RDB consumer PEL entry);
        False if the group PEL lacks it or the consumer already has it."""
        nack = self.pel.get(sid)
        if nack is None or sid in consumer.pel:
            return False
        nack.consumer = consumer
        consumer.pel.insert(sid, nack)
        return True

    def unowned_nacks(self) -> list[int]:
        """IDs of NACKs without a consumer (deep RDB sanitization rejects any)."""
        return [sid for sid, nack in self.pel.items() if nack.consumer is None]

    def pending_summary(self) -> tuple[int, int | None, int | None, list[tuple[bytes, int]]]:
        """``(count, smallest_id, largest_id, [(consumer, pending), ...])`` for XPENDING
        without a range; consumers with no pending entries are left out."""
        pel = self.pel
        per = [(c.name, len(c.pel)) for c in self.consumers_sorted() if len(c.pel)]
        return len(pel), pel.first_key(), pel.last_key(), per

    def pending_range(
        self,
        start: int,
        end: int,
        count: int,
        consumer: Consumer | None = None,
        min_idle: int = 0,
        now_ms: int = 0,
    ) -> list[tuple[int, NACK]]:
        """Up to ``count`` pending ``(id, NACK)`` with start <= id <= end, optionally only
        one consumer's and only those idle for at least ``min_idle`` ms (XPENDING)."""
        out: list[tuple[int, NACK]] = []
        if count <= 0 or start > end:
            return out
        pel = consumer.pel if consumer is not None else self.pel
        for sid, nack in pel.iterate(">=", start):
            if sid > end:
                break
            if min_idle and now_ms - nack.delivery_time < min_idle:
                continue
            out.append((sid, nack))
            if len(out) >= count:
                break
        return out

    def copy(self) -> ConsumerGroup:
        """Deep copy with NACKs re-linked to the copied consumers."""
        g = ConsumerGroup(self.name, self.last_id, self.entries_read)
        cmap: dict[int, Consumer] = {}
        for name, c in self.consumers.items():
            nc = Consumer(name, c.seen_time, c.active_time)
            g.consumers[name] = nc
            cmap[id(c)] = nc
        for sid, nack in self.pel.items():
            owner = cmap.get(id(nack.consumer)) if nack.consumer is not None else None
            nn = NACK(nack.delivery_time, nack.delivery_count, owner)
            g.pel.insert(sid, nn)
            if owner is not None:
                owner.pel.insert(sid, nn)
        if self.nacked:
            g.nacked = dict(self.nacked)
        return g


class ClaimResult(NamedTuple):
    """What XCLAIM did, in argument order, so the command layer can reply and propagate.

    ``events`` holds ``(id, nack, claimed)``: claimed=False means the entry no longer
    exists and its NACK was dropped (Redis still propagates an XCLAIM for it).
    """

    claimed: list[int]
    events: list[tuple[int, NACK, bool]]
    consumer: Consumer | None
    consumer_created: bool
    propagate_last_id: bool


class AutoClaimResult(NamedTuple):
    """What XAUTOCLAIM did: claimed IDs, the next cursor (0 = scan complete), IDs whose
    entries were gone (their NACKs dropped), and the per-ID events as in ClaimResult."""

    claimed: list[int]
    next_id: int
    deleted: list[int]
    events: list[tuple[int, NACK, bool]]
    consumer: Consumer | None
    consumer_created: bool
