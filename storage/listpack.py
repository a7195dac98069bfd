"""Redis listpack byte format, bit-exact with Redis 7 (listpack.c).

Stream nodes, RDB payloads and (later) small hashes/sets/zsets are listpacks, so the bytes
we build must be the bytes Redis builds: an RDB writer stores them verbatim and Redis loads
them, and vice versa.  The layout is

    <u32 total-bytes LE> <u16 element-count LE> <element>* <0xFF>

and every element is ``<encoding+data><backlen>``, where backlen (1..5 bytes) encodes the
size of ``<encoding+data>`` so the list can be walked right to left.

Speed matters (XADD appends to a listpack on every call), so this module works on plain
``bytes``/``bytearray`` with offsets instead of element objects, precomputes the encodings
of small integers and string headers, and keeps the common encodings (7-bit uint, 6-bit
string) on short inline paths.  Offsets ("p") always point at the first byte of an element,
exactly like Redis's ``unsigned char *p``.

Values come back as ``int`` for integer encodings and as slices (same type as the listpack
passed in) for strings; :func:`value_bytes` turns an int into its decimal string, which is
what Redis's ``lpGet`` with an int buffer returns.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "LP_HDR_SIZE",
    "LP_EOF",
    "LP_HDR_NUMELE_UNKNOWN",
    "LISTPACK_MAX_SAFETY_SIZE",
    "EMPTY",
    "INT64_MIN",
    "INT64_MAX",
    "ListpackError",
    "string_to_int64",
    "encode_backlen",
    "backlen_size",
    "decode_backlen",
    "encode_int",
    "encode_string",
    "int_element",
    "string_element",
    "element",
    "value_bytes",
    "new",
    "build",
    "pack",
    "unpack",
    "append",
    "append_int",
    "total_bytes",
    "num_elements",
    "length",
    "first",
    "next_offset",
    "prev_offset",
    "last",
    "element_size",
    "get",
    "skip",
    "iterate",
    "iterate_reverse",
    "elements",
    "replace_int",
    "validate",
    "validate_next",
]

LP_HDR_SIZE = 6
LP_EOF = 0xFF
LP_HDR_NUMELE_UNKNOWN = 0xFFFF
LISTPACK_MAX_SAFETY_SIZE = 1 << 30
EMPTY = b"\x07\x00\x00\x00\x00\x00\xff"

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_MASK64 = (1 << 64) - 1

_HDR = struct.Struct("<IH")
_U32 = struct.Struct("<I")


class ListpackError(ValueError):
    """Raised when bytes that should be a listpack element are not one."""


# --------------------------------------------------------------------------------------------
# String -> integer choice (lpStringToInt64)
# --------------------------------------------------------------------------------------------


def string_to_int64(s: bytes) -> int | None:
    """Return the int64 ``s`` spells canonically, else None.

    Mirrors lpStringToInt64: 1..20 bytes, optional '-', no '+', no spaces, no leading zeros
    ("0" itself is fine, "-0" is not), and the value must fit in int64.  Only such strings
    are stored with integer encodings, so decoding gives back exactly the original bytes.
    This is storage's one strict integer parse (intsets and quicklist sizing use it too);
    it is Redis's string2ll, kept apart from ``rill.protocol.numbers`` only because storage
    imports no other package (tests/protocol/test_numbers.py checks that they agree).
    """
    n = len(s)
    if n == 0 or n > 20:
        return None
    c = s[0]
    if 49 <= c <= 57:  # '1'..'9'
        if not s.isdigit():
            return None
        v = int(s)
        return v if v <= INT64_MAX else None
    if c == 48:  # '0'
        return 0 if n == 1 else None
    if c == 45 and n > 1 and 49 <= s[1] <= 57:  # '-' then '1'..'9'
        digits = s[1:]
        if not digits.isdigit():
            return None
        v = -int(digits)
        return v if v >= INT64_MIN else None
    return None


# A 256-entry table answering "could a string starting with this byte be an integer?":
# lets the append path reject ordinary strings with one index operation.
_NUMSTART = tuple(c == 45 or 48 <= c <= 57 for c in range(256))


# --------------------------------------------------------------------------------------------
# backlen
# --------------------------------------------------------------------------------------------


def backlen_size(l: int) -> int:  # noqa: E741 - Redis's name for the length
    """Bytes needed for the backlen of an element whose encoding+data is ``l`` bytes.

    The thresholds are Redis's, including the odd ``<`` comparisons (16383 takes 3 bytes).
    """
    if l <= 127:
        return 1
    if l < 16383:
        return 2
    if l < 2097151:
        return 3
    if l < 268435455:
        return 4
    return 5


def encode_backlen(l: int) -> bytes:  # noqa: E741
    """Encode the backlen of an ``l``-byte encoding+data part, in file order."""
    if l <= 127:
        return bytes((l,))
    if l < 16383:
        return bytes((l >> 7, (l & 127) | 128))
    if l < 2097151:
        return bytes((l >> 14, ((l >> 7) & 127) | 128, (l & 127) | 128))
    if l < 268435455:
        return bytes((l >> 21, ((l >> 14) & 127) | 128, ((l >> 7) & 127) | 128, (l & 127) | 128))
    return bytes(
        (
            (l >> 28) & 0xFF,
            ((l >> 21) & 127) | 128,
            ((l >> 14) & 127) | 128,
            ((l >> 7) & 127) | 128,
            (l & 127) | 128,
        )
    )


def decode_backlen(buf: bytes | bytearray, p_last: int) -> tuple[int, int]:
    """Decode the backlen whose last (rightmost) byte is at ``p_last``.

    Returns ``(length, number_of_backlen_bytes)``; raises ListpackError when more than five
    bytes would be needed or the walk leaves the buffer (lpDecodeBacklen's UINT64_MAX case).
    """
    val = 0
    shift = 0
    p = p_last
    while True:
        if p < 0:
            raise ListpackError("backlen runs off the start of the listpack")
        b = buf[p]
        val |= (b & 127) << shift
        if not b & 128:
            return val, p_last - p + 1
        shift += 7
        p -= 1
        if shift > 28:
            raise ListpackError("backlen longer than 5 bytes")


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def encode_int(v: int) -> bytes:
    """Encoding+data for integer ``v`` in the smallest form (lpEncodeIntegerGetType)."""
    if 0 <= v <= 127:
        return bytes((v,))
    if -4096 <= v <= 4095:
        u = v & 0x1FFF
        return bytes((0xC0 | (u >> 8), u & 0xFF))
    if -32768 <= v <= 32767:
        return b"\xf1" + (v & 0xFFFF).to_bytes(2, "little")
    if -8388608 <= v <= 8388607:
        return b"\xf2" + (v & 0xFFFFFF).to_bytes(3, "little")
    if -2147483648 <= v <= 2147483647:
        return b"\xf3" + (v & 0xFFFFFFFF).to_bytes(4, "little")
    if INT64_MIN <= v <= INT64_MAX:
        return b"\xf4" + (v & _MASK64).to_bytes(8, "little")
    raise OverflowError("listpack integers are int64")


def encode_string(s: bytes) -> bytes:
    """Encoding+data for ``s`` stored as a string (no integer check)."""
    n = len(s)
    if n < 64:
        return bytes((0x80 | n,)) + s
    if n < 4096:
        return bytes((0xE0 | (n >> 8), n & 0xFF)) + s
    return b"\xf0" + _U32.pack(n) + s


def _int_element_uncached(v: int) -> bytes:
    """Full element for an int outside the 13-bit range: encoding byte, little-endian
    payload and 1-byte backlen, assembled as one integer and emitted with one to_bytes."""
    if -32768 <= v <= 32767:
        return (0x030000F1 | ((v & 0xFFFF) << 8)).to_bytes(4, "little")
    if -8388608 <= v <= 8388607:
        return (0x04000000F2 | ((v & 0xFFFFFF) << 8)).to_bytes(5, "little")
    if -2147483648 <= v <= 2147483647:
        return (0x0500000000F3 | ((v & 0xFFFFFFFF) << 8)).to_bytes(6, "little")
    if INT64_MIN <= v <= INT64_MAX:
        return (0xF4 | ((v & _MASK64) << 8) | (9 << 72)).to_bytes(10, "little")
    if 0 <= v <= 127 or -4096 <= v <= 4095:
        enc = encode_int(v)
        return enc + bytes((len(enc),))
    raise OverflowError("listpack integers are int64")


# Full elements (with backlen) for every 7-bit and 13-bit integer: stream nodes store
# flags, ID deltas, counters and lp-counts, nearly always in this range.
_SMALL_INT_MIN = -4096
_SMALL_INT_MAX = 4095
_SMALL_INT_ELEM = tuple(
    encode_int(v) + bytes((len(encode_int(v)),)) for v in range(_SMALL_INT_MIN, _SMALL_INT_MAX + 1)
)
# Header byte and backlen byte of 6-bit strings, indexed by length.
_STR6_HDR = tuple(bytes((0x80 | n,)) for n in range(64))
_STR6_BL = tuple(bytes((n + 1,)) for n in range(64))


def int_element(v: int) -> bytes:
    """Full element (encoding, data, backlen) for integer ``v`` (lpAppendInteger)."""
    if _SMALL_INT_MIN <= v <= _SMALL_INT_MAX:
        return _SMALL_INT_ELEM[v - _SMALL_INT_MIN]
    return _int_element_uncached(v)


def string_element(s: bytes) -> bytes:
    """Full element for ``s`` forced to a string encoding."""
    n = len(s)
    if n < 64:
        return _STR6_HDR[n] + s + _STR6_BL[n]
    enc_len = n + 2 if n < 4096 else n + 5
    return encode_string(s) + encode_backlen(enc_len)


def element(value: bytes | int) -> bytes:
    """Full element for a value as lpAppend stores it.

    Strings that spell a canonical int64 become integer encodings (so b"12" and 12 give
    the same bytes); everything else is a 6/12/32-bit string.
    """
    if isinstance(value, int):
        return int_element(value)
    n = len(value)
    if n and n <= 20:
        c = value[0]
        if 49 <= c <= 57:  # fast path for positive canonical integers
            if value.isdigit():
                v = int(value)
                if v <= _SMALL_INT_MAX:
                    return _SMALL_INT_ELEM[v - _SMALL_INT_MIN]
                if v <= INT64_MAX:
                    return _int_element_uncached(v)
        elif c == 45 or c == 48:
            v = string_to_int64(value)
            if v is not None:
                return int_element(v)
    if n < 64:
        return _STR6_HDR[n] + value + _STR6_BL[n]
    return string_element(value)


# Decimal strings of small ints: decoding integer elements to bytes is then a table lookup.
_INTSTR_MAX = 10000
_INTSTR = tuple(b"%d" % i for i in range(_INTSTR_MAX))


def value_bytes(v: bytes | bytearray | int) -> bytes:
    """A decoded element as bytes: ints become their decimal string (lpGet with intbuf)."""
    if isinstance(v, int):
        if 0 <= v < _INTSTR_MAX:
            return _INTSTR[v]
        return b"%d" % v
    return bytes(v)


# --------------------------------------------------------------------------------------------
# Building and appending
# --------------------------------------------------------------------------------------------


def new() -> bytearray:
    """An empty listpack (lpNew): ``07 00 00 00 00 00 FF``."""
    return bytearray(EMPTY)


def _set_header(lp: bytearray, count: int) -> None:
    _HDR.pack_into(
        lp, 0, len(lp), count if count < LP_HDR_NUMELE_UNKNOWN else LP_HDR_NUMELE_UNKNOWN
    )


def build(values: Iterable[bytes | int]) -> bytearray:
    """A listpack holding ``values`` in order (as repeated lpAppend would build it)."""
    lp = bytearray(EMPTY[:LP_HDR_SIZE])
    n = 0
    for v in values:
        lp += element(v)
        n += 1
    lp.append(LP_EOF)
    _set_header(lp, n)
    return lp


_NO_LIMIT = 1 << 62  # pack()'s default budget and threshold: none


def pack(values: Sequence[bytes], budget: int = _NO_LIMIT, threshold: int = _NO_LIMIT) -> bytes | None:
    """A listpack of ``values`` (as lpAppend builds it), short non-numeric strings inlined;
    None as soon as their total length passes ``budget`` or one of them reaches
    ``threshold`` (a caller's limits, checked in the same pass).

    :func:`build` for a whole collection at once: the RDB writer's listpacks (lists,
    hashes, sorted sets) come from here, so it joins parts once instead of growing a buffer.
    """
    parts: list[bytes] = []
    add = parts.append
    numstart = _NUMSTART
    hdr = _STR6_HDR
    bl = _STR6_BL
    encode = element
    total = 0
    for v in values:
        n = len(v)
        total += n
        if total > budget or n >= threshold:
            return None
        if n < 64 and (not n or not numstart[v[0]]):
            add(hdr[n])
            add(v)
            add(bl[n])
        else:
            add(encode(v))
    body = b"".join(parts)
    count = len(values)
    return _HDR.pack(len(body) + 7, count if count < 65535 else 65535) + body + b"\xff"


def _append_element(lp: bytearray, ele: bytes) -> None:
    if len(lp) + len(ele) > 0xFFFFFFFF:
        raise OverflowError("listpack larger than 4 GiB")
    numele = lp[4] | (lp[5] << 8)
    lp[-1:] = ele
    lp.append(LP_EOF)
    if numele != LP_HDR_NUMELE_UNKNOWN:
        numele += 1
    _HDR.pack_into(lp, 0, len(lp), numele)


def append(lp: bytearray, value: bytes | int) -> None:
    """Append one value in place (lpAppend / lpAppendInteger), updating the header.

    The header count saturates at 65535 ("unknown") and then stays there, as in Redis.
    """
    _append_element(lp, element(value))


def append_int(lp: bytearray, v: int) -> None:
    """Append an integer in place (lpAppendInteger)."""
    _append_element(lp, int_element(v))


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


def total_bytes(lp: bytes | bytearray) -> int:
    """Header total-bytes field (lpGetTotalBytes)."""
    return _U32.unpack_from(lp, 0)[0]


def num_elements(lp: bytes | bytearray) -> int:
    """Header element count; 65535 means "unknown, scan" (lpGetNumElements)."""
    return lp[4] | (lp[5] << 8)


def length(lp: bytes | bytearray) -> int:
    """Real number of elements: the header count unless it is 65535 (lpLength)."""
    n = lp[4] | (lp[5] << 8)
    if n != LP_HDR_NUMELE_UNKNOWN:
        return n
    count = 0
    p = LP_HDR_SIZE
    end = len(lp) - 1
    while p < end:
        p = skip(lp, p)
        count += 1
    return count


def element_size(lp: bytes | bytearray, p: int) -> int:
    """Size of the encoding+data part of the element at ``p`` (lpCurrentEncodedSizeUnsafe).

    Raises ListpackError for the invalid encodings 0xF5..0xFE; EOF has size 1.
    """
    b = lp[p]
    if b < 0x80:
        return 1
    if b < 0xC0:
        return 1 + (b & 0x3F)
    if b < 0xE0:
        return 2
    if b < 0xF0:
        return 2 + (((b & 0x0F) << 8) | lp[p + 1])
    if b == 0xF0:
        return 5 + _U32.unpack_from(lp, p + 1)[0]
    if b == 0xF1:
        return 3
    if b == 0xF2:
        return 4
    if b == 0xF3:
        return 5
    if b == 0xF4:
        return 9
    if b == LP_EOF:
        return 1
    raise ListpackError(f"invalid listpack encoding byte 0x{b:02x}")


def skip(lp: bytes | bytearray, p: int) -> int:
    """Offset of the element after the one at ``p`` (lpSkip); may be the EOF offset."""
    b = lp[p]
    if b < 0x80:
        return p + 2
    if b < 0xC0:
        return p + (b & 0x3F) + 2
    l = element_size(lp, p)  # noqa: E741
    return p + l + backlen_size(l)


def get(lp: bytes | bytearray, p: int) -> tuple[bytes | bytearray | int, int]:
    """Decode the element at ``p``: ``(value, offset_of_next_element)`` (lpGet).

    Integers come back as int; strings as a slice of ``lp`` (bytes for bytes input).
    """
    b = lp[p]
    if b < 0x80:
        return b, p + 2
    if b < 0xC0:
        n = b & 0x3F
        q = p + 1 + n
        return lp[p + 1 : q], q + 1
    if b < 0xE0:
        u = ((b & 0x1F) << 8) | lp[p + 1]
        return (u - 8192 if u >= 4096 else u), p + 3
    if b < 0xF0:
        n = ((b & 0x0F) << 8) | lp[p + 1]
        q = p + 2 + n
        return lp[p + 2 : q], q + (1 if n + 2 <= 127 else 2)
    if b == 0xF1:
        return int.from_bytes(lp[p + 1 : p + 3], "little", signed=True), p + 4
    if b == 0xF2:
        return int.from_bytes(lp[p + 1 : p + 4], "little", signed=True), p + 5
    if b == 0xF3:
        return int.from_bytes(lp[p + 1 : p + 5], "little", signed=True), p + 6
    if b == 0xF4:
        return int.from_bytes(lp[p + 1 : p + 9], "little", signed=True), p + 10
    if b == 0xF0:
        n = _U32.unpack_from(lp, p + 1)[0]
        q = p + 5 + n
        return lp[p + 5 : q], q + backlen_size(n + 5)
    if b == LP_EOF:
        raise ListpackError("read past the last element")
    raise ListpackError(f"invalid listpack encoding byte 0x{b:02x}")


def first(lp: bytes | bytearray) -> int | None:
    """Offset of the first element, or None if empty (lpFirst)."""
    return None if lp[LP_HDR_SIZE] == LP_EOF else LP_HDR_SIZE


def next_offset(lp: bytes | bytearray, p: int) -> int | None:
    """Offset of the element after ``p``, or None at the end (lpNext)."""
    q = skip(lp, p)
    return None if lp[q] == LP_EOF else q


def prev_offset(lp: bytes | bytearray, p: int) -> int | None:
    """Offset of the element before ``p`` (``p`` may be the EOF offset), or None (lpPrev)."""
    if p == LP_HDR_SIZE:
        return None
    b = lp[p - 1]
    if b < 128:
        return p - 1 - b
    l, nb = decode_backlen(lp, p - 1)  # noqa: E741
    return p - nb - l


def last(lp: bytes | bytearray) -> int | None:
    """Offset of the last element, or None if empty (lpLast)."""
    return prev_offset(lp, len(lp) - 1)


def iterate(lp: bytes | bytearray) -> Iterator[bytes | int]:
    """Values front to back (ints as int, strings as bytes)."""
    if not isinstance(lp, bytes):
        lp = bytes(lp)
    p = LP_HDR_SIZE
    end = len(lp) - 1
    while p < end:
        v, p = get(lp, p)
        yield v


def iterate_reverse(lp: bytes | bytearray) -> Iterator[bytes | int]:
    """Values back to front, walking the backlens as Redis's lpPrev does."""
    if not isinstance(lp, bytes):
        lp = bytes(lp)
    p = prev_offset(lp, len(lp) - 1)
    while p is not None:
        yield get(lp, p)[0]
        p = prev_offset(lp, p)


def elements(lp: bytes | bytearray) -> list[bytes | int]:
    """All values as a list (ints as int, strings as bytes)."""
    return list(iterate(lp))


def unpack(lp: bytes) -> list[bytes] | None:
    """Every element of a listpack as bytes, or None if the blob is not a sound listpack.

    The walk checks what decoding relies on: the header size, every element's
    encoding and extent, that the last element ends exactly at the EOF byte and
    that the header count matches (backlens are not needed once decoded).
    """
    n = len(lp)
    if n < 7 or lp[n - 1] != 0xFF or int.from_bytes(lp[0:4], "little") != n:
        return None
    last = n - 1
    out: list[bytes] = []
    add = out.append
    intstr = _INTSTR
    p = 6
    while p < last:
        b = lp[p]
        if b < 0x80:
            add(intstr[b])
            p += 2
        elif b < 0xC0:
            q = p + 1 + (b & 0x3F)
            add(lp[p + 1 : q])
            p = q + 1
        elif b < 0xE0:
            u = ((b & 0x1F) << 8) | lp[p + 1]
            add(b"%d" % (u - 8192 if u >= 4096 else u))
            p += 3
        elif b < 0xF0:
            ln = ((b & 0x0F) << 8) | lp[p + 1]
            q = p + 2 + ln
            add(lp[p + 2 : q])
            p = q + (1 if ln + 2 <= 127 else 2)
        elif b == 0xF0:
            ln = int.from_bytes(lp[p + 1 : p + 5], "little")
            q = p + 5 + ln
            add(lp[p + 5 : q])
            p = q + backlen_size(ln + 5)
        elif b <= 0xF4:
            w = (2, 3, 4, 8)[b - 0xF1]
            add(b"%d" % int.from_bytes(lp[p + 1 : p + 1 + w], "little", signed=True))
            p += w + 2
        else:
            return None
    if p != last:
        return None
    count = lp[4] | (lp[5] << 8)
    if count != 65535 and count != len(out):
        return None
    return out


# --------------------------------------------------------------------------------------------
# In-place integer replacement (lpReplaceInteger)
# --------------------------------------------------------------------------------------------


def replace_int(lp: bytearray, p: int, v: int) -> int:
    """Replace the element at ``p`` with integer ``v``; return the change in size.

    Same-size replacements (the common case: flags, counters) overwrite the bytes in place;
    otherwise the tail of the listpack moves (bytearray slice assignment) and the header's
    total-bytes is updated.  The element count does not change.
    """
    old_len = element_size(lp, p)
    old_total = old_len + backlen_size(old_len)
    ele = int_element(v)
    if len(ele) == old_total:
        lp[p : p + old_total] = ele
        return 0
    lp[p : p + old_total] = ele
    _U32.pack_into(lp, 0, len(lp))
    return len(ele) - old_total


# --------------------------------------------------------------------------------------------
# Validation (lpValidateIntegrity / lpValidateNext)
# --------------------------------------------------------------------------------------------


def _encoded_size_bytes(b: int) -> int:
    """lpCurrentEncodedSizeBytes: bytes needed to read an element's size; 0 if invalid."""
    if b < 0xE0:
        return 1  # 7-bit uint, 6-bit str, 13-bit int
    if b < 0xF0:
        return 2
    if b == 0xF0:
        return 5
    if b <= 0xF4 or b == LP_EOF:
        return 1
    return 0


def validate_next(lp: bytes | bytearray, p: int, size: int) -> int | None:
    """Check the element at ``p`` fits inside a ``size``-byte listpack and its backlen agrees.

    Returns the offset of the next element (possibly the EOF offset), -1 if ``p`` is the EOF
    itself, or None when the element is invalid (lpValidateNext).
    """
    last_ok = size - 1
    if p < LP_HDR_SIZE or p > last_ok:
        return None
    b = lp[p]
    if b == LP_EOF:
        return -1
    lenbytes = _encoded_size_bytes(b)
    if not lenbytes or p + lenbytes > last_ok:
        return None
    l = element_size(lp, p)  # noqa: E741
    bl = backlen_size(l)
    q = p + l + bl
    if q > last_ok:
        return None
    try:
        prevlen, _ = decode_backlen(lp, q - 1)
    except ListpackError:
        return None
    if prevlen + bl != l + bl:
        return None
    return q


def validate(lp: bytes | bytearray, deep: bool = False) -> bool:
    """Integrity check as Redis runs it on RDB/RESTORE payloads (lpValidateIntegrity).

    Shallow: at least 7 bytes, header total-bytes equals the blob size, last byte is EOF.
    Deep: additionally walk every element, checking each stays inside the blob and its
    backlen matches, that the walk ends exactly on the EOF byte, and that the header count
    matches unless it is 65535.
    """
    size = len(lp)
    if size < LP_HDR_SIZE + 1:
        return False
    if _U32.unpack_from(lp, 0)[0] != size:
        return False
    if lp[size - 1] != LP_EOF:
        return False
    if not deep:
        return True
    numele = lp[4] | (lp[5] << 8)
    count = 0
    p = LP_HDR_SIZE
    while lp[p] != LP_EOF:
        q = validate_next(lp, p, size)
        if q is None:
            return False
        p = q
        count += 1
    if p != size - 1:
        return False
    if numele != LP_HDR_NUMELE_UNKNOWN and numele != count:
        return False
    return True
