"""Active-Active element state: what one string, hash field, set member or sorted-set
member holds across regions (docs/active-active.md, "Strings, hashes, sets and sorted sets").

An element is a set of *dots*: the marks of the effects (origin region, sequence) that
wrote it. Two kinds of dot:

- **Assigns** (SET, HSET, SADD, ZADD): ``(ts, origin, seq, value)``. An assign first removes
  every dot its effect had seen, so concurrent assigns stay side by side and the one with
  the latest timestamp, then the higher region, is the element's value (last write wins).
- **Increments** (INCRBY, HINCRBY, ZINCRBY and their float forms): folded per origin, since
  each origin's effects reach every instance in that origin's order. Per origin the cell
  keeps the running total, the last increment's sequence, and what removals took: the total
  at the latest sequence a removal had seen. An increment is never removed by what did not
  see it, so concurrent increments accumulate, on top of whichever assign wins.

A removal (HDEL, SREM, ZREM, DEL, and an assign's own first step) takes the assigns its
effect had seen (a *seen* clock: the effect's vector clock with its own dot) and the
increments it reports having seen (``observed()`` at its origin, carried in its op). An
element exists while it has an assign or an increment no removal saw.

Most elements hold one assign and no increments: such a cell is a :class:`Reg`, a 2-tuple
(dot, value) whose dot ``(ts, origin, seq)`` is the one tuple every element of its effect
shares, read like a Cell. A write makes it a Cell (:func:`inflate`) and :func:`settle`
makes that a Reg again when it can: a Cell object and its list of assigns per element were
most of what Active-Active added to a small hash, set or sorted set.

Totals are exact: ints, or Fractions once a float increment arrived, summed per origin in
that origin's order and across origins in region order, so every instance computes the
same number. Rendering numbers as Redis text is the server's business (it knows Redis's
long double formatting); this module knows no commands.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

Number = int | Fraction
# An increment observation, carried by removals: (origin, last seq seen, total seen).
Observed = tuple[int, int, Number]

# Indexes into a per-origin counter: [total, last_seq, last_ts, removed_total, removed_seq].
_TOTAL, _SEQ, _TS, _RTOTAL, _RSEQ = range(5)


# A new Cell's ``assigns`` until its first assign: one shared empty list that nothing
# changes (assign() puts a list of the Cell's own in its place), so that a Cell of
# increments alone (every counter: INCR, HINCRBY, ZINCRBY) holds no list of its own. One
# container fewer per counter for the cyclic GC to walk, and 56 bytes.
_NO_ASSIGNS: list = []


class Cell:
    """One element's merge state (see the module docstring)."""

    __slots__ = ("assigns", "counters")

    def __init__(self) -> None:
        self.assigns: list[tuple[int, int, int, Any]] = _NO_ASSIGNS  # (ts, origin, seq, value)
        self.counters: dict[int, list] | None = None  # origin -> [total, seq, ts, rtotal, rseq]

    # -- writes ----------------------------------------------------------------------

    def remove(self, seen: dict[int, int], observed: list[Observed] = ()) -> None:
        """Take what a removal had seen: assigns within ``seen``, increments up to the
        observations it carries."""
        if self.assigns:
            self.assigns = [a for a in self.assigns if seen.get(a[1], 0) < a[2]]
        if observed and self.counters:
            counters = self.counters
            for origin, seq, total in observed:
                c = counters.get(origin)
                if c is not None and seq > c[_RSEQ]:
                    c[_RSEQ] = seq
                    c[_RTOTAL] = total

    def assign(self, seen: dict[int, int], observed: list[Observed], ts: int, origin: int,
               seq: int, value: Any) -> None:
        """An assign: remove what it had seen, then add its own dot."""
        self.remove(seen, observed)
        if self.assigns is _NO_ASSIGNS:
            self.assigns = [(ts, origin, seq, value)]
        else:
            self.assigns.append((ts, origin, seq, value))

    def incr(self, delta: Number, ts: int, origin: int, seq: int, base: Number | None = None) -> Number:
        """One origin's next increment (they arrive in that origin's order). ``base`` is
        the origin's total before it, as the origin's op carries it (None at the origin
        itself). Returns that base.

        Totals are the origin's: removals elsewhere report them, so every instance must
        count the same. An instance whose cell went (nothing in it live) and comes back
        with a later increment starts from the base, all before it removed; and when the
        origin's own cell went (so everything it had was removed everywhere), its totals
        start again from 0 and so do everyone's. Counting from where each instance's cell
        came back instead made totals differ, and a removal then took too much or too
        little elsewhere."""
        counters = self.counters
        if counters is None:
            counters = self.counters = {}
        c = counters.get(origin)
        if c is not None and (base is None or c[_TOTAL] == base):
            before = c[_TOTAL]
            c[_TOTAL] = before + delta
            c[_SEQ] = seq
            c[_TS] = ts
            return before
        if base is None:
            base = 0
        # Everything of the origin's before this increment was removed here.
        counters[origin] = [base + delta, seq, ts, base, seq - 1]
        return base

    # -- reads -----------------------------------------------------------------------

    def live(self) -> bool:
        if self.assigns:
            return True
        if self.counters:
            for c in self.counters.values():
                if c[_SEQ] > c[_RSEQ]:
                    return True
        return False

    def value(self) -> Any:
        """The winning assign's value (latest timestamp, then higher region), or None."""
        assigns = self.assigns
        if not assigns:
            return None
        if len(assigns) == 1:
            return assigns[0][3]
        return max(assigns, key=_stamp)[3]

    def counter(self) -> Number | None:
        """The increments no removal took, summed in region order; None when every
        increment was removed (or there never was one: a plain register). An origin whose
        increments were all removed adds nothing, as where the cell went meanwhile and came
        back without them: the value then renders as the assign's own text ("007" stays
        "007", not 7 plus nothing)."""
        counters = self.counters
        if not counters:
            return None
        if len(counters) == 1:  # one origin's increments (most counters): no order to sort
            for c in counters.values():
                return (c[_TOTAL] - c[_RTOTAL]) if c[_SEQ] > c[_RSEQ] else None
        total: Number | None = None
        for origin in sorted(self.counters):
            c = self.counters[origin]
            if c[_SEQ] > c[_RSEQ]:
                total = (c[_TOTAL] - c[_RTOTAL]) if total is None else total + (c[_TOTAL] - c[_RTOTAL])
        return total

    def removals(self) -> dict[int, tuple[int, Number]]:
        """What removals took of each origin's increments: origin -> (the latest sequence
        a removal had seen, the origin's total there). Kept aside when the cell goes
        (keyed.py ``Keyed.removed``): a full sync needs it (:meth:`take`)."""
        if not self.counters:
            return {}
        return {o: (c[_RSEQ], c[_RTOTAL]) for o, c in self.counters.items() if c[_RSEQ] > 0}

    def take(self, marks: dict[int, tuple[int, Number]]) -> None:
        """Apply removal marks kept aside (see :meth:`removals`) in a full sync: per
        origin, a later removal than this cell knows of takes what it saw. A cell that
        went on one side keeps no counters, so without them a full sync brought back the
        increments its removal took while the other side had applied more."""
        counters = self.counters
        if not counters:
            return
        for origin, (seq, total) in marks.items():
            c = counters.get(origin)
            if c is not None and seq > c[_RSEQ]:
                c[_RSEQ] = seq
                c[_RTOTAL] = total

    def observed(self) -> list[Observed]:
        """The increments this instance has applied, as a removal made here reports them."""
        if not self.counters:
            return []
        return [(o, c[_SEQ], c[_TOTAL]) for o, c in sorted(self.counters.items()) if c[_SEQ] > c[_RSEQ]]

    # -- full sync and persistence -----------------------------------------------------

    def merge(self, other: Cell, mine: dict[int, int], theirs: dict[int, int]) -> None:
        """Merge another instance's cell for the same element (a full sync). ``mine`` and
        ``theirs`` are the two instances' applied clocks: an assign one side holds and the
        other lacks although its clock covers it was removed there, so it goes.

        A side whose cell went keeps no counters: what its removal took comes from the
        marks it kept aside (:meth:`take`, after this)."""
        keep = [a for a in self.assigns if a in other.assigns or theirs.get(a[1], 0) < a[2]]
        for a in other.assigns:
            if a not in keep and mine.get(a[1], 0) < a[2]:
                keep.append(a)
        keep.sort(key=_dot)
        self.assigns = keep
        # Increments: per origin, the later total and the later removal. An origin's
        # increments one side lacks although it applied them all were removed there (the
        # cell went once nothing in it was live).
        mine_c = self.counters or {}
        for origin, c in mine_c.items():
            if origin not in (other.counters or {}) and theirs.get(origin, 0) >= c[_SEQ]:
                c[_RTOTAL], c[_RSEQ] = c[_TOTAL], c[_SEQ]
        for origin, theirs_c in (other.counters or {}).items():
            c = mine_c.get(origin)
            if c is None:
                if mine.get(origin, 0) < theirs_c[_SEQ]:
                    if self.counters is None:
                        self.counters = mine_c = {}
                    mine_c[origin] = list(theirs_c)
                continue
            newer = theirs_c[_SEQ] > c[_SEQ]
            if newer:
                c[_TOTAL], c[_SEQ], c[_TS] = theirs_c[_TOTAL], theirs_c[_SEQ], theirs_c[_TS]
            # At an equal removal sequence the newer side's removed total counts: the
            # origin's totals may have started again since (Cell.incr).
            if theirs_c[_RSEQ] > c[_RSEQ] or (newer and theirs_c[_RSEQ] == c[_RSEQ]):
                c[_RTOTAL], c[_RSEQ] = theirs_c[_RTOTAL], theirs_c[_RSEQ]

    def to_state(self, value_out: Any = None) -> list:
        """A JSON-ready form; values pass through ``value_out`` (bytes need encoding)."""
        out = value_out or (lambda v: v)
        counters = None
        if self.counters:
            counters = [[o, _num_out(c[_TOTAL]), c[_SEQ], c[_TS], _num_out(c[_RTOTAL]), c[_RSEQ]]
                        for o, c in sorted(self.counters.items())]
        return [[[ts, o, s, out(v)] for ts, o, s, v in self.assigns], counters]

    @classmethod
    def from_state(cls, state: list, value_in: Any = None) -> Cell:
        """The inverse of :meth:`to_state`; ValueError when malformed."""
        inp = value_in or (lambda v: v)
        try:
            assigns, counters = state
            cell = cls()
            cell.assigns = [(int(ts), int(o), int(s), inp(v)) for ts, o, s, v in assigns]
            if counters:
                cell.counters = {
                    int(o): [num_in(t), int(s), int(ts), num_in(rt), int(rs)]
                    for o, t, s, ts, rt, rs in counters
                }
        except (TypeError, ValueError) as exc:
            raise ValueError("malformed Active-Active cell") from exc
        return cell

    def __repr__(self) -> str:  # for test failures; Reg's reads the same
        return f"Cell(assigns={self.assigns!r}, counters={self.counters!r})"


class Reg(tuple):
    """A cell with one assign and no increments: ``(dot, value)``, ``dot`` being
    ``(ts, origin, seq)``. Reads as a :class:`Cell` does (and prints as one, so states
    compare alike whichever form an element is in); written through :func:`inflate`."""

    __slots__ = ()
    counters = None

    @property
    def assigns(self) -> list[tuple[int, int, int, Any]]:
        ts, origin, seq = self[0]
        return [(ts, origin, seq, self[1])]

    def live(self) -> bool:
        return True

    def value(self) -> Any:
        return self[1]

    def counter(self) -> None:
        return None

    def observed(self) -> list[Observed]:
        return []

    def seen_by(self, seen: dict[int, int]) -> bool:
        """Whether a removal that had seen ``seen`` takes this assign (so the element)."""
        dot = self[0]
        return seen.get(dot[1], 0) >= dot[2]

    def to_state(self, value_out: Any = None) -> list:
        ts, origin, seq = self[0]
        return [[[ts, origin, seq, value_out(self[1]) if value_out else self[1]]], None]

    def __repr__(self) -> str:
        return f"Cell(assigns={self.assigns!r}, counters=None)"


AnyCell = Cell | Reg


def inflate(cell: AnyCell | None) -> Cell:
    """A Cell to write to: ``cell`` itself, a new one holding a Reg's assign, or an empty one."""
    if type(cell) is Cell:
        return cell
    out = Cell()
    if cell is not None:
        ts, origin, seq = cell[0]
        out.assigns = [(ts, origin, seq, cell[1])]
    return out


_last_dot: list = [(0, 0, 0)]


def shared_dot(ts: int, origin: int, seq: int) -> tuple[int, int, int]:
    """The dot tuple ``(ts, origin, seq)``, the same object as the last one asked for when
    it is equal: the elements one effect wrote share it."""
    d = _last_dot[0]
    if d[2] == seq and d[1] == origin and d[0] == ts:
        return d
    d = _last_dot[0] = (ts, origin, seq)
    return d


_last_bare: list = [Reg(((0, 0, 0), None))]


def reg(ts: int, origin: int, seq: int, value: Any) -> Reg:
    """The Reg of one assign. Its dot is shared (``shared_dot``), and so is the whole Reg
    when the value is None (a set member's): a Reg is immutable, and the members one
    effect added are then one object."""
    dot = shared_dot(ts, origin, seq)
    if value is None:
        r = _last_bare[0]
        # One read of the Reg's item (a tuple subclass's: the slow, generic one), then the
        # dot's identity (the usual case for members of one effect) or its fields.
        d = r[0]
        if d is dot or (d[2] == seq and d[1] == origin and d[0] == ts):
            return r
        r = _last_bare[0] = Reg((dot, None))
        return r
    return Reg((dot, value))


def settle(cell: Cell) -> AnyCell:
    """The compact form of ``cell`` when it has one assign and no increments, else itself."""
    if not cell.counters and len(cell.assigns) == 1:
        ts, origin, seq, value = cell.assigns[0]
        return reg(ts, origin, seq, value)
    return cell


def _stamp(a: tuple[int, int, int, Any]) -> tuple[int, int]:
    return a[0], a[1]


def _dot(a: tuple[int, int, int, Any]) -> tuple[int, int]:
    return a[1], a[2]


def _num_out(n: Number) -> str | int:
    return n if type(n) is int else f"{n.numerator}/{n.denominator}"


def num_in(raw: Any) -> Number:
    """An exact number as ops and states carry it: an int, or ``"n/d"`` text for a Fraction."""
    t = type(raw)
    if t is int:
        return raw
    if t is bytes and 47 not in raw:  # 47: b"/" (a byte's test, not a substring search)
        return int(raw)  # the usual op argument: int() reads the bytes as it reads text
    if isinstance(raw, bytes):
        raw = raw.decode()
    if isinstance(raw, str) and "/" in raw:
        n, _, d = raw.partition("/")
        return Fraction(int(n), int(d))
    return int(raw)


def num_bytes(n: Number) -> bytes:
    """The op text of an exact number (see :func:`num_in`)."""
    if type(n) is int:
        return b"%d" % n
    return b"%d/%d" % (n.numerator, n.denominator)


__all__ = ["AnyCell", "Cell", "Number", "Observed", "Reg", "inflate", "num_bytes", "num_in", "reg", "settle", "shared_dot"]
