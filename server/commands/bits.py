"""Bit operations on strings: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD.

Semantics follow Redis 7.0's bitops.c: bit 0 is the most significant bit of the
first byte; SETBIT grows the string with zero bytes; BITCOUNT and BITPOS take
byte ranges, or bit ranges with BIT, with negative indexes from the end; a
missing key is an empty string (for BITPOS an endless run of zeros). Counting
and searching run on whole byte strings in C (``int.bit_count``, ``bytes.find``
style scans), never bit by bit in Python.
"""

from __future__ import annotations

from rill.protocol.reply import ReplyError

from ..client import Client
from .args import NOT_INT, SYNTAX_ERR, WRONGTYPE, string2ll
from .strings import wrote
from .table import command

BAD_OFFSET = ReplyError("ERR bit offset is not an integer or out of range")
BAD_BIT = ReplyError("ERR bit is not an integer or out of range")
BITPOS_BAD_BIT = ReplyError("ERR The bit argument must be 1 or 0.")
NOT_SINGLE = ReplyError("ERR BITOP NOT must be called with a single source key.")


def _offset(c: Client, arg: bytes) -> int:
    """A bit offset: a non-negative integer addressing a byte below proto-max-bulk-len."""
    v = string2ll(arg)
    if v is None or v < 0 or (c.id >= 0 and (v >> 3) >= c.server.proto_max_bulk_len):
        raise BAD_OFFSET
    return v


def _read(c: Client, key: bytes) -> bytes | bytearray | None:
    value = c.db.lookup_read(key)
    if value is not None and type(value) is not bytes and type(value) is not bytearray:
        raise WRONGTYPE
    return value


def _writable(c: Client, key: bytes, last_bit: int) -> tuple[bytearray, bool]:
    """lookupStringForBitCommand: the string at ``key`` as a bytearray long enough for
    ``last_bit`` (created, or zero-padded, as needed) and whether it was created or grew."""
    db = c.db
    size = (last_bit >> 3) + 1
    value = db.lookup(key)
    if value is None:
        buf = bytearray(size)
        db.set(key, buf)
        return buf, True
    t = type(value)
    if t is bytearray:
        buf = value
    elif t is bytes:
        buf = bytearray(value)
        db.data[key] = buf  # unshared: same key, TTL kept
        if db.unshared:
            db.unshared.pop(key, None)
    else:
        raise WRONGTYPE
    if len(buf) >= size:
        return buf, False
    buf.extend(bytes(size - len(buf)))
    return buf, True


@command("setbit")
def setbit(c: Client, argv: list[bytes]):
    offset = _offset(c, argv[2])
    on = string2ll(argv[3])
    if on is None or on & ~1:
        raise BAD_BIT
    key = argv[1]
    value, changed = _writable(c, key, offset)
    byte = offset >> 3
    mask = 0x80 >> (offset & 7)
    old = 1 if value[byte] & mask else 0
    if changed or old != on:
        value[byte] = (value[byte] | mask) if on else (value[byte] & ~mask)
        wrote(c, key, b"setbit")
    return old


@command("getbit")
def getbit(c: Client, argv: list[bytes]):
    offset = _offset(c, argv[2])
    value = _read(c, argv[1])
    byte = offset >> 3
    if value is None or byte >= len(value):
        return 0
    return 1 if value[byte] & (0x80 >> (offset & 7)) else 0


def _range(argv: list[bytes], start_i: int, end_i: int | None, unit_i: int, length: int
           ) -> tuple[int, int, int, int] | None:
    """Parse ``start [end [BIT|BYTE]]``: ``(first_byte, last_byte, head_mask, tail_mask)``
    with the masks clearing bits outside a BIT range, or None for an empty range.

    ``end_i`` None means no end argument (BITPOS): the range runs to the end.
    """
    start = string2ll(argv[start_i])
    if start is None:
        raise NOT_INT
    bit_unit = False
    if len(argv) > unit_i:
        unit = argv[unit_i].lower()
        if unit == b"bit":
            bit_unit = True
        elif unit != b"byte":
            raise SYNTAX_ERR
    if end_i is not None:
        end = string2ll(argv[end_i])
        if end is None:
            raise NOT_INT
    else:
        end = length * 8 + 7 if bit_unit else length - 1
    total = length * 8 if bit_unit else length
    if start < 0:
        start = max(total + start, 0)
    if end < 0:
        end = max(total + end, 0)
    if end >= total:
        end = total - 1
    if start > end:
        return None
    if not bit_unit:
        return start, end, 0xFF, 0xFF
    # Keep the bits from start's position in its byte, and up to end's in its byte.
    return start >> 3, end >> 3, 0xFF >> (start & 7), (0xFF << (7 - (end & 7))) & 0xFF


@command("bitcount")
def bitcount(c: Client, argv: list[bytes]):
    argc = len(argv)
    value = _read(c, argv[1])  # a missing key answers 0 before the arguments are looked at
    if value is None:
        return 0
    if argc not in (2, 4, 5):
        raise SYNTAX_ERR
    if argc == 2:
        return int.from_bytes(value, "big").bit_count()
    start, end = string2ll(argv[2]), string2ll(argv[3])
    if start is None or end is None:
        raise NOT_INT
    if start < 0 and end < 0 and start > end:
        return 0
    span = _range(argv, 2, 3, 4, len(value))
    if span is None:
        return 0
    first, last, head, tail = span
    chunk = bytearray(value[first : last + 1])
    chunk[0] &= head
    chunk[-1] &= tail
    return int.from_bytes(chunk, "big").bit_count()


@command("bitpos")
def bitpos(c: Client, argv: list[bytes]):
    argc = len(argv)
    bit = string2ll(argv[2])
    if bit is None:
        raise NOT_INT
    if bit != 0 and bit != 1:
        raise BITPOS_BAD_BIT
    value = _read(c, argv[1])
    if value is None:
        return -1 if bit else 0
    if argc == 3:
        span = (0, len(value) - 1, 0xFF, 0xFF) if value else None
        end_given = False
    elif argc in (4, 5, 6):
        span = _range(argv, 3, 4 if argc >= 5 else None, 5, len(value))
        end_given = argc >= 5
    else:
        raise SYNTAX_ERR
    if span is None:
        return -1
    first, last, head, tail = span
    chunk = bytearray(value[first : last + 1])
    # Bits outside a BIT range must not match: clear them when looking for 1s, set
    # them when looking for 0s.
    if bit:
        chunk[0] &= head
        chunk[-1] &= tail
    else:
        chunk[0] |= ~head & 0xFF
        chunk[-1] |= ~tail & 0xFF
    skip = 0 if bit else 0xFF
    i = next((j for j, b in enumerate(chunk) if b != skip), -1) if len(chunk) < 64 else _first_not(chunk, skip)
    if i < 0:
        # No match: a search for 0s past an open-ended range finds the padding after it.
        if bit or end_given:
            return -1
        return (first + len(chunk)) * 8
    b = chunk[i] if bit else chunk[i] ^ 0xFF
    return (first + i) * 8 + (8 - b.bit_length())


def _first_not(chunk: bytearray, skip: int) -> int:
    """Index of the first byte that is not ``skip`` (a C-speed scan), or -1."""
    stripped = chunk.lstrip(bytes((skip,)))
    return len(chunk) - len(stripped) if stripped else -1


@command("bitop")
def bitop(c: Client, argv: list[bytes]):
    op = argv[1].lower()
    if op not in (b"and", b"or", b"xor", b"not"):
        raise SYNTAX_ERR
    if op == b"not" and len(argv) != 4:
        raise NOT_SINGLE
    sources = [_read(c, key) for key in argv[3:]]
    size = max((len(s) for s in sources if s is not None), default=0)
    db = c.db
    dest = argv[2]
    if not size:
        if db.delete(dest):
            wrote(c, dest, b"del", "g")
        return 0
    # Big-endian integers of the common length: shorter strings are zero-padded on the right.
    ints = [int.from_bytes(bytes(s or b"").ljust(size, b"\0"), "big") for s in sources]
    if op == b"not":
        result = ~ints[0] & ((1 << (size * 8)) - 1)
    else:
        result = ints[0]
        for v in ints[1:]:
            if op == b"and":
                result &= v
            elif op == b"or":
                result |= v
            else:
                result ^= v
    db.lookup(dest)  # an expired destination goes first (setKey's lookupKeyWrite)
    # Redis stores the result as a new raw string object (OBJECT ENCODING "raw", never
    # "int" or "embstr"): a bytearray here.
    db.set(dest, bytearray(result.to_bytes(size, "big")))
    wrote(c, dest, b"set")
    return size


# -- BITFIELD ------------------------------------------------------------------------------

BAD_TYPE = ReplyError(
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
)
BAD_OVERFLOW = ReplyError("ERR Invalid OVERFLOW type specified")
RO_GET_ONLY = ReplyError("ERR BITFIELD_RO only supports the GET subcommand")
_GET, _SET, _INCRBY = 0, 1, 2
_OPS = {b"get": (_GET, 2), b"set": (_SET, 3), b"incrby": (_INCRBY, 3)}


def _field_type(arg: bytes) -> tuple[bool, int]:
    """``i<bits>`` (1..64) or ``u<bits>`` (1..63): (signed, bits)."""
    signed = arg[:1] == b"i"
    if not signed and arg[:1] != b"u":
        raise BAD_TYPE
    bits = string2ll(arg[1:])
    if bits is None or bits < 1 or bits > (64 if signed else 63):
        raise BAD_TYPE
    return signed, bits


def _field_offset(c: Client, arg: bytes, bits: int) -> int:
    """A bit offset, or ``#n``: the n-th field of this width."""
    if arg[:1] == b"#":
        v = string2ll(arg[1:])
        if v is not None:
            v *= bits
    else:
        v = string2ll(arg)
    if v is None or v < 0 or (c.id >= 0 and (v >> 3) >= c.server.proto_max_bulk_len):
        raise BAD_OFFSET
    return v


def _get_field(buf: bytes | bytearray, offset: int, bits: int, signed: bool) -> int:
    first = offset >> 3
    last = (offset + bits - 1) >> 3
    chunk = bytes(buf[first : last + 1]).ljust(last - first + 1, b"\0")
    shift = (last + 1) * 8 - offset - bits
    v = (int.from_bytes(chunk, "big") >> shift) & ((1 << bits) - 1)
    if signed and v >> (bits - 1):
        v -= 1 << bits
    return v


def _set_field(buf: bytearray, offset: int, bits: int, value: int) -> None:
    first = offset >> 3
    last = (offset + bits - 1) >> 3
    shift = (last + 1) * 8 - offset - bits
    mask = ((1 << bits) - 1) << shift
    chunk = int.from_bytes(buf[first : last + 1], "big")
    chunk = (chunk & ~mask) | ((value << shift) & mask)
    buf[first : last + 1] = chunk.to_bytes(last - first + 1, "big")


def _fit(total: int, bits: int, signed: bool, policy: bytes) -> int | None:
    """``total`` fitted to the field by the OVERFLOW policy; None when FAIL refuses it."""
    if signed:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        lo, hi = 0, (1 << bits) - 1
    if lo <= total <= hi:
        return total
    if policy == b"fail":
        return None
    if policy == b"sat":
        return hi if total > hi else lo
    wrapped = total & ((1 << bits) - 1)
    if signed and wrapped >> (bits - 1):
        wrapped -= 1 << bits
    return wrapped


def _set_value(value: int, bits: int, signed: bool, policy: bytes) -> int | None:
    """What SET stores for the 64-bit argument ``value``; None when FAIL refuses it."""
    if not signed:
        # An unsigned field reads the argument as an unsigned 64-bit integer: a negative
        # one is huge, so it overflows upward (SAT stores the maximum).
        return _fit(value & 0xFFFFFFFFFFFFFFFF, bits, False, policy)
    hi = (1 << (bits - 1)) - 1
    if policy == b"sat" and bits < 64 and value <= hi - (1 << 63):
        # Redis tests for upward overflow first, comparing the increment (0 for SET)
        # with the headroom max - value, computed in 64-bit two's complement. When the
        # argument is more than INT64_MAX below the field's maximum, that headroom wraps
        # negative and the value counts as overflowing upward: SAT stores the maximum,
        # not the minimum. (WRAP and FAIL don't depend on the direction.)
        return hi
    return _fit(value, bits, True, policy)


def _bitfield(c: Client, argv: list[bytes], readonly_cmd: bool):
    ops: list[tuple[int, bool, int, int, int, bytes]] = []
    policy = b"wrap"
    highest = -1
    j, argc = 2, len(argv)
    while j < argc:
        name = argv[j].lower()
        remaining = argc - j - 1
        spec = _OPS.get(name)
        if name == b"overflow" and remaining >= 1:
            policy = argv[j + 1].lower()
            if policy not in (b"wrap", b"sat", b"fail"):
                raise BAD_OVERFLOW
            j += 2
            continue
        if spec is None or remaining < spec[1]:
            raise SYNTAX_ERR
        op = spec[0]
        signed, bits = _field_type(argv[j + 1])
        offset = _field_offset(c, argv[j + 2], bits)
        value = 0
        if op != _GET:
            highest = max(highest, offset + bits - 1)
            value = string2ll(argv[j + 3])
            if value is None:
                raise NOT_INT
        ops.append((op, signed, bits, offset, value, policy))
        j += 1 + spec[1]
    key = argv[1]
    grown = False
    if highest < 0:
        buf = _read(c, key) or b""
    elif readonly_cmd:
        raise RO_GET_ONLY
    else:
        buf, grown = _writable(c, key, highest)
    out: list[int | None] = []
    changes = 0
    for op, signed, bits, offset, value, pol in ops:
        if op == _GET:
            out.append(_get_field(buf, offset, bits, signed))
            continue
        old = _get_field(buf, offset, bits, signed)
        if op == _INCRBY:
            new = _fit(old + value, bits, signed, pol)
            reply = new
        else:
            new = _set_value(value, bits, signed, pol)
            reply = old
        if new is None:
            out.append(None)
            continue
        out.append(reply)
        _set_field(buf, offset, bits, new)  # type: ignore[arg-type]
        if grown or old != new:
            changes += 1
    if changes:
        wrote(c, key, b"setbit", changes=changes)
    return out


def _bitfield_key_flags(argv: list[bytes]) -> tuple[bytes, ...]:
    """BITFIELD's key spec is variable_flags: the flags of one call."""
    # Read-only when every operation is a GET (with OVERFLOW allowed between them);
    # anything else, a syntax error included, is taken as a write.
    i, n = 2, len(argv)
    while i < n:
        op, left = argv[i].lower(), n - i - 1
        if op == b"get" and left >= 2:
            i += 3
        elif op == b"overflow" and left >= 1:
            i += 2
        else:
            return (b"RW", b"access", b"update")
    return (b"RO", b"access")


@command("bitfield", key_flags=_bitfield_key_flags)
def bitfield(c: Client, argv: list[bytes]):
    return _bitfield(c, argv, False)


@command("bitfield_ro")
def bitfield_ro(c: Client, argv: list[bytes]):
    return _bitfield(c, argv, True)
