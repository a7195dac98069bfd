"""Active-Active list order: every element has a *position* that all instances sort the same
way (docs/active-active.md, "Lists").

A position is a tuple of ints compared lexicographically: digits chosen between the
neighbours the element was inserted between, then the dot of the effect that inserted it
(origin, sequence, index within the effect), so no two elements share one and concurrent
inserts at the same place are ordered by their dots. Positions never change, so an element
removed is simply gone: a removal names the positions it saw, and an insert made
concurrently elsewhere (another position) survives it.

:class:`ListState` keeps the positions in order beside the list value's elements (the same
objects: the keyspace's ``ListValue`` holds them in the same order), plus the stamps of
LSET's last-write-wins assignments.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from typing import Any

Position = tuple[int, ...]
Dot = tuple[int, int, int]  # origin, seq, index within the effect


def between(a: Position | None, b: Position | None, dot: Dot) -> Position:
    """A position after ``a`` and before ``b`` (None: the list's end), ending in ``dot``.

    The digits part always differs from ``b`` at some index with a smaller value (or is
    below ``b``'s first digit), so appending the dot keeps it below ``b``; and it is above
    ``a``, which it extends or exceeds at its first differing index."""
    if a is None and b is None:
        digits: Position = (0,)
    elif a is None:
        digits = (b[0] - 1,)
    elif b is None:
        digits = (a[0] + 1,)
    else:
        i = 0
        while i < len(a) and a[i] == b[i]:
            i += 1
        if i == len(a):  # a is a prefix of b
            digits = a + (b[i] - 1,)
        elif b[i] - a[i] > 1:
            digits = a[:i] + (a[i] + 1,)
        elif i + 1 < len(a):
            digits = a[: i + 1] + (a[i + 1] + 1,)
        else:
            digits = a + (0,)
    return digits + dot


def dot_of(pos: Position) -> tuple[int, int]:
    """The (origin, seq) of the effect that inserted the element at ``pos``."""
    return pos[-3], pos[-2]


def encode_position(pos: Position) -> bytes:
    return b",".join(b"%d" % n for n in pos)


def decode_position(raw: bytes) -> Position:
    return tuple(int(n) for n in raw.split(b","))


class ListState:
    """One list's positions, in order, aligned with its elements; LSET stamps."""

    __slots__ = ("positions", "values", "stamps")

    def __init__(self) -> None:
        # Deques, as the list value is: a push at either end (the common write) costs the
        # same at any length, where a Python list's insert at 0 moves every element.
        self.positions: deque[Position] = deque()
        self.values: deque[bytes] = deque()  # the elements, the same objects the ListValue holds
        self.stamps: dict[Position, tuple[int, int]] = {}  # LSET's (ts, origin), when set

    def __len__(self) -> int:
        return len(self.positions)

    def index(self, pos: Position) -> int | None:
        i = bisect_left(self.positions, pos)
        if i < len(self.positions) and self.positions[i] == pos:
            return i
        return None

    def insert(self, pos: Position, value: bytes) -> int | None:
        """Insert an element; returns its index (None: it is there already)."""
        positions = self.positions
        if not positions or pos > positions[-1]:
            positions.append(pos)
            self.values.append(value)
            return len(positions) - 1
        if pos < positions[0]:
            positions.appendleft(pos)
            self.values.appendleft(value)
            return 0
        i = bisect_left(positions, pos)
        if positions[i] == pos:
            return None
        positions.insert(i, pos)
        self.values.insert(i, value)
        return i

    def remove(self, pos: Position) -> int | None:
        """Remove an element; returns the index it had (None: not here)."""
        i = self.index(pos)
        if i is not None:
            del self.positions[i]
            del self.values[i]
            self.stamps.pop(pos, None)
        return i

    def assign(self, pos: Position, ts: int, origin: int, value: bytes) -> int | None:
        """LSET: the value with the later (ts, origin) stays. Returns the index when the
        element's value changed."""
        i = self.index(pos)
        if i is None or self.stamps.get(pos, (0, 0)) >= (ts, origin):
            return None
        self.stamps[pos] = (ts, origin)
        self.values[i] = value
        return i

    def seen_by(self, seen: dict[int, int]) -> list[int]:
        """Indexes of the elements whose inserts ``seen`` covers (what a DEL takes)."""
        return [i for i, p in enumerate(self.positions) if seen.get(p[-3], 0) >= p[-2]]

    def merge(self, other: ListState, mine: dict[int, int], theirs: dict[int, int]) -> None:
        """Full sync: an element one side holds and the other lacks though its clock covers
        the insert was removed there; LSET stamps take the later."""
        keep: dict[Position, bytes] = {}
        for p, v in zip(self.positions, self.values, strict=True):
            o, s = dot_of(p)
            if other.index(p) is not None or theirs.get(o, 0) < s:
                keep[p] = v
        for p, v in zip(other.positions, other.values, strict=True):
            o, s = dot_of(p)
            if p not in keep and mine.get(o, 0) < s:
                keep[p] = v
        for p, stamp in other.stamps.items():
            if p in keep and stamp > self.stamps.get(p, (0, 0)):
                self.stamps[p] = stamp
                keep[p] = other.values[other.index(p)]
        order = sorted(keep)
        self.positions = deque(order)
        self.values = deque(keep[p] for p in order)
        self.stamps = {p: s for p, s in self.stamps.items() if p in keep}

    def to_state(self) -> list:
        return [[list(p), v.hex(), list(self.stamps[p]) if p in self.stamps else None]
                for p, v in zip(self.positions, self.values, strict=True)]

    @classmethod
    def from_state(cls, doc: Any) -> ListState:
        st = cls()
        try:
            for p, v, stamp in doc:
                pos = tuple(int(n) for n in p)
                st.positions.append(pos)
                st.values.append(bytes.fromhex(v))
                if stamp is not None:
                    st.stamps[pos] = (int(stamp[0]), int(stamp[1]))
        except (TypeError, ValueError) as exc:
            raise ValueError("malformed Active-Active list state") from exc
        if list(st.positions) != sorted(st.positions):
            raise ValueError("malformed Active-Active list state")
        return st

    def __repr__(self) -> str:
        return f"ListState({list(zip(self.positions, self.values, strict=True))!r}, {self.stamps!r})"


__all__ = ["ListState", "Position", "between", "decode_position", "dot_of", "encode_position"]
