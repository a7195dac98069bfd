"""This instance's own effect records, kept for peers that reconnect (partial resync).

A bounded FIFO by bytes, like the replication backlog but indexed by effect sequence: a
link that comes back asks for everything after the peer's acknowledged sequence, and gets
it if the backlog still holds it, or None (then a full sync). Each record is kept as the
RESP bytes a link writes (encoded once, when the effect is made), so what the backlog
holds is what ``active-active-backlog-size`` counts.

Records every configured peer has acknowledged are released (:meth:`Backlog.release`):
no partial resync can ask for them. Released records that delete (XDEL, XTRIM, DEL) stay
aside within the same byte limit, because a full sync re-applies the deletions the other
side has not (server/activeactive/state.py). Pure data.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

# A record deletes when one of these op names is among its bulks (as state.py reads them).
_DELETION_BULKS = tuple(b"$%d\r\n%s\r\n" % (len(n), n) for n in (b"XDEL", b"XTRIM", b"DEL"))


def deletes(wire: bytes) -> bool:
    """Whether a record may hold a deletion (a cheap test; the decoder has the last word)."""
    return any(name in wire for name in _DELETION_BULKS)


def record_size(wire: bytes) -> int:
    """Bytes a record takes in the backlog (the figure STATUS and INFO show, and what
    ``active-active-backlog-size`` bounds)."""
    return len(wire)


class Backlog:
    """Records ``seq -> (wire, ts_ms)`` for consecutive sequences, oldest dropped first
    once their sizes pass ``limit`` (the newest record always stays), or once every peer
    has them (:meth:`release`). The wires and the times are kept in two deques side by
    side: a (wire, ts) tuple per record would cost more memory than many a record's own
    bytes. ``nbytes`` counts the records held and the released deletions kept aside."""

    __slots__ = ("limit", "nbytes", "first_seq", "_wires", "_ts", "_deletions")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.nbytes = 0
        self.first_seq = 1  # the sequence of _wires[0]
        self._wires: deque[bytes] = deque()
        self._ts: deque[int] = deque()  # each record's ts_ms, beside its wire
        # (seq, wire) of released records that delete, oldest first (full syncs read them).
        self._deletions: deque[tuple[int, bytes]] = deque()

    @property
    def last_seq(self) -> int:
        """The newest sequence held (first_seq - 1 when empty)."""
        return self.first_seq + len(self._wires) - 1

    def __len__(self) -> int:
        return len(self._wires)

    def append(self, seq: int, wire: bytes, ts_ms: int) -> None:
        """Add record ``seq``; it must follow the newest (or start an empty backlog)."""
        wires = self._wires
        if not wires:
            self.first_seq = seq
        elif seq != self.first_seq + len(wires):
            raise ValueError(f"backlog sequence gap: {seq} after {self.last_seq}")
        wires.append(wire)
        ts = self._ts
        if ts and ts[-1] == ts_ms:
            ts_ms = ts[-1]  # one int object for the records of one millisecond
        ts.append(ts_ms)
        self.nbytes += len(wire)
        if self.nbytes > self.limit:
            self._trim()

    def _trim(self) -> None:
        """Past the limit: the released deletions go first (only a full sync reads them),
        then the oldest records."""
        dels = self._deletions
        while self.nbytes > self.limit and dels:
            self.nbytes -= len(dels.popleft()[1])
        wires = self._wires
        ts = self._ts
        while self.nbytes > self.limit and len(wires) > 1:
            self.nbytes -= len(wires.popleft())
            ts.popleft()
            self.first_seq += 1

    def release(self, seq: int) -> int:
        """Drop the records up to ``seq`` (every peer has applied them: a partial resync
        never asks for them again); the ones that delete are kept aside. Returns how many
        records went."""
        wires = self._wires
        n = min(seq - self.first_seq + 1, len(wires))
        if n <= 0:
            return 0
        ts = self._ts
        dels = self._deletions
        first = self.first_seq
        freed = 0
        for i in range(n):
            wire = wires.popleft()
            ts.popleft()
            if deletes(wire):
                dels.append((first + i, wire))
            else:
                freed += len(wire)
        self.first_seq = first + n
        self.nbytes -= freed
        return n

    def resize(self, limit: int) -> None:
        self.limit = limit
        self._trim()

    def deletion_records(self) -> list[tuple[int, bytes]]:
        """``(seq, wire)`` of every record that may delete, released or held, oldest first."""
        held = [(seq, w) for seq, w in enumerate(self._wires, self.first_seq) if deletes(w)]
        return [*self._deletions, *held]

    def holds(self, seq: int) -> bool:
        return bool(self._wires) and self.first_seq <= seq <= self.last_seq

    def records_from(self, seq: int) -> list[tuple[int, bytes]] | None:
        """``(seq, wire)`` for every record from ``seq`` on; ``[]`` when ``seq`` is past the
        newest; None when records from ``seq`` were already dropped."""
        if seq > self.last_seq:
            return []
        if seq < self.first_seq:
            return None
        return list(enumerate(self._tail(seq - self.first_seq), seq))

    def _tail(self, start: int) -> list[bytes]:
        """The wires from index ``start`` on, walking the deque once from its nearer end:
        a link wants the few newest records, and islice from the head would step over
        every record held (up to the whole backlog) on each flush."""
        wires = self._wires
        n = len(wires) - start
        if n <= start:
            tail = list(islice(reversed(wires), n))
            tail.reverse()
            return tail
        return list(islice(wires, start, None))

    def ts_of(self, seq: int) -> int | None:
        """When record ``seq`` was made (ms), if held."""
        if not self.holds(seq):
            return None
        return self._ts[seq - self.first_seq]

    def bytes_after(self, seq: int) -> int:
        """Bytes of the records after ``seq`` (what a peer that acknowledged ``seq`` lacks)."""
        if seq >= self.last_seq:
            return 0
        start = max(seq + 1, self.first_seq) - self.first_seq
        return sum(map(len, self._tail(start)))
