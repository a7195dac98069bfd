"""Ordered map with Redis rax-style seeks, used for stream nodes and PELs.

Redis keeps stream nodes (keyed by the 128-bit big-endian master ID) and pending entries
lists in a radix tree.  What the stream code actually needs from it is an ordered map with
seeks (``>=``, ``>``, ``<=``, ``<``, first, last), iteration in both directions from a seek
point, and cheap appends at the tail and removals at the head.

Why not a literal radix tree or one flat sorted list:

* A pointer-chasing radix tree in pure Python costs a Python object per node and several
  attribute lookups per byte of key; it would be the slowest part of XADD.
* One sorted list with ``bisect`` gives O(log n) seeks and O(1) tail appends, but deleting
  from the middle (XACK in a PEL of a million entries, XDEL emptying a node) moves the whole
  array, and so does removing from the head unless a lazy head offset is added.

So this is a *blocked* sorted list: keys live in blocks of at most ``_BLOCK`` sorted keys
(with a parallel list of values), and ``_maxes`` holds each block's last key.  A seek is a
``bisect`` on ``_maxes`` then one inside a block (both in C); an append at the tail is a
couple of list appends; removing at the head or in the middle moves at most one block
(<= 1024 pointers) plus, when a block empties, one pointer per block.  At 10 million keys
that is ~10 000 blocks, so every operation stays in the microsecond range.

Keys must be mutually comparable; stream code uses ints (``ms << 64 | seq``), which compare
faster than tuples or 16-byte strings and sort identically to Redis's big-endian keys.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from itertools import chain
from typing import Any

__all__ = ["Rax"]

_BLOCK = 1024  # max keys per block; a middle insert splits a full block in halves

_MISSING = object()


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython). Compiled, the hot bisects are rax.pxd's ``_c_bisect_left``, the bisect module's
# loop without a Python call around it; the name exists only in the compiled module, and
# ``_COMPILED`` guards it.
_COMPILED = type(_probe).__name__ != "function"


class Rax:
    """An ordered map from comparable keys (ints for streams) to values."""

    __slots__ = ("_kb", "_vb", "_mx", "_n")

    def __init__(self) -> None:
        self._kb: list[list[Any]] = []  # key blocks, each sorted, all blocks in order
        self._vb: list[list[Any]] = []  # value blocks, parallel to _kb
        self._mx: list[Any] = []  # last (largest) key of each block
        self._n = 0

    # ---------------------------------------------------------------------------- basics

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def __contains__(self, key: Any) -> bool:
        mx = self._mx
        bi = bisect_left(mx, key)
        if bi == len(mx):
            return False
        kb = self._kb[bi]
        i = bisect_left(kb, key)
        return kb[i] == key

    def get(self, key: Any, default: Any = None) -> Any:
        """Value for ``key`` or ``default`` (raxFind)."""
        mx = self._mx
        bi = bisect_left(mx, key)
        if bi == len(mx):
            return default
        kb = self._kb[bi]
        i = bisect_left(kb, key)
        if kb[i] == key:
            return self._vb[bi][i]
        return default

    def __getitem__(self, key: Any) -> Any:
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return v

    def __setitem__(self, key: Any, value: Any) -> None:
        self.insert(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def __iter__(self) -> Iterator[Any]:
        for kb in self._kb:
            yield from kb

    def clear(self) -> None:
        self._kb.clear()
        self._vb.clear()
        self._mx.clear()
        self._n = 0

    # ---------------------------------------------------------------------------- updates

    def insert(self, key: Any, value: Any) -> bool:
        """Insert or overwrite; return True if ``key`` was new (raxInsert).

        Appending a key larger than all others (the stream and PEL common case) never
        bisects or moves anything.
        """
        mx = self._mx
        if not mx:
            self._kb.append([key])
            self._vb.append([value])
            mx.append(key)
            self._n = 1
            return True
        if key > mx[-1]:
            kb = self._kb[-1]
            if len(kb) < _BLOCK:
                kb.append(key)
                self._vb[-1].append(value)
                mx[-1] = key
            else:
                self._kb.append([key])
                self._vb.append([value])
                mx.append(key)
            self._n += 1
            return True
        bi = bisect_left(mx, key)
        kb = self._kb[bi]
        i = bisect_left(kb, key)
        if kb[i] == key:
            self._vb[bi][i] = value
            return False
        kb.insert(i, key)
        vb = self._vb[bi]
        vb.insert(i, value)
        self._n += 1
        if len(kb) > _BLOCK:
            half = len(kb) >> 1
            self._kb.insert(bi + 1, kb[half:])
            self._vb.insert(bi + 1, vb[half:])
            del kb[half:]
            del vb[half:]
            mx.insert(bi, kb[-1])
        return True

    def extend(self, keys: list[Any], values: list[Any]) -> None:
        """Append ascending ``keys`` (with ``values``), all larger than every key present.

        The bulk form of tail inserts (an XREADGROUP delivering a batch of new IDs to a
        PEL): the last block is topped up and the rest is cut into whole blocks, with no
        per-key call.
        """
        n = len(keys)
        if not n:
            return
        mx = self._mx
        if mx and not keys[0] > mx[-1]:
            raise ValueError("Rax.extend: keys must be larger than every key present")
        kbs = self._kb
        vbs = self._vb
        i = 0
        if mx:
            room = _BLOCK - len(kbs[-1])
            if room > 0:
                i = room if room < n else n
                kbs[-1] += keys[:i]
                vbs[-1] += values[:i]
                mx[-1] = keys[i - 1]
        while i < n:
            j = i + _BLOCK
            kb = keys[i:j]
            kbs.append(kb)
            vbs.append(values[i:j])
            mx.append(kb[-1])
            i = j
        self._n += n

    def try_insert(self, key: Any, value: Any) -> bool:
        """Insert only if absent; return True if inserted (raxTryInsert)."""
        if key in self:
            return False
        return self.insert(key, value)

    def _drop(self, bi: int, i: int) -> Any:
        kb = self._kb[bi]
        vb = self._vb[bi]
        del kb[i]
        v = vb.pop(i)
        self._n -= 1
        if not kb:
            del self._kb[bi]
            del self._vb[bi]
            del self._mx[bi]
        elif i == len(kb):
            self._mx[bi] = kb[-1]
        return v

    def pop(self, key: Any, default: Any = _MISSING) -> Any:
        """Remove ``key`` and return its value; ``default`` (or KeyError) if absent."""
        mx = self._mx
        bi = bisect_left(mx, key)
        if bi < len(mx):
            kb = self._kb[bi]
            i = bisect_left(kb, key)
            if kb[i] == key:
                return self._drop(bi, i)
        if default is _MISSING:
            raise KeyError(key)
        return default

    def pop_many(self, keys: list[Any], default: Any = None) -> list[Any]:
        """Remove each of ``keys``; return their values in order (``default`` for a key
        that is absent).

        One call for a batch of removals (XACK of many IDs): a seek per run of keys that
        are also neighbours in the map (the usual XACK: IDs delivered together), removed
        as one slice.
        """
        out: list[Any] = []
        kbs = self._kb
        vbs = self._vb
        mx = self._mx
        removed = 0
        n = len(keys)
        j = 0
        while j < n:
            key = keys[j]
            # A consumer usually acknowledges its oldest pending IDs, the head of the first
            # block: found by two comparisons, where each bisect_left is a Python call
            # (~540 instructions, callgrind). Both give bisect_left's index.
            if mx and key <= mx[0]:
                bi = 0
            elif _COMPILED:
                bi = _c_bisect_left(mx, key)  # noqa: F821 (see _COMPILED)
            else:
                bi = bisect_left(mx, key)
            if bi < len(mx):
                kb = kbs[bi]
                if kb[0] == key:
                    i = 0
                elif _COMPILED:
                    i = _c_bisect_left(kb, key)  # noqa: F821 (see _COMPILED)
                else:
                    i = bisect_left(kb, key)
                if kb[i] == key:
                    nb = len(kb)
                    m = min(n - j, nb - i)
                    if m > 1:
                        if _COMPILED:
                            # Pair by pair in C: no slice to build, compare and free.
                            m = _c_run(keys, j, kb, i, m)  # noqa: F821 (see _COMPILED)
                        else:
                            # The run compared in C (list ==), without copying a list
                            # that it spans whole.
                            ks = keys if j == 0 and m == n else keys[j : j + m]
                            bs = kb if i == 0 and m == nb else kb[i : i + m]
                            if ks != bs:
                                k = 1
                                while k < m and keys[j + k] == kb[i + k]:
                                    k += 1
                                m = k
                    vb = vbs[bi]
                    if m == nb:
                        # The whole block (m == nb implies i == 0): dropped, not emptied,
                        # and, as the first run, itself the result.
                        if out:
                            out += vb
                        else:
                            out = vb
                        del kbs[bi]
                        del vbs[bi]
                        del mx[bi]
                    else:
                        if out:
                            out += vb[i : i + m]
                        else:
                            out = vb[i : i + m]
                        del kb[i : i + m]
                        del vb[i : i + m]
                        if i == len(kb):
                            mx[bi] = kb[-1]
                    removed += m
                    j += m
                    continue
            out.append(default)
            j += 1
        self._n -= removed
        return out

    def remove(self, key: Any) -> Any:
        """Remove ``key`` (KeyError if absent) and return its value (raxRemove)."""
        return self.pop(key)

    def discard(self, key: Any) -> bool:
        """Remove ``key`` if present; return whether it was."""
        return self.pop(key, _MISSING_DISCARD) is not _MISSING_DISCARD

    def pop_first(self) -> tuple[Any, Any]:
        """Remove and return the smallest ``(key, value)``; KeyError when empty."""
        if not self._n:
            raise KeyError("pop_first from an empty Rax")
        k = self._kb[0][0]
        return k, self._drop(0, 0)

    def pop_last(self) -> tuple[Any, Any]:
        """Remove and return the largest ``(key, value)``; KeyError when empty."""
        if not self._n:
            raise KeyError("pop_last from an empty Rax")
        kb = self._kb[-1]
        k = kb[-1]
        return k, self._drop(len(self._kb) - 1, len(kb) - 1)

    # ---------------------------------------------------------------------------- seeks

    def first(self) -> tuple[Any, Any] | None:
        """Smallest ``(key, value)`` or None (raxSeek "^")."""
        if not self._n:
            return None
        return self._kb[0][0], self._vb[0][0]

    def last(self) -> tuple[Any, Any] | None:
        """Largest ``(key, value)`` or None (raxSeek "$")."""
        if not self._n:
            return None
        return self._kb[-1][-1], self._vb[-1][-1]

    def first_key(self) -> Any:
        """Smallest key or None."""
        return self._kb[0][0] if self._n else None

    def last_key(self) -> Any:
        """Largest key or None."""
        return self._mx[-1] if self._n else None

    def _pos_ge(self, key: Any) -> tuple[int, int] | None:
        mx = self._mx
        bi = bisect_left(mx, key)
        if bi == len(mx):
            return None
        return bi, bisect_left(self._kb[bi], key)

    def _pos_gt(self, key: Any) -> tuple[int, int] | None:
        mx = self._mx
        bi = bisect_right(mx, key)
        if bi == len(mx):
            return None
        return bi, bisect_right(self._kb[bi], key)

    def _before(self, pos: tuple[int, int] | None) -> tuple[int, int] | None:
        """Position just before ``pos`` (None = past the end)."""
        if pos is None:
            if not self._n:
                return None
            return len(self._kb) - 1, len(self._kb[-1]) - 1
        bi, i = pos
        if i > 0:
            return bi, i - 1
        if bi == 0:
            return None
        return bi - 1, len(self._kb[bi - 1]) - 1

    def _pos(self, op: str, key: Any) -> tuple[int, int] | None:
        if op == ">=":
            return self._pos_ge(key)
        if op == ">":
            return self._pos_gt(key)
        if op == "<=":
            return self._before(self._pos_gt(key))
        if op == "<":
            return self._before(self._pos_ge(key))
        if op == "^":
            return (0, 0) if self._n else None
        if op == "$":
            return self._before(None)
        if op == "=":
            pos = self._pos_ge(key)
            if pos is not None and self._kb[pos[0]][pos[1]] != key:
                return None
            return pos
        raise ValueError(f"unknown seek operator {op!r}")

    def seek(self, op: str, key: Any = None) -> tuple[Any, Any] | None:
        """The ``(key, value)`` a raxSeek with ``op`` lands on, or None.

        ``op`` is one of ``>=``, ``>``, ``<=``, ``<``, ``=``, ``^`` (first), ``$`` (last).
        """
        pos = self._pos(op, key)
        if pos is None:
            return None
        bi, i = pos
        return self._kb[bi][i], self._vb[bi][i]

    def seek_ge(self, key: Any) -> tuple[Any, Any] | None:
        """Smallest entry with key >= ``key``."""
        return self.seek(">=", key)

    def seek_gt(self, key: Any) -> tuple[Any, Any] | None:
        """Smallest entry with key > ``key``: the next node of a stream's forward read,
        so one bisect here rather than seek's dispatch (three calls)."""
        mx = self._mx
        bi = bisect_right(mx, key)
        if bi == len(mx):
            return None
        kb = self._kb[bi]
        i = bisect_right(kb, key)
        return kb[i], self._vb[bi][i]

    def seek_le(self, key: Any) -> tuple[Any, Any] | None:
        """Largest entry with key <= ``key``."""
        mx = self._mx
        bi = bisect_right(mx, key)
        if bi < len(mx):
            kb = self._kb[bi]
            i = bisect_right(kb, key)
            if i:
                return kb[i - 1], self._vb[bi][i - 1]
        if bi == 0:
            return None
        return mx[bi - 1], self._vb[bi - 1][-1]

    def seek_lt(self, key: Any) -> tuple[Any, Any] | None:
        """Largest entry with key < ``key``."""
        return self.seek("<", key)

    # ---------------------------------------------------------------------------- iteration

    def iterate(
        self, op: str = "^", key: Any = None, reverse: bool = False
    ) -> Iterator[tuple[Any, Any]]:
        """Seek like raxSeek(op, key), then yield ``(key, value)`` pairs going forward
        (raxNext) or backward (raxPrev) from that point, the seek point included.

        The map must not be structurally modified while iterating (replacing the value of
        an existing key is fine).
        """
        return self._walk(self._pos(op, key), reverse)

    def iterate_floor(self, key: Any) -> Iterator[tuple[Any, Any]]:
        """Forward from the last key <= ``key``, or from the first key when there is none
        (where a stream iterator starts: the node that may hold ``key``)."""
        pos = self._before(self._pos_gt(key))
        return self._walk(pos if pos is not None else (0, 0) if self._n else None, False)

    def _walk(self, pos: tuple[int, int] | None, reverse: bool) -> Iterator[tuple[Any, Any]]:
        if pos is None:
            return
        bi, i = pos
        kbs = self._kb
        vbs = self._vb
        if not reverse:
            nb = len(kbs)
            while bi < nb:
                kb = kbs[bi]
                vb = vbs[bi]
                n = len(kb)
                while i < n:
                    yield kb[i], vb[i]
                    i += 1
                bi += 1
                i = 0
        else:
            while bi >= 0:
                kb = kbs[bi]
                vb = vbs[bi]
                while i >= 0:
                    yield kb[i], vb[i]
                    i -= 1
                bi -= 1
                if bi >= 0:
                    i = len(kbs[bi]) - 1

    def items(self, reverse: bool = False) -> Iterator[tuple[Any, Any]]:
        """All ``(key, value)`` pairs in key order (or reversed)."""
        if reverse:
            return self.iterate("$", None, True)
        # Whole-map forward walks (RDB saves, AOF rewrites) pair the blocks up in C.
        if len(self._kb) == 1:
            return zip(self._kb[0], self._vb[0], strict=True)
        return zip(chain.from_iterable(self._kb), chain.from_iterable(self._vb), strict=True)

    def keys(self) -> Iterator[Any]:
        """All keys in order."""
        for kb in self._kb:
            yield from kb

    def values(self) -> Iterator[Any]:
        """All values in key order."""
        for vb in self._vb:
            yield from vb

    def key_list(self) -> list[Any]:
        """All keys as a list (a snapshot safe to hold across mutations)."""
        out: list[Any] = []
        for kb in self._kb:
            out.extend(kb)
        return out

    def block_count(self) -> int:
        """Number of internal blocks (for memory estimates)."""
        return len(self._kb)


_MISSING_DISCARD = object()
