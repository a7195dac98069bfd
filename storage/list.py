"""The list type: a deque of byte strings that reports itself as a quicklist.

Redis keeps a list as a quicklist, a linked list of listpack nodes. In Python
the fastest structure for the operations lists are used for (push and pop at
both ends, short ranges from either end) is ``collections.deque``: every one of
them is a single C call. So the value *is* a deque of ``bytes``; what Redis's
node layout decides -- OBJECT ENCODING, MEMORY USAGE, the nodes an RDB file
holds -- is computed from the elements when asked (``nodes``), never kept up to
date on the hot path.

Redis 7.0 reports every list as ``quicklist`` (the ``listpack`` encoding for
small lists arrived in 7.2), so ``encoding()`` does too.

For the RDB writer: ``nodes(fill)`` yields the elements grouped as Redis 7.0
would pack them into quicklist nodes under ``list-max-listpack-size`` = ``fill``
when the list is built by appends; each group becomes one listpack of an
RDB_TYPE_LIST_QUICKLIST_2 value (a group holding one element of at least
``packed_threshold`` bytes is a PLAIN node).

``list-compress-depth`` d > 0 makes Redis keep every node but the d at each end
LZF-compressed when that pays (``compress_node``); ``compressed_nodes`` says which
ones are candidates. The LZF codec itself is passed in by the caller (storage does
no compression of its own), as a function ``(data, max_len) -> bytes | None`` that
returns exactly what Redis's liblzf would, or None when it would give up.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from itertools import islice

from . import listpack as lpmod
from .ranges import index_span

# LZF of ``data`` in at most ``max_len`` bytes exactly as liblzf would produce it, or None.
Compressor = Callable[[bytes, int], "bytes | None"]

# quicklist's rules for compressing an interior node: not under 48 bytes, and only if
# the LZF form is at least 8 bytes shorter; the compressed form carries a size_t.
MIN_COMPRESS_BYTES = 48
MIN_COMPRESS_IMPROVE = 8
_LZF_HEADER = 8

# Node-size limits of quicklist.c for negative fill values -1..-5.
_OPTIMIZATION_LEVEL = (4096, 8192, 16384, 32768, 65536)
_SIZE_SAFETY_LIMIT = 8192  # bytes, for positive fills (element-count limits)
_SIZE_ESTIMATE_OVERHEAD = 8  # quicklist's per-entry estimate when deciding to insert
PACKED_THRESHOLD = 1 << 30  # default: elements this large live alone in a PLAIN node
_packed_threshold = PACKED_THRESHOLD


def set_packed_threshold(size: int) -> bool:
    """DEBUG QUICKLIST-PACKED-THRESHOLD: 0 restores the default; above ~4 GB is refused."""
    global _packed_threshold
    if size > (1 << 32) - (1 << 20):
        return False
    _packed_threshold = size or PACKED_THRESHOLD
    return True


def packed_threshold() -> int:
    return _packed_threshold

# sizeof() of the C structures MEMORY USAGE counts for a quicklist.
_ROBJ = 16
_QUICKLIST = 40
_QUICKLIST_NODE = 40  # prev, next, entry, sz and 32 bits of flags, padded
_LP_HDR_AND_END = 7  # listpack header (total bytes u32 + count u16) and end byte


def lp_entry_size(element: bytes) -> int:
    """Bytes one element takes in a listpack: encoding, data and back-length."""
    v = lpmod.string_to_int64(element)
    if v is not None:
        if 0 <= v <= 127:
            size = 1
        elif -4096 <= v <= 4095:
            size = 2
        elif -32768 <= v <= 32767:
            size = 3
        elif -8388608 <= v <= 8388607:
            size = 4
        elif -(2**31) <= v <= 2**31 - 1:
            size = 5
        else:
            size = 9
    else:
        n = len(element)
        size = n + (1 if n < 64 else 2 if n < 4096 else 5)
    if size <= 127:
        return size + 1
    if size < 16383:
        return size + 2
    if size < 2097151:
        return size + 3
    if size < 268435455:
        return size + 4
    return size + 5


def _jemalloc_size(n: int) -> int:
    """The usable size jemalloc hands out for an ``n``-byte request (zmalloc_size)."""
    if n <= 8:
        return 8
    if n <= 128:
        return (n + 15) & ~15
    spacing = 1 << ((n - 1).bit_length() - 3)
    return (n + spacing - 1) & ~(spacing - 1)


def _node_accepts(node_bytes: int, node_count: int, elem_len: int, fill: int, packed_threshold: int) -> bool:
    """quicklist's _quicklistNodeAllowInsert: may one more element join this node?"""
    if elem_len >= packed_threshold:
        return False
    new_sz = node_bytes + elem_len + _SIZE_ESTIMATE_OVERHEAD
    if fill < 0:
        offset = -fill - 1
        if offset < len(_OPTIMIZATION_LEVEL) and new_sz <= _OPTIMIZATION_LEVEL[offset]:
            return True
    if new_sz > _SIZE_SAFETY_LIMIT:
        return False
    return node_count < fill


def compressed_nodes(count: int, depth: int) -> range:
    """Indexes of the nodes quicklist keeps compressed under ``list-compress-depth``:
    all but ``depth`` at each end, and none while there are no more than ``2 * depth``."""
    if depth <= 0 or count <= 2 * depth:
        return range(0)
    return range(depth, count - depth)


def compress_node(raw: bytes, lzf: Compressor) -> bytes | None:
    """The LZF form quicklist keeps a node's bytes (listpack, or a PLAIN node's element)
    in, or None when it leaves them raw (too short, or compression saves too little)."""
    n = len(raw)
    if n < MIN_COMPRESS_BYTES:
        return None
    z = lzf(raw, n)
    if not z or len(z) + MIN_COMPRESS_IMPROVE >= n:
        return None
    return z


def node_bytes(node: list[bytes], packed_threshold: int | None = None) -> bytes:
    """What a node's entry holds: a PLAIN node's element itself, else its listpack."""
    if packed_threshold is None:
        packed_threshold = _packed_threshold
    if len(node) == 1 and len(node[0]) >= packed_threshold:
        return node[0]
    return bytes(lpmod.build(node))


jemalloc_size = _jemalloc_size  # public: the server's MEMORY USAGE sizes key sds with it


class ListValue(deque):
    """A Redis list: a deque of ``bytes`` with the facts other commands ask of a value."""

    __slots__ = ()

    type_name = b"list"

    def encoding(self) -> bytes:
        return b"quicklist"

    def copy(self) -> ListValue:
        return ListValue(self)

    def digest_parts(self) -> Iterator[bytes]:
        return iter(self)

    # -- node layout (MEMORY USAGE, RDB) ------------------------------------
    def nodes(self, fill: int = -2, packed_threshold: int | None = None) -> Iterator[list[bytes]]:
        """The elements grouped into quicklist nodes as appends would build them."""
        if packed_threshold is None:
            packed_threshold = _packed_threshold
        node: list[bytes] = []
        size = _LP_HDR_AND_END
        for e in self:
            n = len(e)
            if node and (
                len(node[0]) >= packed_threshold
                or not _node_accepts(size, len(node), n, fill, packed_threshold)
            ):
                yield node
                node = []
                size = _LP_HDR_AND_END
            node.append(e)
            size += lp_entry_size(e)
        if node:
            yield node

    def memory_usage(
        self, samples: int = 5, fill: int = -2, depth: int = 0, lzf: Compressor | None = None
    ) -> int:
        """MEMORY USAGE's estimate: sample ``samples`` nodes (0 = all) and extrapolate.

        With ``depth`` > 0 (list-compress-depth) and a compressor, sampled nodes that
        Redis keeps compressed count at their LZF allocation instead.
        """
        if not self:
            return _ROBJ + _QUICKLIST
        threshold = _packed_threshold
        compressing = depth > 0 and lzf is not None
        # Which sampled nodes are within ``depth`` of the tail is only in question when
        # the list ends within ``depth`` nodes past the sample: walk that far to know.
        want = samples + depth if samples and compressing else samples
        nodes = list(islice(self.nodes(fill), want)) if want else list(self.nodes(fill))
        if compressing:
            count = len(nodes) if not want or len(nodes) < want else len(nodes) + depth
            squeezed = compressed_nodes(count, depth)
        else:
            squeezed = range(0)
        if samples:
            del nodes[samples:]
        sampled = len(nodes)
        elements = 0
        total = 0
        for i, node in enumerate(nodes):
            size = 0
            if i in squeezed:
                z = compress_node(node_bytes(node, threshold), lzf)  # type: ignore[arg-type]
                if z is not None:
                    size = _jemalloc_size(_LZF_HEADER + len(z))
            if not size:
                if len(node) == 1 and len(node[0]) >= threshold:  # PLAIN: the bare element
                    size = _jemalloc_size(len(node[0]))
                else:
                    size = _jemalloc_size(_LP_HDR_AND_END + sum(lp_entry_size(e) for e in node))
            total += _QUICKLIST_NODE + size
            elements += len(node)
        total_nodes = sampled if elements >= len(self) else -(-len(self) * sampled // elements)
        return _ROBJ + _QUICKLIST + int(total / sampled * total_nodes)

    # -- reading -----------------------------------------------------------
    def range(self, start: int, end: int) -> list[bytes]:
        """Elements ``start..end`` inclusive (Redis index rules, negatives from the tail)."""
        n = len(self)
        span = index_span(start, end, n)
        if span is None:
            return []
        start, end = span
        if start == 0 and end == n - 1:
            return list(self)
        if start <= n - 1 - end:
            return list(islice(self, start, end + 1))
        # closer to the tail: walk from there instead of skipping the head
        out = list(islice(reversed(self), n - 1 - end, n - start))
        out.reverse()
        return out

    def get(self, index: int) -> bytes | None:
        n = len(self)
        if index < 0:
            index += n
        if 0 <= index < n:
            return self[index]
        return None

    def positions(self, element: bytes, rank: int, count: int, maxlen: int) -> list[int]:
        """LPOS: indexes of matches, from the ``rank``-th match on (negative = from the tail).

        ``count`` 0 means all matches; ``maxlen`` 0 means scan the whole list.
        """
        n = len(self)
        limit = min(maxlen, n) if maxlen else n
        out: list[int] = []
        if rank > 0:
            seq: deque | list = self
            skip = rank - 1
        else:
            seq = list(islice(reversed(self), limit))
            skip = -rank - 1
        i = 0
        index = seq.index
        while True:
            try:
                i = index(element, i, limit)
            except ValueError:
                break
            if skip:
                skip -= 1
            else:
                out.append(i if rank > 0 else n - 1 - i)
                if count and len(out) >= count:
                    break
            i += 1
        return out

    # -- writing -----------------------------------------------------------
    def pop_many(self, count: int, left: bool) -> list[bytes]:
        """Pop up to ``count`` elements from one end, in popping order."""
        if count >= len(self):
            items = list(self)
            if not left:
                items.reverse()
            self.clear()
            return items
        pop = self.popleft if left else self.pop
        return [pop() for _ in range(count)]

    def set_at(self, index: int, element: bytes) -> bool:
        n = len(self)
        if index < 0:
            index += n
        if 0 <= index < n:
            self[index] = element
            return True
        return False

    def insert_at_pivot(self, pivot: bytes, element: bytes, after: bool) -> bool:
        """LINSERT: put ``element`` next to the first ``pivot``; whether it was found."""
        try:
            i = self.index(pivot)
        except ValueError:
            return False
        self.insert(i + 1 if after else i, element)
        return True

    def remove_matches(self, element: bytes, count: int) -> int:
        """LREM: remove up to ``|count|`` matches (0 = all), from the tail if negative."""
        n = len(self)
        found: list[int] = []
        index = self.index
        i = 0
        if count > 0:
            while len(found) < count:
                try:
                    i = index(element, i)
                except ValueError:
                    break
                found.append(i)
                i += 1
        else:
            while True:
                try:
                    i = index(element, i)
                except ValueError:
                    break
                found.append(i)
                i += 1
            if count < 0:
                found = found[count:]
        if not found:
            return 0
        if len(found) <= 8 or len(found) * 16 < n:
            for pos in reversed(found):
                del self[pos]
        else:
            kept: list[bytes] = []
            it = iter(self)
            prev = 0
            for pos in found:
                kept.extend(islice(it, pos - prev))
                next(it)
                prev = pos + 1
            kept.extend(it)
            self.clear()
            self.extend(kept)
        return len(found)

    def trim(self, start: int, end: int) -> int:
        """LTRIM: keep ``start..end``; how many elements were removed."""
        n = len(self)
        span = index_span(start, end, n)
        if span is None:
            self.clear()
            return n
        start, end = span
        ltrim, rtrim = start, n - 1 - end
        removed = ltrim + rtrim
        if removed <= end - start + 1:
            for _ in range(ltrim):
                self.popleft()
            for _ in range(rtrim):
                self.pop()
        else:
            kept = list(islice(self, start, end + 1))
            self.clear()
            self.extend(kept)
        return removed
