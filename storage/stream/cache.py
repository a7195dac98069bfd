"""What fast reads keep between calls: decoded nodes and where forward reads stopped.

Both are process-wide and keyed by the identity of a node object (held, so the id cannot be
reused); the stream drops or re-keys an entry whenever it changes a node in place or
replaces it.
"""

from __future__ import annotations

from collections import OrderedDict

from .ids import ID_MAX
from .node import _fwd_node, node_counts

# Where forward reads stopped. Consumers read a node in consecutive slices (XREADGROUP
# COUNT n, XREAD from the last ID seen), and finding where a slice begins by walking the
# node costs about a microsecond per entry skipped. A forward read that stops after entry X
# records where the next entry begins, keyed by the node object (held, so its id cannot be
# reused); a read starting at exactly X + 1 jumps there. The offset is kept relative to the
# first entry: appends and in-place flag changes never move entries relative to it, while
# the master entry before it can grow with its counters. A node also keeps its parsed
# layout -- fields (as the encoder's field heads, with that encoder), first and last entry,
# and the node's length, which an append to an open tail node changes -- which a slice would otherwise re-parse for every few entries it reads. Holding a node keeps it alive after it leaves
# its stream, so the notes are bounded as the decoded-node cache is: as many nodes, none
# larger than it admits.
_RESUME: dict[int, tuple[object, int, int, tuple | None, int]] = {}


def _note_resume(
    node: bytes | bytearray, key: int, start: int, rel: int, layout: tuple | None
) -> None:
    """A forward read of ``node`` (master ID ``key``) may resume at entry offset ``rel``
    for IDs >= ``start``."""
    if len(node) > _NC_MAX_NODE_BYTES:
        return
    i = id(node)
    if i not in _RESUME and len(_RESUME) >= _NC_MAX_NODES:
        del _RESUME[next(iter(_RESUME))]
    _RESUME[i] = (node, start, rel, layout, key)


# --------------------------------------------------------------------------------------------
# Decoded-node cache
# --------------------------------------------------------------------------------------------
#
# Decoding a 100-entry node costs ~100x more in Python than in C, and reads cluster: consumers
# re-read the tail node, benchmarks repeat the same XRANGE, pagination walks one node in
# several calls.  So range() keeps the live entries of recently read nodes, decoded, in a small
# global LRU keyed by the identity of the node object.  The cache holds a reference to the
# node, so an id cannot be reused while cached.  Closed nodes are immutable bytes (a mutation
# replaces the object); the few in-place mutations of bytearray nodes (tail appends, XDEL,
# exact trims) update or drop the entry explicitly.  A node is cached on its second touch,
# so one-off point reads over cold data keep their cheap partial decode.

_NC: OrderedDict[int, tuple[bytes | bytearray, list[int], list[tuple[int, list[bytes]]]]] = (
    OrderedDict()
)
_NC_MAX_NODES = 256
_NC_MAX_ENTRIES = 1000  # nodes holding more entries are never cached
_NC_MAX_NODE_BYTES = 1 << 16  # nor nodes larger than this (their decoded copy would be big)
# Nodes touched once lately (ids, oldest first). Only a second touch within this window
# admits a node, so re-reading a stream far bigger than the cache (a Spark batch read, a
# second full scan) keeps the cheap one-pass reads instead of decoding every node into a
# cache entry that is evicted before it is used again.
# A forward read that resumes exactly where the previous touch of the node stopped (paging
# with COUNT) is not a re-read and does not admit it either: each value is the ID up to
# which the node's last forward reply-ready read went (-1: unknown).
_NC_SEEN: OrderedDict[int, int] = OrderedDict()
_NC_SEEN_MAX = 2 * _NC_MAX_NODES


def _nc_get(key: int, lp: bytes | bytearray, admit: bool, start: int = -1):
    """Cached ``(lp, sids, entries)`` for a node, decoding it on its second touch (unless
    that touch is a forward read from ``start`` past what the previous one served)."""
    i = id(lp)
    c = _NC.get(i)
    if c is not None:
        _NC.move_to_end(i)
        return c
    if not admit:
        return None
    served = _NC_SEEN.get(i)
    if served is None:
        if len(_NC_SEEN) >= _NC_SEEN_MAX:
            _NC_SEEN.popitem(last=False)
        _NC_SEEN[i] = -1
        return None
    if 0 <= served < start:
        _NC_SEEN[i] = -1
        return None
    del _NC_SEEN[i]
    if len(lp) > _NC_MAX_NODE_BYTES or node_counts(lp)[0] > _NC_MAX_ENTRIES:
        return None
    ents: list[tuple[int, list[bytes]]] = []
    _fwd_node(key, lp, 0, ID_MAX, 0, False, ents)
    c = (lp, [e[0] for e in ents], ents)
    _NC[i] = c
    if len(_NC) > _NC_MAX_NODES:
        _NC.popitem(last=False)
    return c


def _nc_served(lp: object, served: int) -> None:
    """Record how far a forward read of a not-yet-cached node went (see _NC_SEEN)."""
    i = id(lp)
    if i in _NC_SEEN:
        _NC_SEEN[i] = served


def _nc_drop(lp: object) -> None:
    """Forget a node that is about to change in place or go away."""
    _NC.pop(id(lp), None)
    _RESUME.pop(id(lp), None)


def _nc_move(old: object, new: bytes | bytearray) -> None:
    """Re-key a cached node whose object is replaced by an identical copy."""
    c = _NC.pop(id(old), None)
    if c is not None:
        _NC[id(new)] = (new, c[1], c[2])


def _nc_extend(lp: bytearray, sid: int, fields_values: list[bytes]) -> None:
    """Keep a cached tail node in step with an append (the decoded entry is the input)."""
    c = _NC.get(id(lp))
    if c is not None:
        if len(c[1]) >= _NC_MAX_ENTRIES or len(lp) > _NC_MAX_NODE_BYTES:
            del _NC[id(lp)]
            return
        c[1].append(sid)
        c[2].append((sid, [x if type(x) is bytes else bytes(x) for x in fields_values]))


def clear_node_cache() -> None:
    """Drop all decoded nodes (tests, memory pressure)."""
    _NC.clear()
    _NC_SEEN.clear()
    _RESUME.clear()
