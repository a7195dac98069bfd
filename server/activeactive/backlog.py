"""This instance's own effect records, kept for peers that reconnect (partial resync).

A bounded FIFO by bytes, like the replication backlog but indexed by effect sequence: a
link that comes back asks for everything after the peer's acknowledged sequence, and gets
it if the backlog still holds it, or None (then a full sync). Each record is kept as the
compact bytes a link writes (encoded once, when the effect is made; consecutive records
are back to back, so a run of them is one APPLY's argument as it lies), and what the
backlog holds is what ``active-active-backlog-size`` counts.

Records every configured peer has acknowledged are released (:meth:`Backlog.release`):
no partial resync can ask for them. Released records that delete (XDEL, XTRIM, DEL) stay
aside within the same byte limit, because a full sync re-applies the deletions the other
side has not (server/activeactive/state.py).

The records are copied into 256 KiB chunks of anonymous memory mapped for the backlog
alone (with their ends and times), not kept as a bytes object each: a record freed gives
nothing back to the system while other objects share its allocator arena, and a backlog
that filled while a peer lagged would keep the process that large for good. A chunk goes
back whole (unmapped) once its last record is released or dropped; the newest one, being
filled, is what a backlog whose peers keep up costs. Pure data.
"""

from __future__ import annotations

import mmap
from collections import deque

CHUNK = 1 << 18  # bytes of records per chunk (a larger record gets a chunk of its own)

# The ops a released record is kept aside for, because a full sync re-applies them
# (state.py): the one list of them, which the engine's seal also reads to tell append
# whether a record may delete.
DELETION_OPS = frozenset({b"XDEL", b"XTRIM", b"DEL"})
# A record deletes when one of those names is among its arguments: length-prefixed in a
# compact record, a bulk in one of the argv format.
_DELETION_BULKS = tuple(bytes((len(n),)) + n for n in sorted(DELETION_OPS)) + tuple(
    b"$%d\r\n%s\r\n" % (len(n), n) for n in sorted(DELETION_OPS))


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (as protocol/parser.py tells it): compiled, a record
# is copied into its chunk by backlog.pxd's ``_c_put`` (a memcpy), not through the mmap's
# slice assignment and a memoryview item set per word, about 2k instructions per effect made.
_COMPILED = type(_probe).__name__ != "function"


def deletes(wire: bytes) -> bool:
    """Whether a record may hold a deletion (a cheap test; the decoder has the last word)."""
    return any(name in wire for name in _DELETION_BULKS)


def record_size(wire: bytes) -> int:
    """Bytes a record takes in the backlog (the figure STATUS and INFO show, and what
    ``active-active-backlog-size`` bounds)."""
    return len(wire)


class _Chunk:
    """Consecutive records in one mapping: record ``i`` (sequence ``seq + i``) is
    ``buf[end(i-1):end(i)]`` (from 0 for the first), made at ``ts(i)``; those before
    ``head`` are gone. The records fill the mapping from its start, and their ends and
    times (two 64-bit words each) from its end: nothing of a record lives outside it."""

    __slots__ = ("buf", "size", "meta", "view", "top", "seq", "count", "used", "head", "dels")

    def __init__(self, seq: int, size: int) -> None:
        self.size = size = (size + 7) & ~7
        self.buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        # Compiled, both are typed views (backlog.pxd): a record's end and time are C
        # stores, and its bytes one memcpy at view's address (_c_put).
        self.meta = memoryview(self.buf).cast("q")
        self.view = memoryview(self.buf)
        self.top = len(self.meta) - 1  # record i's end is meta[top - 2i], its time the word below
        self.seq = seq
        self.count = 0
        self.used = 0
        self.head = 0
        # Records appended that may delete (append's ``may_delete``) since the chunk was
        # last emptied: while 0, a release keeps nothing of it aside and reads none of it.
        self.dels = 0

    def end(self, i: int) -> int:
        return self.meta[self.top - 2 * i]

    def ts(self, i: int) -> int:
        return self.meta[self.top - 2 * i - 1]

    def start(self, i: int) -> int:
        return self.meta[self.top - 2 * i + 2] if i else 0

    def wire(self, i: int) -> bytes:
        return self.buf[self.start(i):self.end(i)]

    def close(self) -> None:
        # Dropping the views releases the mapping's buffer (a typed view has no release()).
        self.meta = self.view = None
        self.buf.close()


def _split(c: _Chunk, i: int, limit: int, pieces: list[tuple[int, bytes]]) -> None:
    """Append chunk ``c``'s records from index ``i`` on to ``pieces``, cut at record ends
    into runs of at most ``limit`` bytes (a record larger than that goes alone)."""
    start = c.start(i)
    last = c.count - 1
    while i <= last:
        if c.used - start <= limit:  # the usual case: the rest is one piece
            pieces.append((c.seq + last, c.buf[start:c.used]))
            return
        lo, hi = i, last  # the last record whose end is within the limit (at least i)
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if c.end(mid) - start <= limit:
                lo = mid
            else:
                hi = mid - 1
        end = c.end(lo)
        pieces.append((c.seq + lo, c.buf[start:end]))
        start = end
        i = lo + 1


class Backlog:
    """Records ``seq -> (wire, ts_ms)`` for consecutive sequences, oldest dropped first
    once their sizes pass ``limit`` (the newest record always stays), or once every peer
    has them (:meth:`release`). ``nbytes`` counts the records held and the released
    deletions kept aside."""

    __slots__ = ("limit", "nbytes", "first_seq", "_count", "_chunks", "_deletions")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.nbytes = 0
        self.first_seq = 1  # the oldest sequence held
        self._count = 0
        self._chunks: deque[_Chunk] = deque()
        # (seq, wire) of released records that delete, oldest first (full syncs read them).
        self._deletions: deque[tuple[int, bytes]] = deque()

    @property
    def last_seq(self) -> int:
        """The newest sequence held (first_seq - 1 when empty)."""
        return self.first_seq + self._count - 1

    def __len__(self) -> int:
        return self._count

    def append(self, seq: int, wire: bytes, ts_ms: int, may_delete: bool = True) -> None:
        """Add record ``seq``; it must follow the newest (or start an empty backlog).
        ``may_delete`` False is the maker's word that the record holds no deletion (the
        engine knows its ops' names): a release then does not search its bytes for one."""
        if not self._count:
            self.first_seq = seq
        elif seq != self.first_seq + self._count:
            raise ValueError(f"backlog sequence gap: {seq} after {self.last_seq}")
        n = len(wire)
        chunks = self._chunks
        c = chunks[-1] if chunks else None
        count = c.count if c is not None else 0
        if not count and c is not None:
            c.seq = seq  # the kept empty chunk (_drop) starts where the records do
        if c is None or c.used + n + 16 * (count + 1) > c.size:
            need = n + 16
            c = _Chunk(seq, CHUNK if need <= CHUNK else -(-need // mmap.PAGESIZE) * mmap.PAGESIZE)
            chunks.append(c)
            count = 0
        # What _Chunk describes, inline: this runs once per effect made.
        used = c.used
        end = c.used = used + n
        at = c.top - 2 * count
        if _COMPILED:
            _c_put(c, used, wire, n, at, end, ts_ms)  # noqa: F821 (see _COMPILED)
        else:
            c.buf[used:end] = wire
            meta = c.meta
            meta[at] = end
            meta[at - 1] = ts_ms
        c.count = count + 1
        if may_delete:
            c.dels += 1
        self._count += 1
        self.nbytes += n
        if self.nbytes > self.limit:
            self._trim()

    def _drop(self, k: int, keep_deletions: bool) -> None:
        """Drop the ``k`` oldest records (a chunk emptied is unmapped, unless it is the
        only one: that is kept, empty, for the next records); with
        ``keep_deletions`` those that delete go aside."""
        chunks = self._chunks
        self.first_seq += k
        self._count -= k
        while k:
            c = chunks[0]
            live = c.count - c.head
            take = min(k, live)
            lo = c.start(c.head)
            hi = c.end(c.head + take - 1)
            freed = hi - lo
            # A chunk of records that delete nothing (their makers said so: an XADD's,
            # a SET's) is not searched: the search of every released run cost more than
            # the rest of a release (whole-writer callgrind, XADD with two peers: about
            # 0.6k instructions an XADD).
            if keep_deletions and c.dels and deletes(c.buf[lo:hi]):
                for i in range(c.head, c.head + take):
                    wire = c.wire(i)
                    if deletes(wire):
                        self._deletions.append((c.seq + i, wire))
                        freed -= len(wire)
            self.nbytes -= freed
            k -= take
            if take == live:
                if len(chunks) == 1 and c.size == CHUNK:
                    # The newest chunk, emptied (peers that keep up empty it every
                    # loop iteration): kept for the records to come, not unmapped and
                    # mapped again each time.
                    c.seq += c.count
                    c.count = c.used = c.head = c.dels = 0
                else:
                    chunks.popleft()
                    c.close()
            else:
                c.head += take

    def _trim(self) -> None:
        """Past the limit: the released deletions go first (only a full sync reads them),
        then the oldest records."""
        dels = self._deletions
        while self.nbytes > self.limit and dels:
            self.nbytes -= len(dels.popleft()[1])
        while self.nbytes > self.limit and self._count > 1:
            self._drop(1, False)

    def release(self, seq: int) -> int:
        """Drop the records up to ``seq`` (every peer has applied them: a partial resync
        never asks for them again); the ones that delete are kept aside. Returns how many
        records went."""
        n = min(seq - self.first_seq + 1, self._count)
        if n <= 0:
            return 0
        self._drop(n, True)
        return n

    def resize(self, limit: int) -> None:
        self.limit = limit
        self._trim()

    def _at(self, seq: int) -> tuple[_Chunk, int]:
        """The chunk holding ``seq`` (held) and its index there; the newest chunks first."""
        for c in reversed(self._chunks):
            if seq >= c.seq:
                return c, seq - c.seq
        raise KeyError(seq)

    def released_deletions(self) -> list[tuple[int, bytes]]:
        """``(seq, wire)`` of the released records that delete, kept aside, oldest first
        (what a file keeps of them: state.py's ``aa-backlog``)."""
        return list(self._deletions)

    def keep_aside(self, seq: int, wire: bytes) -> None:
        """Put back a released deletion record read from a file (older than every record
        held, and than those already put back), within the byte limit like the others."""
        dels = self._deletions
        if (dels and seq <= dels[-1][0]) or (self._count and seq >= self.first_seq):
            raise ValueError(f"deletion record {seq} out of order")
        dels.append((seq, wire))
        self.nbytes += len(wire)
        if self.nbytes > self.limit:
            self._trim()

    def deletion_records(self) -> list[tuple[int, bytes]]:
        """``(seq, wire)`` of every record that may delete, released or held, oldest first."""
        held = [(seq, w) for seq, w in self.records_from(self.first_seq) or () if deletes(w)]
        return [*self._deletions, *held]

    def holds(self, seq: int) -> bool:
        return bool(self._count) and self.first_seq <= seq <= self.last_seq

    def records_from(self, seq: int) -> list[tuple[int, bytes]] | None:
        """``(seq, wire)`` for every record from ``seq`` on; ``[]`` when ``seq`` is past the
        newest; None when records from ``seq`` were already dropped."""
        if seq > self.last_seq:
            return []
        if seq < self.first_seq:
            return None
        out: list[tuple[int, bytes]] = []
        first, i = self._at(seq)
        chunks = list(self._chunks)
        for c in chunks[chunks.index(first):]:
            buf, base = c.buf, c.seq
            start = c.start(i)
            for j in range(i, c.count):
                end = c.end(j)
                out.append((base + j, buf[start:end]))
                start = end
            i = 0
        return out

    def wires_from(self, seq: int, limit: int = CHUNK) -> list[tuple[int, bytes]] | None:
        """What a link writes for the records from ``seq`` on: ``(the last sequence in it,
        its bytes)`` per piece of consecutive records, each at most ``limit`` bytes (or one
        larger record) and within one chunk; ``[]`` when ``seq`` is past the newest, None
        when it was dropped."""
        if seq > self.last_seq:
            return []
        if seq < self.first_seq:
            return None
        c, i = self._at(seq)
        pieces: list[tuple[int, bytes]] = []
        found = False
        for c2 in self._chunks:
            if c2 is c:
                found = True
                _split(c, i, limit, pieces)
            elif found:
                _split(c2, 0, limit, pieces)
        return pieces

    def ts_of(self, seq: int) -> int | None:
        """When record ``seq`` was made (ms), if held."""
        if not self.holds(seq):
            return None
        c, i = self._at(seq)
        return c.ts(i)

    def bytes_after(self, seq: int) -> int:
        """Bytes of the records after ``seq`` (what a peer that acknowledged ``seq`` lacks)."""
        if seq >= self.last_seq or not self._count:
            return 0
        c, i = self._at(max(seq + 1, self.first_seq))
        total = 0
        found = False
        for c2 in self._chunks:
            if c2 is c:
                found = True
                total += c.used - c.start(i)
            elif found:
                total += c2.used
        return total
