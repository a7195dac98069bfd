"""Sorted sets: a member -> score dict plus an ordered index with O(log n) rank.

The ordered index is a list of sorted blocks of ``(score, member)`` tuples
(Python compares such tuples exactly as Redis orders a sorted set: by score,
then by member bytes, memcmp-style). Blocks hold up to ``2 * LOAD`` items; a
Fenwick tree over the block sizes, rebuilt lazily after a split or merge,
turns a rank into (block, offset) and back in O(log n). Bisection inside
blocks and over the block maxima runs in C, which is why this beats a
skiplist written in Python.

Encoding: Redis keeps small sets in a listpack and converts to a skiplist when
``zset-max-listpack-entries``/``-value`` are exceeded, and never converts back
except when a set is rebuilt (RDB load, ZUNIONSTORE and friends). Here the
structure is the same either way; ``listpack`` is a flag that follows Redis's
rules so OBJECT ENCODING, memory estimates and DEBUG behave alike.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator
from operator import itemgetter

from .keyspace import ScanLog, scan_step

LOAD = 512  # target block size; blocks split beyond 2*LOAD and merge below LOAD/4

# zset-max-listpack-entries / -value; the server keeps them in sync with its config.
max_listpack_entries = 128
max_listpack_value = 64

_score_of = itemgetter(0)
_member_of = itemgetter(1)


def set_thresholds(entries: int, value: int) -> None:
    """Install the current zset-max-listpack-* settings (used by RDB-built values too)."""
    global max_listpack_entries, max_listpack_value
    max_listpack_entries = entries
    max_listpack_value = value


def format_score(score: float) -> bytes:
    """%.17g, with inf/-inf spelled as Redis does (addReplyDouble, AOF rewrite)."""
    if score == math.inf:
        return b"inf"
    if score == -math.inf:
        return b"-inf"
    return b"%.17g" % score


def d2string(score: float) -> bytes:
    """Redis's d2string: what a listpack stores for a score (ZSCAN on small sets shows it)."""
    if math.isinf(score):
        return b"inf" if score > 0 else b"-inf"
    if score == 0:
        return b"-0" if math.copysign(1.0, score) < 0 else b"0"
    if -(2**62) <= score <= 2**62 and score == int(score):
        return b"%d" % int(score)
    return b"%.17g" % score


class SortedSet:
    """A Redis sorted set value (TYPE "zset")."""

    type_name = b"zset"
    __slots__ = ("dict", "_lists", "_maxes", "_fen", "listpack", "_scan")

    def __init__(self, listpack: bool = True) -> None:
        self.dict: dict[bytes, float] = {}
        self._lists: list[list[tuple[float, bytes]]] = []
        self._maxes: list[tuple[float, bytes]] = []
        self._fen: list[int] | None = None
        self.listpack = listpack
        # ZSCAN's log while an iteration of the skiplist encoding is open; every add and
        # removal below reports to it (see storage.keyspace.ScanLog).
        self._scan: ScanLog | None = None

    # -- size and lookups -------------------------------------------------------
    def __len__(self) -> int:
        return len(self.dict)

    def __bool__(self) -> bool:
        return bool(self.dict)

    def __contains__(self, member: bytes) -> bool:
        return member in self.dict

    def score(self, member: bytes) -> float | None:
        return self.dict.get(member)

    # -- encoding -----------------------------------------------------------------
    def encoding(self) -> bytes:
        return b"listpack" if self.listpack else b"skiplist"

    def _admit(self, member: bytes) -> None:
        """Before adding a new member: leave the listpack encoding if it would overflow."""
        if self.listpack and (
            len(self.dict) + 1 > max_listpack_entries or len(member) > max_listpack_value
        ):
            self.listpack = False

    def maybe_compact(self) -> None:
        """zsetConvertToListpackIfNeeded: a rebuilt set returns to a listpack if it fits."""
        if not self.listpack and len(self.dict) <= max_listpack_entries:
            if all(len(m) <= max_listpack_value for m in self.dict):
                self.listpack = True
                self._scan = None  # a listpack is scanned whole
                self._drop_negative_zeros()

    def _drop_negative_zeros(self) -> None:
        """A listpack stores -0 as the integer 0: a score of -0.0 becomes 0.0 there."""
        d = self.dict
        for m, s in d.items():
            if s == 0 and math.copysign(1.0, s) < 0:
                d[m] = 0.0
        self._lists = [[(0.0, m) if s == 0 else (s, m) for s, m in b] for b in self._lists]
        self._maxes = [b[-1] for b in self._lists]

    # -- writes ---------------------------------------------------------------------
    def add(self, member: bytes, score: float) -> None:
        """Insert ``member`` or move it to ``score`` (a same-value score keeps the old one)."""
        d = self.dict
        old = d.get(member)
        if old is None:
            self._admit(member)
            if score == 0 and self.listpack:
                score = 0.0  # the listpack keeps -0 as the integer 0
            d[member] = score
            self._insert((score, member))
            if self._scan is not None and self._scan.added(member):
                self._scan = None
        elif old != score:
            if score == 0 and self.listpack:
                score = 0.0
            d[member] = score
            self._remove((old, member))
            self._insert((score, member))

    def remove(self, member: bytes) -> bool:
        old = self.dict.pop(member, None)
        if old is None:
            return False
        self._remove((old, member))
        if self._scan is not None and self._scan.removed(member, self.dict):
            self._scan = None
        return True

    def pop(self, count: int, from_max: bool) -> list[tuple[bytes, float]]:
        """Remove and return up to ``count`` (member, score) pairs from one end."""
        n = len(self.dict)
        count = min(count, n)
        if from_max:
            items = self._delete_range(n - count, n)
            items.reverse()
        else:
            items = self._delete_range(0, count)
        return [(m, s) for s, m in items]

    def pop_end(self, from_max: bool) -> tuple[float, bytes]:
        """Remove and return the lowest (or highest) (score, member) item of a non-empty set."""
        lists = self._lists
        if from_max:
            i = len(lists) - 1
            block = lists[i]
            item = block.pop()
        else:
            i = 0
            block = lists[0]
            item = block.pop(0)
        if not block:
            del lists[i]
            del self._maxes[i]
            self._fen = None
        else:
            if from_max:
                self._maxes[i] = block[-1]
            if self._fen is not None:
                self._fen_add(i, -1)
        del self.dict[item[1]]
        if self._scan is not None and self._scan.removed(item[1], self.dict):
            self._scan = None
        return item

    def remove_rank_range(self, start: int, stop: int) -> int:
        """Delete ranks [start, stop); return how many went."""
        return len(self._delete_range(start, stop))

    # -- ranks and ranges -------------------------------------------------------------
    def rank(self, member: bytes, reverse: bool = False) -> int | None:
        score = self.dict.get(member)
        if score is None:
            return None
        r = self._index((score, member))
        return len(self.dict) - 1 - r if reverse else r

    def range(self, start: int, stop: int) -> list[tuple[float, bytes]]:
        """The (score, member) items of ranks [start, stop), ascending."""
        n = len(self.dict)
        if start < 0:
            start = 0
        if stop > n:
            stop = n
        if start >= stop:
            return []
        lists = self._lists
        if len(lists) == 1:
            return lists[0][start:stop]
        i, j = self._locate(start)
        out = lists[i][j : j + (stop - start)]
        want = stop - start
        i += 1
        while len(out) < want:
            out.extend(lists[i][: want - len(out)])
            i += 1
        return out

    def score_rank(self, score: float, exclusive: bool, upper: bool) -> int:
        """As a bound of a score range: the first rank inside it (lower bound) or the
        rank just past it (upper bound)."""
        if upper:
            # past the last item with score <= s (or < s if exclusive)
            return self._bisect(score, _score_of, not exclusive)
        return self._bisect(score, _score_of, exclusive)

    def lex_rank(self, member: bytes | None, exclusive: bool, upper: bool, infinite: int) -> int:
        """The same for a lex bound (``infinite`` -1 for "-", +1 for "+", 0 otherwise)."""
        if infinite < 0:
            return 0
        if infinite > 0:
            return len(self.dict)
        if upper:
            return self._bisect(member, _member_of, not exclusive)
        return self._bisect(member, _member_of, exclusive)

    def items(self, reverse: bool = False) -> Iterator[tuple[bytes, float]]:
        """(member, score) pairs in score order (SORT and other readers)."""
        if reverse:
            for block in reversed(self._lists):
                for s, m in reversed(block):
                    yield m, s
        else:
            for block in self._lists:
                for s, m in block:
                    yield m, s

    def __iter__(self) -> Iterator[tuple[bytes, float]]:
        return self.items()

    # -- value-object contract ----------------------------------------------------------
    def rdb_items(self) -> Iterator[tuple[bytes, float]]:
        """Highest score first, the order Redis writes a skiplist in."""
        return self.items(reverse=True)

    def digest_parts(self) -> Iterable[bytes]:
        for m, s in self.items():
            yield m
            yield format_score(s)

    def copy(self) -> SortedSet:
        new = SortedSet(self.listpack)
        new.dict = dict(self.dict)
        new._lists = [list(b) for b in self._lists]
        new._maxes = list(self._maxes)
        return new

    def memory_usage(self) -> int:
        n = len(self.dict)
        members = sum(len(m) for m in self.dict)
        if self.listpack:
            # listpack: header + per entry (member and score, each with 2 bytes of framing)
            return 16 + 7 + members + n * (2 + 2 + 2 + 8)
        # dict (entry 24 + table 8) + skiplist node (score, ele, backward, ~1.33 levels) + sds
        return 16 + 96 + n * (24 + 8 + 8 + 8 + 8 + 22) + members + n * 9

    # -- ZSCAN ---------------------------------------------------------------------------
    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """A cursor-stable walk of the members (skiplist encoding; a listpack is sent whole)."""
        self._scan, cursor, members = scan_step(self._scan, self.dict, cursor, count)
        return cursor, members

    # -- the ordered index --------------------------------------------------------------
    def _insert(self, item: tuple[float, bytes]) -> None:
        lists = self._lists
        maxes = self._maxes
        if not lists:
            lists.append([item])
            maxes.append(item)
            self._fen = None
            return
        i = bisect_left(maxes, item)
        if i == len(maxes):
            i -= 1
            block = lists[i]
            block.append(item)
            maxes[i] = item
        else:
            block = lists[i]
            insort(block, item)
        if len(block) > 2 * LOAD:
            lists.insert(i + 1, block[LOAD:])
            del block[LOAD:]
            maxes[i] = block[-1]
            maxes.insert(i + 1, lists[i + 1][-1])
            self._fen = None
        elif self._fen is not None:
            self._fen_add(i, 1)

    def _remove(self, item: tuple[float, bytes]) -> None:
        lists = self._lists
        maxes = self._maxes
        i = bisect_left(maxes, item)
        block = lists[i]
        j = bisect_left(block, item)
        del block[j]
        if not block:
            del lists[i]
            del maxes[i]
            self._fen = None
            return
        if j == len(block):
            maxes[i] = block[-1]
        if len(block) < LOAD // 4 and len(lists) > 1:
            # merge with a neighbour, splitting again if that makes a block too big
            k = i - 1 if i > 0 else i
            merged = lists[k] + lists[k + 1]
            if len(merged) > 2 * LOAD:
                half = len(merged) // 2
                lists[k], lists[k + 1] = merged[:half], merged[half:]
                maxes[k], maxes[k + 1] = lists[k][-1], lists[k + 1][-1]
            else:
                lists[k] = merged
                maxes[k] = merged[-1]
                del lists[k + 1]
                del maxes[k + 1]
            self._fen = None
        elif self._fen is not None:
            self._fen_add(i, -1)

    def _delete_range(self, start: int, stop: int) -> list[tuple[float, bytes]]:
        """Remove ranks [start, stop) from the index and the dict; return the items."""
        items = self.range(start, stop)
        if not items:
            return items
        d = self.dict
        for _s, m in items:
            del d[m]
        log = self._scan
        if log is not None:
            for _s, m in items:
                if log.removed(m, d):
                    self._scan = None
                    break
        if not d:
            self._lists = []
            self._maxes = []
            self._fen = None
            return items
        if len(items) <= 8:
            for item in items:
                self._remove(item)
            return items
        # bulk: cut the slices out block by block, then drop empty blocks
        lists = self._lists
        i, j = self._locate(start)
        left = len(items)
        while left:
            block = lists[i]
            take = min(left, len(block) - j)
            del block[j : j + take]
            left -= take
            i += 1
            j = 0
        keep = [b for b in lists if b]
        self._lists = keep
        self._maxes = [b[-1] for b in keep]
        self._fen = None
        return items

    def _fen_build(self) -> list[int]:
        sizes = [len(b) for b in self._lists]
        n = len(sizes)
        tree = [0, *sizes]
        for i in range(1, n + 1):
            j = i + (i & -i)
            if j <= n:
                tree[j] += tree[i]
        self._fen = tree
        return tree

    def _fen_add(self, block: int, delta: int) -> None:
        tree = self._fen
        assert tree is not None
        n = len(tree) - 1
        k = block + 1
        while k <= n:
            tree[k] += delta
            k += k & -k

    def _prefix(self, block: int) -> int:
        """How many items sit in blocks before ``block``."""
        if block == 0:
            return 0
        tree = self._fen or self._fen_build()
        total = 0
        k = block
        while k:
            total += tree[k]
            k &= k - 1
        return total

    def _locate(self, index: int) -> tuple[int, int]:
        """Global rank -> (block, offset)."""
        if len(self._lists) == 1:
            return 0, index
        tree = self._fen or self._fen_build()
        n = len(tree) - 1
        pos = 0
        bit = 1 << (n.bit_length() - 1)
        while bit:
            nxt = pos + bit
            if nxt <= n and tree[nxt] <= index:
                index -= tree[nxt]
                pos = nxt
            bit >>= 1
        return pos, index

    def _index(self, item: tuple[float, bytes]) -> int:
        i = bisect_left(self._maxes, item)
        return self._prefix(i) + bisect_left(self._lists[i], item)

    def _bisect(self, x: object, key: itemgetter, right: bool) -> int:
        """Rank of the first item whose key is >= x (> x when ``right``)."""
        maxes = self._maxes
        if not maxes:
            return 0
        find = bisect_right if right else bisect_left
        i = find(maxes, x, key=key)
        if i == len(maxes):
            return len(self.dict)
        return self._prefix(i) + find(self._lists[i], x, key=key)


def new_for(first_member_len: int) -> SortedSet:
    """A set created by ZADD: a listpack unless the thresholds already rule it out."""
    return SortedSet(max_listpack_entries != 0 and first_member_len <= max_listpack_value)


def from_pairs(pairs: Iterable[tuple[bytes, float]], listpack: bool = False) -> SortedSet:
    """Build a set from unique (member, score) pairs, then pick the encoding as a rebuild does."""
    z = SortedSet(listpack)
    d = z.dict
    items = []
    for m, s in pairs:
        d[m] = s
        items.append((s, m))
    items.sort()
    z._lists = [items[i : i + LOAD] for i in range(0, len(items), LOAD)]
    z._maxes = [b[-1] for b in z._lists]
    z.maybe_compact()
    return z


def from_rdb_pairs(pairs: Iterable[tuple[bytes, float]]) -> SortedSet:
    """The RDB loader's builder: Redis's encoding choice for loaded content."""
    return from_pairs(pairs)
