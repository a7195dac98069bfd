# cython: boundscheck=False, wraparound=False
"""A stream's nodes from an RDB image in one compiled loop: the start-up load's hot path.

A stream is stored as a run of (master ID, listpack) string pairs, the listpack usually
LZF-compressed. rdb._read_stream reads them one reader call per string, and for a
stream of 5M entries (50k nodes) that was most of the load: python-lzf's decoder
(21k instructions a node) and the reader's method calls around it. Compiled (setup.py,
nodes.pxd), ``read_nodes`` takes the common form of the run straight from the image:
raw 16-byte keys in strictly ascending order, listpacks raw or LZF-compressed, each
passing the shallow header checks a load without sanitize-dump-payload makes. It stops
before the first node that is anything else, and rdb's own loop goes on from there, so
every error is still raised, with its message and offset, by that loop alone.

Under the interpreter the same code runs (tests compare it with rdb's loop) but is not
used: a byte loop in Python is slower than python-lzf, so ``COMPILED`` tells rdb
whether to call it. The module-wide directives above drop Cython's index checks: every
read and write below is bounded by an explicit test first.
"""

from __future__ import annotations

__all__ = ["COMPILED", "read_nodes"]


def _probe() -> None:
    """Only its type matters: see COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing Cython).
COMPILED = type(_probe).__name__ != "function"


def _len_size(buf, p: int, end: int) -> int:  # noqa: ANN001 - a bytes buffer, typed in nodes.pxd
    """How many bytes the RDB length at ``p`` takes (0: none fits there, or it is an
    encoded-string marker)."""
    if p >= end:
        return 0
    b = buf[p]
    if b < 0x40:
        n = 1
    elif b < 0x80:
        n = 2
    elif b == 0x80:
        n = 5
    elif b == 0x81:
        n = 9
    else:
        return 0
    return n if p + n <= end else 0


def _len_at(buf, p: int, n: int) -> int:  # noqa: ANN001
    """The RDB length of ``n`` bytes (from _len_size) at ``p``; -1 if it passes 2**62."""
    b = buf[p]
    if n == 1:
        return b
    if n == 2:
        return ((b & 0x3F) << 8) | buf[p + 1]
    v = 0
    for i in range(1, n):
        if v >> 54:
            return -1  # no image holds such a string; rdb's loop reports it
        v = (v << 8) | buf[p + i]
    return v


def _expand(buf, p: int, clen: int, ulen: int) -> bytes | None:  # noqa: ANN001
    """LZF-decode ``buf[p:p + clen]`` into exactly ``ulen`` bytes; None if it does not
    (malformed, or another length: the caller's slower path then says why)."""
    if ulen <= 0:
        return None
    out = bytearray(ulen)
    dst = out
    ip = p
    iend = p + clen
    op = 0
    while ip < iend:
        ctrl = buf[ip]
        ip += 1
        if ctrl < 32:
            n = ctrl + 1
            if op + n > ulen or ip + n > iend:
                return None
            for k in range(n):
                dst[op + k] = buf[ip + k]
            op += n
            ip += n
        else:
            n = ctrl >> 5
            if ip >= iend:
                return None
            if n == 7:
                n += buf[ip]
                ip += 1
                if ip >= iend:
                    return None
            ref = op - ((ctrl & 0x1F) << 8) - 1 - buf[ip]
            ip += 1
            n += 2
            if op + n > ulen or ref < 0:
                return None
            for k in range(n):  # byte by byte: a reference may overlap what it writes
                dst[op + k] = dst[ref + k]
            op += n
    if op != ulen:
        return None
    return bytes(out)


def read_nodes(data: bytes, pos: int, count: int, prev: int, keys: list, lps: list) -> int:
    """Take up to ``count`` nodes of a stream from ``data`` at ``pos``, keys above
    ``prev``: each key (an int) goes to ``keys`` and its listpack to ``lps``. Returns
    the position after the last node taken; ``len(keys)`` says how many were."""
    buf = data
    end = len(data)
    taken = 0
    while taken < count:
        # the key: a raw string of exactly 16 bytes
        if pos + 17 > end or buf[pos] != 16:
            break
        key = int.from_bytes(data[pos + 1:pos + 17], "big")
        if key <= prev:
            break
        p = pos + 17
        if p >= end:
            break
        if buf[p] >= 0xC0:
            if buf[p] != 0xC3:  # an int-encoded string: never a listpack
                break
            p += 1
            s = _len_size(buf, p, end)
            if not s:
                break
            clen = _len_at(buf, p, s)
            p += s
            s = _len_size(buf, p, end)
            if not s:
                break
            ulen = _len_at(buf, p, s)
            p += s
            if clen < 0 or ulen < 0 or clen > end - p:
                break
            lp = _expand(buf, p, clen, ulen)
            if lp is None:
                break
            p += clen
        else:
            s = _len_size(buf, p, end)
            if not s:
                break
            n = _len_at(buf, p, s)
            p += s
            if n < 0 or n > end - p:
                break
            lp = data[p:p + n]
            p += n
        # the checks rdb makes of a listpack without sanitize-dump-payload
        n = len(lp)
        q = lp
        if n < 7 or q[n - 1] != 0xFF or q[6] == 0xFF:
            break
        if q[0] != (n & 0xFF) or q[1] != ((n >> 8) & 0xFF) or q[2] != ((n >> 16) & 0xFF) or q[3] != (n >> 24):
            break  # the total-bytes header (little-endian) is not the listpack's size
        keys.append(key)
        lps.append(lp)
        prev = key
        pos = p
        taken += 1
    return pos
