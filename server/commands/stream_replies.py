"""Reply shaping shared by the stream commands: entry arrays (with the encodings of
decoded-node cache entries kept per node), XREAD/XREADGROUP's per-stream top level, and the
MAXCOUNT/MAXSIZE reply budget.  The entry encodings themselves are protocol's
(protocol/stream_entries.py).
"""

from __future__ import annotations

from rill.protocol.reply import Raw, ReplyError
from rill.protocol.stream_entries import RESP_ENTRIES, array_head, encode_entry, entries_bytes
from rill.storage.stream import (
    ID_MAX,
    MASK64,
    Stream,
)

from ..client import Client


def fmt_id(sid: int) -> bytes:
    """``ms-seq``: the reply and propagation form of an ID."""
    return b"%d-%d" % (sid >> 64, sid & MASK64)


# Encoded entries of the storage's decoded-node cache lists: id(list) -> (list, encodings).
# A cached node's list is only ever appended to while cached (a changed node gets a new
# list), so an encoding made once serves every later read of that entry -- repeated
# XRANGEs, and the XREAD fan-out of new entries to many readers -- as a list slice.
# Each encoding is kept with a leading CRLF, the form range_bytes joins.
_NODE_ENC: dict[int, tuple[list, list]] = {}
_NODE_ENC_MAX = 512

# protocol's array headers for the common counts, held here so the compiled range_bytes
# takes one by index instead of calling into the (uncompiled) protocol module per reply.
_N_HEADS = 1024
_HEADS: tuple[bytes, ...] = tuple(array_head(n) for n in range(_N_HEADS))
# Bulk headers of key names up to 255 bytes (protocol's own table is C-level when compiled).
_N_BULK = 256
_BULK_HEADS: tuple[bytes, ...] = tuple(b"$%d\r\n" % n for n in range(_N_BULK))


def range_bytes(
    s: Stream, start: int, end: int, count: int, rev: bool = False, sids: list[int] | None = None,
    head: bytes = b"", crlf: bool = False,
) -> bytes:
    """XRANGE/XREVRANGE's array: ``s.range(...)`` encoded, after ``head`` and with a
    trailing CRLF only with ``crlf``; a forward read also appends the IDs of the entries
    to ``sids`` when given.

    ``head`` and ``crlf`` let a whole reply (XRANGE's; XREAD's of one stream, after its
    top level) be this one join, where adding them after copied the entries once more:
    whole server, XREAD COUNT 100, 54.5k -> 46.0k instructions a call of the handler
    (docs/hot-core.md, stream_replies' row)."""
    # Uncached nodes come back as RESP pieces (each entry preceded by CRLF, see
    # protocol/stream_entries.py); cached ones as decoded entries whose encodings are kept
    # in _NODE_ENC.
    parts: list[bytes] = [head, b""]
    n = 0
    ext = parts.extend
    for ents, lo, hi, cached in s.range_segments(start, end, count, rev, RESP_ENTRIES, sids):
        n += hi - lo
        if not cached:
            ext(ents)
            continue
        rec = _NODE_ENC.get(id(ents))
        if rec is None or rec[0] is not ents:
            if len(_NODE_ENC) >= _NODE_ENC_MAX:
                del _NODE_ENC[next(iter(_NODE_ENC))]
            rec = (ents, [])
            _NODE_ENC[id(ents)] = rec
        # The encodings are a dense prefix of the node's entries: a read past its end
        # encodes up to ``hi`` once (at most a node's worth), and every later read is a
        # length test and a slice, with no scan of the slice for gaps.
        encs = rec[1]
        k = len(encs)
        while k < hi:
            sid, fv = ents[k]
            encs.append(b"\r\n" + encode_entry(sid, fv))
            k += 1
        chunk = encs[lo:hi]
        if rev:
            chunk.reverse()
        ext(chunk)
    if not n:
        return head + b"*0\r\n" if crlf else head + b"*0"
    parts[1] = _HEADS[n] if n < _N_HEADS else array_head(n)
    if crlf:
        parts.append(b"\r\n")
    return b"".join(parts)


def bulk(b: bytes) -> bytes:
    """A bulk string (no trailing CRLF)."""
    return b"$%d\r\n%b" % (len(b), b)


# The top level of a one-stream reply (every XREADGROUP of the bench's consumer loop):
# RESP2's array of one pair, RESP3's map of one key.
_ONE_RESP2 = b"*1\r\n*2\r\n"
_ONE_RESP3 = b"%1\r\n"


def one_stream_head(c: Client, key: bytes) -> bytes:
    """What comes before the entries in XREAD/XREADGROUP's reply of one stream: the top
    level and the key (see read_reply)."""
    k = len(key)
    return b"".join((
        _ONE_RESP3 if c.resp3 else _ONE_RESP2,
        _BULK_HEADS[k] if k < _N_BULK else b"$%d\r\n" % k,
        key, b"\r\n",
    ))


def read_reply(c: Client, served: list[tuple[bytes, bytes]]) -> Raw:
    """XREAD/XREADGROUP's top level: per stream its key and entries (already encoded);
    an array of pairs in RESP2, a map in RESP3."""
    n = len(served)
    if n == 1:
        # One join, the key's header from a table: the general form below made a call to
        # bulk(), two %-formats and a concatenation (whole server, XREADGROUP COUNT 10 +
        # XACK loop, callgrind: read_reply 5.5k -> 3.7k instructions a reply).
        key, ents = served[0]
        k = len(key)
        return Raw(b"".join((
            _ONE_RESP3 if c.resp3 else _ONE_RESP2,
            _BULK_HEADS[k] if k < _N_BULK else b"$%d\r\n" % k,
            key, b"\r\n", ents, b"\r\n",
        )))
    if c.resp3:
        parts = [b"%%%d" % n]
        for key, ents in served:
            parts.append(bulk(key))
            parts.append(ents)
    else:
        parts = [b"*%d" % n]
        for key, ents in served:
            parts.append(b"*2")
            parts.append(bulk(key))
            parts.append(ents)
    return Raw(b"\r\n".join(parts) + b"\r\n")


class Budget:
    """MAXCOUNT/MAXSIZE: one allowance for the whole reply across streams. The first entry
    always goes; a later one only if it fits (checked before it is delivered)."""

    __slots__ = ("count_left", "size_left", "emitted")

    def __init__(self, maxcount: int, maxsize: int) -> None:
        self.count_left = maxcount or -1
        self.size_left = maxsize or -1
        self.emitted = 0

    def accept(self, sid: int, fv: list[bytes] | None) -> bool:
        if self.count_left == 0:
            return False
        if self.size_left >= 0:
            size = len(encode_entry(sid, fv)) if fv is not None else 40
            if self.emitted and size > self.size_left:
                self.size_left = 0
                return False
            self.size_left = max(self.size_left - size, 0)
        if self.count_left > 0:
            self.count_left -= 1
        self.emitted += 1
        return True

    def spent(self) -> bool:
        return self.count_left == 0 or (self.emitted > 0 and self.size_left == 0)


def budget_range(s: Stream, start: int, count: int, budget: Budget) -> bytes | None:
    """XREAD's entries after ``start`` within the reply budget (None: nothing fits)."""
    n = count
    if budget.count_left > 0 and (not n or budget.count_left < n):
        n = budget.count_left
    out = []
    for sid, fv in s.range(start, ID_MAX, n):
        if not budget.accept(sid, fv):
            break
        out.append((sid, fv))
    return entries_bytes(out) if out else None


def nogroup(key: bytes, group: bytes, suffix: bytes = b"") -> ReplyError:
    return ReplyError(b"NOGROUP No such key '%b' or consumer group '%b'%b" % (key, group, suffix))


def nogroup_for_key(group: bytes, key: bytes) -> ReplyError:
    return ReplyError(b"NOGROUP No such consumer group '%b' for key name '%b'" % (group, key))
