"""Stream entries as RESP: the ``[id, [f1, v1, ...]]`` arrays of XRANGE, XREAD and friends.

Arrays of bulk strings are the same bytes in RESP2 and RESP3, so one encoding serves both.
Two ways in, the same bytes out:

- :func:`encode_entry` / :func:`entries_bytes` encode decoded entries ``(id, [f, v, ...])``
  (IDs in storage's int form ``ms << 64 | seq``).
- :data:`RESP_ENTRIES` feeds storage's one-pass node readers
  (:mod:`rill.storage.stream.fastread`), which walk a listpack node and append the pieces
  that join into entry replies, each entry preceded by CRLF.  Storage hands over plain values
  (ID text, field names, values, small integers) and takes the pieces from here, so the wire
  format is spelled only in this package; the tables turn most values into a lookup.
"""

from __future__ import annotations

_MASK64 = (1 << 64) - 1

_HDR = [b"$%d" % n for n in range(1024)]
_ARR = [b"*%d" % n for n in range(1024)]
_E2 = b"*2\r\n$%d\r\n%b\r\n*2\r\n$%d\r\n%b\r\n$%d\r\n%b"
_E4 = b"*2\r\n$%d\r\n%b\r\n*4\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b"


def encode_entry(sid: int, fv: list[bytes]) -> bytes:
    """``*2 [id, *2n [f, v, ...]]`` as RESP bytes, without the trailing CRLF."""
    idb = b"%d-%d" % (sid >> 64, sid & _MASK64)
    n = len(fv)
    if n == 4:
        a, b, c, d = fv
        return _E4 % (len(idb), idb, len(a), a, len(b), b, len(c), c, len(d), d)
    if n == 2:
        a, b = fv
        return _E2 % (len(idb), idb, len(a), a, len(b), b)
    parts = [b"*2", _HDR[len(idb)], idb, _ARR[n] if n < 1024 else b"*%d" % n]
    ext = parts.extend
    for x in fv:
        m = len(x)
        ext((_HDR[m] if m < 1024 else b"$%d" % m, x))
    return b"\r\n".join(parts)


def entries_bytes(ents: list) -> bytes:
    """An array of entries (no trailing CRLF), encoded afresh."""
    n = len(ents)
    if not n:
        return b"*0"
    parts = [_ARR[n] if n < 1024 else b"*%d" % n]
    parts += [encode_entry(sid, fv) for sid, fv in ents]
    return b"\r\n".join(parts)


def array_head(n: int) -> bytes:
    """The header of an array of ``n`` entries (what the joined pieces follow)."""
    return _ARR[n] if n < 1024 else b"*%d" % n


class EntryPieces:
    """The pieces a one-pass node reader appends, entry by entry (see the module docstring).

    An entry is ``id_heads[len(id_text)]``, the ID text, then either (entries with the node's
    master fields) for each field ``field_heads(fields)[i]`` followed by the value's piece,
    or (entries with their own fields) one :meth:`fields_values` piece.  A value's piece is
    ``ints[v & 0x1FFF]`` for an integer ``-4096 <= v < 4096``, else a head followed by the
    bytes: ``str_heads[len(s)]`` for a string shorter than 64 bytes, else :meth:`value_head`.
    """

    __slots__ = ("id_heads", "ints", "str_heads")

    def __init__(self) -> None:
        # What precedes an entry's ID: CRLF, the entry's array header, the ID's bulk header
        # (IDs are at most 41 bytes).
        self.id_heads = tuple(b"\r\n*2\r\n$%d\r\n" % n for n in range(48))
        # Integers -4096..4095 as complete bulk strings, indexed by their 13 low bits
        # (two's complement), so 0..127 index themselves.
        self.ints = tuple(
            b"$%d\r\n%d" % (len(b"%d" % v), v)
            for v in (u - 8192 if u >= 4096 else u for u in range(8192))
        )
        self.str_heads = tuple(b"$%d\r\n" % n for n in range(64))

    @staticmethod
    def field_heads(fields: list[bytes]) -> list[bytes]:
        """What precedes each value of an entry with these fields: ``\\r\\n$len\\r\\nfield\\r\\n``,
        the first one also carrying the entry's ``\\r\\n*2n`` array header; with no fields,
        the one piece that opens the empty array."""
        pre = [b"\r\n$%d\r\n%b\r\n" % (len(f), f) for f in fields]
        hdr = b"\r\n*%d" % (2 * len(fields))
        if pre:
            pre[0] = hdr + pre[0]
        else:
            pre.append(hdr)
        return pre

    @staticmethod
    def value_head(n: int) -> bytes:
        """What precedes a value of ``n`` bytes after its field's head: a bulk header."""
        return b"$%d\r\n" % n

    @staticmethod
    def fields_values(fv: list[bytes]) -> bytes:
        """The field/value array of an entry with fields of its own."""
        return b"\r\n*%d" % len(fv) + b"".join([b"\r\n$%d\r\n%b" % (len(x), x) for x in fv])


RESP_ENTRIES = EntryPieces()
