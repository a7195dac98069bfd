"""This instance's own effect records, kept for peers that reconnect (partial resync).

A bounded FIFO by bytes, like the replication backlog but indexed by effect sequence: a
link that comes back asks for everything after the peer's acknowledged sequence, and gets
it if the backlog still holds it, or None (then a full sync). Each record is kept as the
RESP bytes a link writes (encoded once, when the effect is made), so what the backlog
holds is what ``active-active-backlog-size`` counts. Pure data.
"""

from __future__ import annotations

from collections import deque
from itertools import islice


def record_size(wire: bytes) -> int:
    """Bytes a record takes in the backlog (the figure STATUS and INFO show, and what
    ``active-active-backlog-size`` bounds)."""
    return len(wire)


class Backlog:
    """Records ``seq -> (wire, ts_ms)`` for consecutive sequences, oldest dropped first
    once their sizes pass ``limit`` (the newest record always stays). The wires and the
    times are kept in two deques side by side: a (wire, ts) tuple per record would cost
    more memory than many a record's own bytes."""

    __slots__ = ("limit", "nbytes", "first_seq", "_wires", "_ts")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.nbytes = 0
        self.first_seq = 1  # the sequence of _wires[0]
        self._wires: deque[bytes] = deque()
        self._ts: deque[int] = deque()  # each record's ts_ms, beside its wire

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
        wires = self._wires
        ts = self._ts
        while self.nbytes > self.limit and len(wires) > 1:
            self.nbytes -= len(wires.popleft())
            ts.popleft()
            self.first_seq += 1

    def resize(self, limit: int) -> None:
        self.limit = limit
        self._trim()

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
