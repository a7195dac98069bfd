"""What a value holds in this process's heap: CPython allocation estimates per type.

MEMORY USAGE answers in Redis's terms (jemalloc size classes, listpacks, dict
entries) and is kept byte-exact for clients that compare it with Redis. This module
answers a different question, the one INFO used_memory and maxmemory need: how many
bytes of the Python heap does a value keep alive here (what tracemalloc would
attribute to it). These are pure data-structure facts: ``sys.getsizeof`` of each
container plus the objects it references, large collections sampled (their first
``samples`` elements, scaled by their length), as Redis samples nested values for
MEMORY USAGE.

Objects CPython shares (the empty and one-byte ``bytes``) count nothing. A sorted
set's score is one float referenced from both its dict and its ordered index.
"""

from __future__ import annotations

import sys
from itertools import islice
from typing import Any

_sizeof = sys.getsizeof

# A pointer-sized slot in a list, a deque block or a tuple.
_SLOT = 8
# A float object and a 2-tuple (score, member) in a sorted set's ordered index.
_FLOAT = _sizeof(1.5)
_PAIR = _sizeof((1.5, b"x"))


def bytes_size(b: bytes | bytearray) -> int:
    """A bytes object's allocation; the empty and single-byte ones are CPython's shared objects."""
    if len(b) <= 1 and type(b) is bytes:
        return 0
    return _sizeof(b)


def _mean_bytes(items: Any, n: int, samples: int) -> float:
    """The mean ``bytes_size`` of the first ``samples`` of ``items`` (all when fewer)."""
    if n <= samples:
        return sum(map(bytes_size, items)) / n if n else 0.0
    return sum(map(bytes_size, islice(items, samples))) / samples


def value_size(value: Any, samples: int = 8) -> int:
    """Heap bytes ``value`` holds (itself and what only it references)."""
    if isinstance(value, (bytes, bytearray)):
        return bytes_size(value)
    kind = value.type_name
    n = len(value)
    if kind == b"list" or kind == b"set":  # a deque or a set of bytes
        return _sizeof(value) + int(n * _mean_bytes(value, n, samples))
    if kind == b"hash":
        if n <= samples:
            items = sum(bytes_size(f) + bytes_size(v) for f, v in value.items())
        else:
            items = n * sum(bytes_size(f) + bytes_size(v)
                            for f, v in islice(value.items(), samples)) // samples
        return _sizeof(value) + items
    if kind == b"zset":
        return _zset_size(value, n, samples)
    if kind == b"stream":
        return _stream_size(value, samples)
    return _sizeof(value)


def _zset_size(z: Any, n: int, samples: int) -> int:
    """A dict member -> score and an ordered index of blocks of (score, member) pairs;
    the member and the float are shared by both."""
    blocks = z._lists
    size = _sizeof(z) + _sizeof(z.dict) + _sizeof(blocks) + _sizeof(z._maxes)
    if blocks:
        nb = len(blocks)
        head = blocks[:samples]
        size += nb * sum(map(_sizeof, head)) // len(head)
    per = _mean_bytes(iter(z.dict), n, samples) + _FLOAT + _PAIR
    return size + int(n * per)


def rax_size(rax: Any, samples: int = 8, values: bool = True) -> int:
    """A Rax: blocks of keys (ints) and of values; values sized by ``_object_size``
    (first ``samples`` of them, scaled) when ``values``."""
    kb, vb = rax._kb, rax._vb
    size = _sizeof(rax) + _sizeof(kb) + _sizeof(vb) + _sizeof(rax._mx)
    nb = len(kb)
    if not nb:
        return size
    n = len(rax)
    size += 2 * nb * (_sizeof(kb[0]) + _sizeof(kb[-1])) // 2  # block lists, both parallel
    keys = kb[0][:samples]
    size += n * sum(map(_sizeof, keys)) // len(keys)
    if values:
        vals = vb[0][:samples]
        size += n * sum(map(_object_size, vals)) // len(vals)
    return size


def _object_size(obj: Any) -> int:
    """A stream's listpack node, a pending entry, a consumer: the object and the
    bytes it owns (shared references, a NACK's consumer, are not followed)."""
    if isinstance(obj, (bytes, bytearray)):
        return bytes_size(obj)
    if obj is None or isinstance(obj, (int, float)):
        return 0 if obj is None else _sizeof(obj)
    size = _sizeof(obj)
    if hasattr(obj, "name") and isinstance(obj.name, bytes):
        size += bytes_size(obj.name)
    return size


def _stream_size(s: Any, samples: int) -> int:
    size = _sizeof(s) + rax_size(s._rax, samples)
    subs = getattr(s, "subs", None)
    if subs is not None:
        # An Active-Active stream: its entries live in one sub-stream per region.
        size += _sizeof(subs) + _sizeof(s._order) + sum(_stream_size(sub, samples) for sub in subs.values())
    size += _sizeof(s._t_fields) + sum(map(bytes_size, s._t_fields))
    if s._ghost:
        size += _sizeof(s._ghost)
    groups = s._cgroups
    if groups:
        size += _sizeof(groups)
        for g in groups.values():
            size += _sizeof(g) + bytes_size(g.name) + rax_size(g.pel, samples)
            size += _sizeof(g.consumers)
            for c in g.consumers.values():
                size += _sizeof(c) + bytes_size(c.name) + rax_size(c.pel, samples, values=False)
    return size
