"""HyperLogLog in Redis 7.0's exact string representation (hyperloglog.c).

A HyperLogLog is an ordinary string: a 16-byte header -- "HYLL", the encoding
byte (0 dense, 1 sparse), 3 unused bytes, the cached cardinality as 8 bytes
little-endian whose top bit marks it stale -- then the registers. Dense: 16384
6-bit registers packed LSB first (12288 bytes). Sparse: run-length opcodes,
ZERO ``00xxxxxx`` (1-64 zero registers), XZERO ``01xxxxxx yyyyyyyy`` (1-16384),
VAL ``1vvvvvxx`` (1-4 registers of value 1-32).

Every byte written must be the byte Redis writes, so the sparse editor follows
hllSparseSet step by step (split the covering opcode, then merge equal VALs in
a window of 5 opcodes), which is not canonical: the same registers can be held
in different byte strings depending on the order they were set. Corrupted
payloads are judged as the oracle (Debian's 7.0.15, which has the CVE-2025-32023
fix) judges them: a sparse payload is sound only if its opcodes cover exactly
16384 registers, and a lone XZERO byte at the end reads the string's NUL
terminator as its second byte.

Bulk work stays out of Python loops: dense registers are unpacked with
``bytes.translate`` over the three byte lanes of each 4-register group, sparse
runs expand through a table, maxima are taken over all registers at once in one
big integer, and the histogram is a popcount per value over one-hot bytes.
"""

from __future__ import annotations

import math
import random
import re
import struct
from bisect import bisect_right
from collections.abc import Iterable
from itertools import accumulate

HEADER = 16
REGISTERS = 16384
DENSE_SIZE = HEADER + REGISTERS * 6 // 8
DENSE = 0
SPARSE = 1
SEED = 0xADC83B19

_P = 14
_Q = 64 - _P
_MASK64 = (1 << 64) - 1
_M = 0xC6A4A7935BD1E995
_VAL_MAX_VALUE = 32
_ZERO_MAX_LEN = 64
_ALPHA_INF = 0.721347520444481703680  # 0.5/ln(2)


# -- hashing ------------------------------------------------------------------------
def murmurhash64a(data: bytes, seed: int = SEED) -> int:
    """MurmurHash2 64-bit (MurmurHash64A), little-endian blocks as Redis reads them."""
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK64
    blocks = n >> 3
    if blocks:
        for k in struct.unpack_from(f"<{blocks}Q", data):
            k = (k * _M) & _MASK64
            k ^= k >> 47
            h = ((h ^ ((k * _M) & _MASK64)) * _M) & _MASK64
    if n & 7:
        h = ((h ^ int.from_bytes(data[blocks << 3 :], "little")) * _M) & _MASK64
    h ^= h >> 47
    h = (h * _M) & _MASK64
    return h ^ (h >> 47)


def pattern(element: bytes) -> tuple[int, int]:
    """hllPatLen: (register index, length of the 000..1 run after the index bits)."""
    h = murmurhash64a(element)
    rest = (h >> _P) | (1 << _Q)  # the sentinel bit bounds the run at Q+1
    return h & (REGISTERS - 1), (rest & -rest).bit_length()


# -- the header -----------------------------------------------------------------------
def new() -> bytearray:
    """An empty HLL as PFADD creates it: sparse, one XZERO covering every register."""
    return bytearray(b"HYLL\x01" + bytes(11) + (0x4000 | (REGISTERS - 1)).to_bytes(2, "big"))


def is_hll(value: bytes | bytearray) -> bool:
    """isHLLObjectOrReply's checks of a string: header, magic, encoding, dense length."""
    if len(value) < HEADER or value[:4] != b"HYLL" or value[4] > SPARSE:
        return False
    return value[4] == SPARSE or len(value) == DENSE_SIZE


def cached_count(value: bytes | bytearray) -> int | None:
    """The cached cardinality, or None when its stale bit is set."""
    if value[15] & 0x80:
        return None
    return int.from_bytes(value[8:16], "little")


def store_count(value: bytearray, card: int) -> None:
    value[8:16] = card.to_bytes(8, "little")


def invalidate(value: bytearray) -> None:
    value[15] |= 0x80


# -- dense registers ----------------------------------------------------------------
def _table(f) -> bytes:
    return bytes(f(b) & 0xFF for b in range(256))


_LOW6 = _table(lambda b: b & 63)
_HIGH2 = _table(lambda b: b >> 6)
_LOW4_UP2 = _table(lambda b: (b & 15) << 2)
_HIGH4 = _table(lambda b: b >> 4)
_LOW2_UP4 = _table(lambda b: (b & 3) << 4)
_HIGH6 = _table(lambda b: b >> 2)
_LOW2_UP6 = _table(lambda b: (b & 3) << 6)
_UP4 = _table(lambda b: (b & 15) << 4)
_UP2 = _table(lambda b: b << 2)


def _or(a: bytes, b: bytes) -> bytes:
    """Bytewise OR of two equal-length strings (their bits never overlap here)."""
    return (int.from_bytes(a, "little") | int.from_bytes(b, "little")).to_bytes(len(a), "little")


def dense_to_raw(packed: bytes | bytearray) -> bytes:
    """The 16384 registers of a dense payload, one byte each.

    Every 3 bytes hold 4 registers: r0 = b0 & 63, r1 = b0 >> 6 | (b1 & 15) << 2,
    r2 = b1 >> 4 | (b2 & 3) << 4, r3 = b2 >> 2.
    """
    packed = bytes(packed)
    b0, b1, b2 = packed[0::3], packed[1::3], packed[2::3]
    raw = bytearray(REGISTERS)
    raw[0::4] = b0.translate(_LOW6)
    raw[1::4] = _or(b0.translate(_HIGH2), b1.translate(_LOW4_UP2))
    raw[2::4] = _or(b1.translate(_HIGH4), b2.translate(_LOW2_UP4))
    raw[3::4] = b2.translate(_HIGH6)
    return bytes(raw)


def raw_to_dense(raw: bytes | bytearray) -> bytes:
    """Pack 16384 one-byte registers (each < 64) into the dense payload."""
    raw = bytes(raw)
    r0, r1, r2, r3 = raw[0::4], raw[1::4], raw[2::4], raw[3::4]
    packed = bytearray(REGISTERS * 6 // 8)
    packed[0::3] = _or(r0, r1.translate(_LOW2_UP6))
    packed[1::3] = _or(r1.translate(_HIGH6), r2.translate(_UP4))
    packed[2::3] = _or(r2.translate(_HIGH4), r3.translate(_UP2))
    return bytes(packed)


def _dense_get(buf: bytearray, index: int) -> int:
    bit = index * 6
    b = HEADER + (bit >> 3)
    fb = bit & 7
    if fb <= 2:  # the register lies within one byte (always so for the last one)
        return (buf[b] >> fb) & 63
    return ((buf[b] | buf[b + 1] << 8) >> fb) & 63


def _dense_put(buf: bytearray, index: int, value: int) -> None:
    bit = index * 6
    b = HEADER + (bit >> 3)
    fb = bit & 7
    if fb <= 2:
        buf[b] = (buf[b] & ~(63 << fb) & 0xFF) | (value << fb)
    else:
        word = ((buf[b] | buf[b + 1] << 8) & ~(63 << fb)) | (value << fb)
        buf[b] = word & 0xFF
        buf[b + 1] = word >> 8


def _dense_set(buf: bytearray, index: int, count: int) -> bool:
    """hllDenseSet: raise the register to ``count``; whether it changed."""
    if count > _dense_get(buf, index):
        _dense_put(buf, index, count)
        return True
    return False


_LANE_HIGH = int.from_bytes(b"\x80" * REGISTERS, "little")


def raw_max(a: bytes, b: bytes) -> bytes:
    """Registerwise maximum of two raw register arrays (values < 128).

    In each byte lane, (a | 0x80) - b keeps bit 7 exactly when a >= b and never
    borrows from the next lane; that bit, spread over the lane, selects a or b.
    """
    x = int.from_bytes(a, "little")
    y = int.from_bytes(b, "little")
    ge = (((x | _LANE_HIGH) - y) & _LANE_HIGH) >> 7
    return (y ^ ((x ^ y) & (ge * 0xFF))).to_bytes(REGISTERS, "little")


# -- sparse opcodes -------------------------------------------------------------------
# A sparse payload is edited as a list of opcodes: a 1-byte opcode is its byte, an
# XZERO is its two bytes read big-endian (0x4000-0x7FFF). A byte 0x40-0x7F standing
# alone is an XZERO cut short at the end of the string, whose missing byte Redis
# reads as the terminating NUL.
_SPAN = [0] * 0x8000
for _op in range(64):
    _SPAN[_op] = _op + 1
for _op in range(64, 128):
    _SPAN[_op] = ((_op & 0x3F) << 8) + 1
for _op in range(128, 256):
    _SPAN[_op] = (_op & 3) + 1
for _op in range(0x4000, 0x8000):
    _SPAN[_op] = (_op & 0x3FFF) + 1
_OP_BYTES = [bytes([op]) for op in range(256)] + [b""] * (0x4000 - 256)
_OP_BYTES += [op.to_bytes(2, "big") for op in range(0x4000, 0x8000)]
# What a 1-byte opcode expands to, one byte per register.
_RUN = [bytes(_SPAN[op]) for op in range(128)]
_RUN += [bytes([((op >> 2) & 31) + 1]) * _SPAN[op] for op in range(128, 256)]
_XZERO = re.compile(rb"[\x40-\x7f][\x00-\xff]")
_NONZERO = re.compile(rb"[^\x00]")
_PROMOTE = 2


def _is_val(op: int) -> bool:
    return 128 <= op < 256


def _val(value: int, length: int) -> int:
    return 0x80 | (value - 1) << 2 | (length - 1)


def _zero_run(length: int) -> int:
    return 0x4000 | (length - 1) if length > _ZERO_MAX_LEN else length - 1


def _parse(payload: bytes | bytearray) -> list[int]:
    """The opcodes of a sparse payload (opcodes start where the previous one ends)."""
    ops: list[int] = []
    pos = 0
    for m in _XZERO.finditer(payload):
        start = m.start()
        ops.extend(payload[pos:start])
        ops.append(payload[start] << 8 | payload[start + 1])
        pos = start + 2
    ops.extend(payload[pos:])
    return ops


def _sparse_registers(payload: bytes | bytearray) -> bytes | None:
    """The registers of a sparse payload, None unless its opcodes cover exactly 16384.

    Redis 7.0.15 as Debian ships it carries the CVE-2025-32023 fix: any opcode that
    would run past the last register makes the payload corrupt.
    """
    pieces: list[bytes] = []
    pos = 0
    for m in _XZERO.finditer(payload):  # runs of 1-byte opcodes expand by table
        start = m.start()
        pieces += map(_RUN.__getitem__, payload[pos:start])
        pieces.append(bytes(_SPAN[payload[start] << 8 | payload[start + 1]]))
        pos = start + 2
    pieces += map(_RUN.__getitem__, payload[pos:])
    raw = b"".join(pieces)
    return raw if len(raw) == REGISTERS else None


def sound(value: bytes | bytearray) -> bool:
    """Whether an HLL that passes :func:`is_hll` has registers that decode (a sparse
    payload whose opcodes cover exactly 16384): :func:`registers` is not None, without
    expanding them."""
    if value[4] == DENSE:
        return True
    return sum(map(_SPAN.__getitem__, _parse(value[HEADER:]))) == REGISTERS


class _Sparse:
    """A sparse HLL being edited: its header, opcodes and byte length.

    ``ends[i]`` is the index just past the last register opcode i covers, for a
    binary search of the opcode holding a register. Splitting an opcode or merging
    two keeps every other boundary where it was, so the list is patched in place
    rather than summed again for each register set.
    """

    __slots__ = ("header", "ops", "ends", "size")

    def __init__(self, value: bytes | bytearray) -> None:
        self.header = bytearray(value[:HEADER])
        self.ops = _parse(value[HEADER:])
        self.ends = list(accumulate(map(_SPAN.__getitem__, self.ops)))
        self.size = len(value)

    def value(self) -> bytearray:
        return self.header + b"".join(map(_OP_BYTES.__getitem__, self.ops))

    def set(self, index: int, count: int, max_bytes: int) -> int:
        """hllSparseSet: 1 if the register rose, 0 if not, -1 if the payload is corrupt,
        _PROMOTE when the change needs the dense encoding."""
        if count > _VAL_MAX_VALUE:
            return _PROMOTE
        ops = self.ops
        ends = self.ends
        pos = bisect_right(ends, index)  # the first opcode covering ``index``
        if pos == len(ops):
            return -1
        op = ops[pos]
        span = _SPAN[op]
        last = ends[pos] - 1
        first = last - span + 1
        if _is_val(op):
            if ((op >> 2) & 31) + 1 >= count:
                return 0
            if span == 1:
                ops[pos] = _val(count, 1)
                return self._updated(pos)
        elif op < 64 and span == 1:
            ops[pos] = _val(count, 1)
            return self._updated(pos)
        # Split the opcode into up to three: the run before, our VAL, the run after.
        seq = []
        if _is_val(op):
            if index != first:
                seq.append(_val(((op >> 2) & 31) + 1, index - first))
            seq.append(_val(count, 1))
            if index != last:
                seq.append(_val(((op >> 2) & 31) + 1, last - index))
        else:
            if index != first:
                seq.append(_zero_run(index - first))
            seq.append(_val(count, 1))
            if index != last:
                seq.append(_zero_run(last - index))
        seq_len = sum(2 if s >= 256 else 1 for s in seq)
        delta = seq_len - (1 if op < 64 or _is_val(op) else 2)
        if delta > 0 and self.size + delta > max_bytes:
            return _PROMOTE
        self.size += delta
        if 64 <= op < 128:
            # Redis writes the sequence over an XZERO it believes 2 bytes long but
            # which had 1: the string ends one byte short of the sequence.
            tail = seq.pop()
            if tail >= 256:
                seq.append(tail >> 8)
            ops[pos:] = seq
            self.ends = list(accumulate(map(_SPAN.__getitem__, ops)))
            return self._updated(pos)
        ops[pos : pos + 1] = seq
        ends[pos : pos + 1] = list(accumulate(map(_SPAN.__getitem__, seq), initial=first))[1:]
        return self._updated(pos)

    def _updated(self, pos: int) -> int:
        """Merge adjacent equal VALs, scanning 5 opcodes from the one before the change."""
        ops = self.ops
        i = pos - 1 if pos else 0
        scan = 5
        while i < len(ops) and scan:
            scan -= 1
            op = ops[i]
            if _is_val(op) and i + 1 < len(ops):
                nxt = ops[i + 1]
                if _is_val(nxt) and (op & 0x7C) == (nxt & 0x7C):
                    length = (op & 3) + (nxt & 3) + 2
                    if length <= 4:
                        ops[i + 1] = (op & 0xFC) | (length - 1)
                        del ops[i]
                        del self.ends[i]  # the merged opcode ends where the second did
                        self.size -= 1
                        continue
            i += 1
        self.header[15] |= 0x80
        return 1

    def to_dense(self) -> bytearray | None:
        raw = _sparse_registers(self.value()[HEADER:])
        if raw is None:
            return None
        header = bytearray(self.header)
        header[4] = DENSE
        return header + raw_to_dense(raw)


# -- reading whole HLLs -------------------------------------------------------------

def is_hll_value(value: object) -> bool:
    """Whether a keyspace value is an HLL: a string PFADD accepts whose registers decode.
    Plain strings are told apart by their first four bytes."""
    t = type(value)
    if (t is not bytes and t is not bytearray) or value[:4] != b"HYLL" or not is_hll(value):  # type: ignore[index,arg-type]
        return False
    return sound(value)  # type: ignore[arg-type]

def registers(value: bytes | bytearray) -> bytes | None:
    """The registers of a valid-looking HLL, one byte each; None if its sparse payload
    is corrupt (hllMerge's verdict)."""
    if value[4] == DENSE:
        return dense_to_raw(value[HEADER:])
    return _sparse_registers(value[HEADER:])


def to_dense(value: bytes | bytearray) -> bytearray | None:
    """hllSparseToDense: the dense form of a sparse HLL (header kept), None if corrupt."""
    return _Sparse(value).to_dense()


def count(value: bytes | bytearray) -> int | None:
    """hllCount of a stored HLL; None when a sparse payload does not cover exactly
    16384 registers."""
    if value[4] == DENSE:
        return estimate(dense_to_raw(value[HEADER:]))
    raw = _sparse_registers(value[HEADER:])
    return None if raw is None else estimate(raw)


def decode(value: bytes | bytearray) -> bytes:
    """PFDEBUG DECODE of a sparse HLL: its opcodes as z:len, Z:len and v:value,len."""
    parts = []
    for op in _parse(value[HEADER:]):
        if op < 64:
            parts.append(b"z:%d" % (op + 1))
        elif _is_val(op):
            parts.append(b"v:%d,%d" % (((op >> 2) & 31) + 1, (op & 3) + 1))
        else:
            parts.append(b"Z:%d" % _SPAN[op])
    return b" ".join(parts)


# -- the estimator --------------------------------------------------------------------
def _sigma(x: float) -> float:
    if x == 1.0:
        return math.inf
    y = 1.0
    z = x
    while True:
        x *= x
        previous = z
        z += x * y
        y += y
        if previous == z:
            return z


def _tau(x: float) -> float:
    if x == 0.0 or x == 1.0:
        return 0.0
    y = 1.0
    z = 1 - x
    while True:
        x = math.sqrt(x)
        previous = z
        y *= 0.5
        d = 1 - x
        z -= d * d * y  # pow(1 - x, 2), which the compiler turns into this product
        if previous == z:
            return z / 3


# Register value 8g+k becomes bit k of its byte in the g-th translation; counting the
# bit k of every byte takes one AND and one popcount over all registers at once.
_ONE_HOT = [_table(lambda b, g=g: 1 << (b - 8 * g) if 8 * g <= b < 8 * g + 8 else 0) for g in range(8)]
_BIT_LANES = [int.from_bytes(bytes([1 << k]) * REGISTERS, "little") for k in range(8)]


def _histogram(raw: bytes) -> list[int]:
    """How many of the 16384 registers hold each value 0-63."""
    hist = [0] * 64
    left = len(raw)
    for g in range(8):
        x = int.from_bytes(raw.translate(_ONE_HOT[g]), "little")
        for k in range(8):
            if not left:  # every register counted: the rest are zero
                return hist
            hist[8 * g + k] = n = (x & _BIT_LANES[k]).bit_count()
            left -= n
    return hist


# What llroundl gives on x86-64 for a result beyond int64 (LLONG_MIN), read back as the
# uint64 Redis keeps: its top bit is the stale-cache bit, so such a count never caches.
_LLROUND_OVERFLOW = 1 << 63


def estimate(raw: bytes) -> int:
    """Redis 7's estimator (Ertl, arXiv:1702.01284) over the register histogram; 2**63
    when the estimate overflows (PFCOUNT then replies it as a signed 64-bit integer)."""
    return estimate_histogram(_histogram(raw))


def histogram(raw: bytes) -> list[int]:
    """How many of the registers ``raw`` hold each value 0-63 (a new list)."""
    return _histogram(raw)


def estimate_histogram(hist: list[int]) -> int:
    """:func:`estimate` from the registers' histogram (kept up to date by a caller that
    raises a few registers at a time, instead of counting all of them again)."""
    m = float(REGISTERS)
    z = m * _tau((m - hist[_Q + 1]) / m)
    for j in range(_Q, 0, -1):
        z += hist[j]
        z *= 0.5
    z += m * _sigma(hist[0] / m)
    if z == 0.0:  # every register past the histogram's range: C divides by zero
        return _LLROUND_OVERFLOW
    e = _ALPHA_INF * m * m / z
    if e >= 2.0**63:
        return _LLROUND_OVERFLOW
    rounded = math.floor(e)
    return rounded + 1 if e - rounded >= 0.5 else rounded  # llroundl: half away from zero


# -- writing --------------------------------------------------------------------------
class Editor:
    """An HLL string opened for PFADD/PFMERGE: a dense one is edited in place, a
    sparse one as opcodes, promoted to dense as hllSparseSet promotes it."""

    __slots__ = ("value", "sparse", "max_bytes")

    def __init__(self, value: bytearray, max_bytes: int) -> None:
        self.value = value
        self.sparse = _Sparse(value) if value[4] == SPARSE else None
        self.max_bytes = max_bytes

    def result(self) -> bytearray:
        """The edited string (a new object if it was sparse)."""
        if self.sparse is not None:
            self.value = self.sparse.value()
        return self.value

    def set(self, index: int, count: int) -> int:
        """Raise register ``index`` to ``count``: 1 changed, 0 unchanged, -1 corrupt."""
        sparse = self.sparse
        if sparse is None:
            return 1 if _dense_set(self.value, index, count) else 0
        done = sparse.set(index, count, self.max_bytes)
        if done != _PROMOTE:
            return done
        dense = sparse.to_dense()
        if dense is None:
            return -1
        self.value = dense
        self.sparse = None
        _dense_set(dense, index, count)  # the register needed to rise, so it does
        return 1

    def add(self, elements: Iterable[bytes]) -> tuple[int, bool]:
        """PFADD's loop: (registers changed, False if a corrupt payload stopped it)."""
        changed = 0
        for element in elements:
            index, count = pattern(element)
            done = self.set(index, count)
            if done < 0:
                return changed, False
            changed += done
        return changed, True

    def merge(self, raw: bytes) -> None:
        """PFMERGE's write: raise every register to ``raw`` (sparse ones one by one, in
        index order, so the opcodes come out as Redis's)."""
        if self.sparse is None:
            self._dense_max(raw)
            return
        for m in _NONZERO.finditer(raw):
            index = m.start()
            if self.sparse is None:  # promoted on the way: raise the rest at once
                self._dense_max(bytes(index) + raw[index:])
                return
            self.set(index, raw[index])

    def _dense_max(self, raw: bytes) -> None:
        value = self.value
        value[HEADER:] = raw_to_dense(raw_max(dense_to_raw(value[HEADER:]), raw))

    def invalidate(self) -> None:
        if self.sparse is not None:
            self.sparse.header[15] |= 0x80
        else:
            invalidate(self.value)


_NONZERO_MASK = _table(lambda b: 1 if b else 0)
_UP_TO_VAL_MAX = bytes(range(_VAL_MAX_VALUE + 1))


def _runs(mask: bytes) -> int:
    return mask.count(b"\x00\x01") + mask.count(b"\x01\x00") + 1


def runs(raw: bytes) -> int:
    """How many runs of zero and of non-zero registers ``raw`` holds: a sparse form takes
    at least a byte for each (so ``sparse_of`` is None when ``HEADER + runs`` is over the
    limit). Raising one register changes it by at most 2."""
    return _runs(raw.translate(_NONZERO_MASK))


def sparse_of(raw: bytes, max_bytes: int) -> bytearray | None:
    """What PFMERGE of registers ``raw`` into an empty key writes while it stays sparse
    (the cached cardinality stale once a register is set), or None where it promotes to
    dense: the same bytes as ``Editor(new(), max_bytes).merge(raw)``, without editing
    opcode by opcode.

    Set in index order, each register splits the trailing zero run: a gap before it (one
    ZERO or XZERO), its VAL, the zeros after; a VAL right after an equal one merges into it
    up to 4 registers. Redis promotes when a split would grow the string past
    ``max_bytes`` (checked before that merge), or at a value above 32. The string only
    grows past ``max_bytes`` through such a split, so registers whose final sparse form is
    longer than that always promote: every run of zeros and of non-zero registers takes at
    least a byte, which rejects most dense HLLs at once."""
    if raw.translate(None, _UP_TO_VAL_MAX):  # a register above 32
        return None
    mask = raw.translate(_NONZERO_MASK)
    if HEADER + _runs(mask) > max_bytes:
        return None
    out = bytearray()
    size = HEADER + 2
    first = 0  # the start of the trailing zero run
    last_op = -1  # the previous VAL written (its position in ``out``), -1: none adjacent
    zmax = _ZERO_MAX_LEN
    index = mask.find(1)
    while index >= 0:
        count = raw[index]
        rest = REGISTERS - 1 - index  # zeros after it
        gap = index - first
        old_len = 2 if REGISTERS - first > zmax else 1
        if gap or rest or old_len == 2:
            delta = 1 - old_len
            if gap:
                delta += 2 if gap > zmax else 1
            if rest:
                delta += 2 if rest > zmax else 1
            if delta > 0:
                size += delta
                if size > max_bytes:
                    return None
            else:
                size += delta
        # else: a lone zero register becomes the VAL in place
        if gap:
            if gap > zmax:
                out += (0x4000 | (gap - 1)).to_bytes(2, "big")
            else:
                out.append(gap - 1)
            last_op = -1
        if last_op >= 0 and out[last_op] & 0x7C == (count - 1) << 2 and out[last_op] & 3 < 3:
            out[last_op] += 1  # one more register of the same value
            size -= 1
        else:
            last_op = len(out)
            out.append(0x80 | (count - 1) << 2)
        first = index + 1
        index = mask.find(1, first)
    if first < REGISTERS:
        out += _OP_BYTES[_zero_run(REGISTERS - first)]
    value = new()[:HEADER] + out
    if first:
        value[15] |= 0x80  # a register was set
    return value


# -- PFSELFTEST -----------------------------------------------------------------------
# Redis runs 1000 register cycles and adds 10 million elements; in Python that would
# hold the server for minutes, so the same checks run at a smaller scale.
SELFTEST_CYCLES = 5
SELFTEST_ELEMENTS = 100_000


def selftest(max_bytes: int) -> str | None:
    """PFSELFTEST's checks; the error text of the first failure, None on success."""
    rng = random.Random()
    buf = bytearray(DENSE_SIZE)
    # 1: registers read back what was written, without disturbing their neighbours.
    for _ in range(SELFTEST_CYCLES):
        values = rng.randbytes(REGISTERS).translate(_LOW6)
        for i, v in enumerate(values):
            _dense_put(buf, i, v)
        if dense_to_raw(buf[HEADER:]) != values or raw_to_dense(values) != buf[HEADER:]:
            for i, v in enumerate(values):
                got = _dense_get(buf, i)
                if got != v:
                    return f"TESTFAILED Register {i} should be {v} but is {got}"
            return "TESTFAILED Register packing disagrees with the register accessors"
    # 2: the estimate stays within 6 standard errors, dense and sparse agreeing.
    buf = bytearray(DENSE_SIZE)
    sparse = Editor(new(), max_bytes)
    relerr = 1.04 / math.sqrt(REGISTERS)
    checkpoint = 1
    seed = rng.getrandbits(64)
    for j in range(1, SELFTEST_ELEMENTS + 1):
        element = (j ^ seed).to_bytes(8, "little")
        index, run = pattern(element)
        _dense_set(buf, index, run)
        sparse.set(index, run)
        if j != checkpoint:
            continue
        if j < max_bytes / 2 and sparse.sparse is None:
            return "TESTFAILED sparse encoding not used"
        card = estimate(dense_to_raw(buf[HEADER:]))
        if card != count(sparse.result()):
            return "TESTFAILED dense/sparse disagree"
        maxerr = 1 if j == 10 else math.ceil(relerr * 6 * checkpoint)
        if abs(checkpoint - card) > maxerr:
            return f"TESTFAILED Too big error. card:{checkpoint} abserr:{abs(checkpoint - card)}"
        checkpoint *= 10
    return None
