"""Reply-ready reads: a node's live entries encoded in one pass, without decoding them
into tuples first (XRANGE/XREAD's hot path)."""

from __future__ import annotations

from ..listpack import (
    skip,
)
from .cache import _RESUME, _note_resume
from .ids import ID_MAX, MASK64
from .node import (
    FLAG_DELETED,
    FLAG_SAMEFIELDS,
    _entry_head,
    _get_bytes,
    _get_int,
    _last_entry,
    _master_fast,
    _prev_entry,
    _seek_end,
    _seek_start,
    _skip_entry_data,
    node_counts,
)

# --------------------------------------------------------------------------------------------
# Reply-ready reads: listpack node -> RESP in one pass
# --------------------------------------------------------------------------------------------
#
# XRANGE/XREAD replies are arrays of ``[id, [f1, v1, ...]]``. Decoding a node into tuples and
# then encoding those costs two Python passes per entry; reading the node straight into RESP
# pieces costs one, and most per-value work becomes a table lookup: 7-bit and 13-bit integer
# elements map to their ready ``$len\r\ndigits`` bulk string, a 6-bit string element becomes
# a precomputed ``$len\r\n`` header plus a slice of the node, and the master fields of a
# SAMEFIELDS entry are encoded once per node. Arrays of bulk strings are the same bytes in
# RESP2 and RESP3. The general decoder (_fwd_node/_rev_node) stays the reference; tests
# compare the two on random nodes.

_RESP_U7 = tuple(b"$%d\r\n%d" % (len(b"%d" % i), i) for i in range(128))
# Indexed by the 13 payload bits of a 13-bit integer element (two's complement).
_RESP_I13 = tuple(
    b"$%d\r\n%d" % (len(b"%d" % v), v) for v in (u - 8192 if u >= 4096 else u for u in range(8192))
)
_RESP_SHDR = tuple(b"$%d\r\n" % n for n in range(64))
# "\r\n*2\r\n$<len>\r\n": what precedes an entry's ID (IDs are at most 41 bytes).
_RESP_ENTRY = tuple(b"\r\n*2\r\n$%d\r\n" % n for n in range(48))


def _resp_fields(fields: list[bytes]) -> list[bytes]:
    """What precedes each value of a SAMEFIELDS entry: ``\r\n$len\r\nfield\r\n``, the first
    one also carrying the entry's ``\r\n*2n`` array header."""
    pre = [b"\r\n$%d\r\n%b\r\n" % (len(f), f) for f in fields]
    hdr = b"\r\n*%d" % (2 * len(fields))
    if pre:
        pre[0] = hdr + pre[0]
    else:
        pre.append(hdr)
    return pre


def _resp_entry_at(
    lp: bytes, p: int, flags: int, ms: int, seq: int, nf: int, pre: list[bytes], app
) -> int:
    """Append the RESP pieces of the live entry whose data starts at ``p`` (just after its
    IDs); returns the offset of the next entry. Handles every element encoding."""
    idb = b"%d-%d" % (ms & MASK64, seq & MASK64)
    app(_RESP_ENTRY[len(idb)])
    app(idb)
    if flags & FLAG_SAMEFIELDS:
        if not nf:
            app(pre[0])
        for f in pre[:nf]:
            app(f)
            v, p = _get_bytes(lp, p)
            app(b"$%d\r\n" % len(v))
            app(v)
    else:
        n, p = _get_int(lp, p)
        app(b"\r\n*%d" % (n << 1))
        for _ in range(n << 1):
            v, p = _get_bytes(lp, p)
            app(b"\r\n$%d\r\n" % len(v))
            app(v)
    b = lp[p]
    return p + 2 if b < 128 else skip(lp, p)  # lp-count


def _fwd_node_resp(
    key: int, lp: bytes | bytearray, start: int, end: int, limit: int, out: list[bytes],
    marks: list[int] | None = None, sids: list[int] | None = None,
) -> tuple[int, bool, int]:
    """What ``_fwd_node`` (without tombstones) finds, as RESP: appends to ``out`` pieces
    that join into the entries' replies, each preceded by CRLF. Returns ``(entries, done,
    served)``: ``done`` means an entry past ``end`` or the ``limit`` (0 = none) was reached;
    no entry of the node after ``start`` and up to ``served`` is left unread. ``marks``
    gets the index in ``out`` where each entry's pieces begin, ``sids`` each entry's ID."""
    node = lp
    hint = _RESUME.get(id(node))
    if hint is not None and (hint[0] is not node or hint[4] != key):
        hint = None
    layout = hint[3] if hint is not None else None
    if type(lp) is not bytes:
        lp = bytes(lp)
    mms = key >> 64
    mseq = key & MASK64
    if layout is None:
        nf, fields, p0 = _master_fast(lp)
        pl = _last_entry(lp)
        last = _entry_head(lp, pl, mms, mseq)[1] if pl is not None else 0
        pre = _resp_fields(fields)
        if lp is node:  # immutable bytes: the layout holds for every later read
            layout = (nf, p0, last, pre)
    else:
        nf, p0, last, pre = layout
    p = p0
    if start > key:
        if hint is not None and hint[1] == start:
            p = p0 + hint[2]
        else:
            p = _seek_start(lp, key, start, p)
    endp = len(lp) - 1
    if p >= endp:
        return 0, False, end
    # Live IDs ascend inside a node and none exceeds the last entry's, so the start bound is
    # checked only until the first emitted entry and the end bound only if it cuts the node.
    check_start = start > key
    check_end = end < last
    # ID deltas are int64 casts of uint64 differences, so the sum can leave the uint64
    # range: 7-bit deltas only near its top (then every entry takes the masked, general
    # path); wider deltas are masked where they are read.
    wrap = mms > MASK64 - 128 or mseq > MASK64 - 128
    # The table-driven path: SAMEFIELDS entries whose lp-count (nf + 3) is one byte.
    fast = 0 < nf < 125 and not wrap
    app = out.append
    rshdr = _RESP_SHDR
    ru7 = _RESP_U7
    ri13 = _RESP_I13
    rent = _RESP_ENTRY
    sapp = sids.append if sids is not None else None
    n = 0
    while p < endp:
        flags = lp[p]
        if flags < 128:
            p += 2
        else:
            flags, p = _get_int(lp, p)
        b = lp[p]
        if b < 128:
            ms = mms + b
            p += 2
        elif 0xC0 <= b < 0xE0:
            u = ((b & 31) << 8) | lp[p + 1]
            ms = (mms + (u - 8192 if u >= 4096 else u)) & MASK64
            p += 3
        else:
            d, p = _get_int(lp, p)
            ms = (mms + d) & MASK64
        b = lp[p]
        if b < 128:
            seq = mseq + b
            p += 2
        elif 0xC0 <= b < 0xE0:  # 13-bit: sequence deltas of busy milliseconds
            u = ((b & 31) << 8) | lp[p + 1]
            seq = (mseq + (u - 8192 if u >= 4096 else u)) & MASK64
            p += 3
        else:
            d, p = _get_int(lp, p)
            seq = (mseq + d) & MASK64
        if flags & FLAG_DELETED:
            p = _skip_entry_data(lp, p, flags, nf)
            continue
        if check_start or check_end or wrap:
            sid = ((ms & MASK64) << 64) | (seq & MASK64)
            if sid < start:
                p = _skip_entry_data(lp, p, flags, nf)
                continue
            check_start = False
            if sid > end:
                return n, True, end
        if marks is not None:
            marks.append(len(out))
        if sapp is not None:
            # Without wrap, 7-bit deltas cannot leave the range (the others are masked).
            sapp(((ms & MASK64) << 64) | (seq & MASK64) if wrap else (ms << 64) | seq)
        if flags != FLAG_SAMEFIELDS or not fast:
            p = _resp_entry_at(lp, p, flags, ms, seq, nf, pre, app)
        else:
            idb = b"%d-%d" % (ms, seq)
            app(rent[len(idb)])
            app(idb)
            for f in pre:
                app(f)
                b = lp[p]
                if b < 128:
                    app(ru7[b])
                    p += 2
                elif b < 192:
                    q = p + 1 + (b & 63)
                    app(rshdr[b & 63])
                    app(lp[p + 1 : q])
                    p = q + 1
                elif b < 224:
                    app(ri13[((b & 31) << 8) | lp[p + 1]])
                    p += 3
                else:
                    v, p = _get_bytes(lp, p)
                    app(b"$%d\r\n" % len(v))
                    app(v)
            p += 2  # lp-count
        n += 1
        if n == limit:
            served = ((ms & MASK64) << 64) | (seq & MASK64)
            _note_resume(node, key, served + 1, p - p0, layout)
            return n, True, served
    if end >= last:
        _note_resume(node, key, last + 1, p - p0, layout)
    return n, False, min(end, last)


def _rev_node_resp(
    key: int, lp: bytes | bytearray, start: int, end: int, limit: int, out: list[bytes]
) -> tuple[int, bool]:
    """:func:`_fwd_node_resp` from the node's end backwards (as ``_rev_node``)."""
    if type(lp) is not bytes:
        lp = bytes(lp)
    if not limit or limit >= node_counts(lp)[0]:
        # The limit cannot cut the node: encode it forwards (cheaper than walking the
        # backlens entry by entry) and emit the entries last first. No node before this
        # one holds an ID >= its master ID, so the iteration is over if start is past it.
        pieces: list[bytes] = []
        marks: list[int] = []
        n = _fwd_node_resp(key, lp, start, end, 0, pieces, marks)[0]
        marks.append(len(pieces))
        ext = out.extend
        for j in range(n - 1, -1, -1):
            ext(pieces[marks[j] : marks[j + 1]])
        return n, start > key or n == limit > 0
    mms = key >> 64
    mseq = key & MASK64
    nf, fields, p0 = _master_fast(lp)
    pf = _last_entry(lp) if end >= ID_MAX else _seek_end(lp, key, end, p0, nf)
    pre = _resp_fields(fields)
    app = out.append
    n = 0
    while pf is not None:
        flags, sid, p = _entry_head(lp, pf, mms, mseq)
        if not flags & FLAG_DELETED and sid <= end:
            if sid < start:
                return n, True
            # At most ``limit`` entries of one node come this way: the general encoder.
            _resp_entry_at(lp, p, flags, sid >> 64, sid & MASK64, nf, pre, app)
            n += 1
            if n == limit:
                return n, True
        pf = _prev_entry(lp, pf)
    return n, False
