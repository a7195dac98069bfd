"""CRC-64 as Redis computes it for RDB files and DUMP payloads (crc64.c).

The model is the "Jones" polynomial 0xad93d23594c935a9, reflected in and out, with
init 0 and no final xor (reveng's CRC-64/REDIS): ``crc64(b"123456789")`` is
0xe9c6d914c4b8d9ca.  The checksum runs over whole files, so it must not be what
makes SAVE and loading slow:

* ``anycrc`` (a maintained C extension using carry-less multiplication, several
  GB/s) is used when installed;
* otherwise a pure-Python fallback processes many independent *lanes* of the
  input at once with ``bytes.translate`` and big-int xors, so the per-byte work
  happens in C; lane results are joined with the "append n zero bytes" linear
  operator.  It is an order of magnitude faster than a byte-at-a-time table loop.

Every function takes the running checksum as ``crc`` so that a file can be
checksummed in pieces: ``crc64(b, crc64(a)) == crc64(a + b)``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

try:
    import anycrc
except ImportError:  # the C backend is optional; crc64_lanes serves without it
    anycrc = None

__all__ = ["crc64", "crc64_table", "crc64_lanes", "BACKEND"]

POLY = 0xAD93D23594C935A9
_REFLECTED = int(f"{POLY:064b}"[::-1], 2)  # 0x95ac9329ac4bc9b5
_MASK = (1 << 64) - 1


def _make_table() -> list[int]:
    table = []
    for b in range(256):
        crc = b
        for _ in range(8):
            crc = (crc >> 1) ^ _REFLECTED if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _make_table()
# The table split into byte planes, as ``bytes.translate`` tables.
_PLANES = [bytes((t >> (8 * k)) & 0xFF for t in _TABLE) for k in range(8)]


def crc64_table(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """The textbook byte-at-a-time loop (reference implementation, short inputs)."""
    table = _TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


# -- the "append zero bytes" operator, for joining lanes ------------------------
def _mat_apply(cols: list[int], v: int) -> int:
    out = 0
    i = 0
    while v:
        if v & 1:
            out ^= cols[i]
        v >>= 1
        i += 1
    return out


def _mat_mul(a: list[int], b: list[int]) -> list[int]:
    """Columns of A*B (GF(2) 64x64 matrices stored as 64 column bit-vectors)."""
    return [_mat_apply(a, col) for col in b]


@lru_cache(maxsize=64)
def _zeros_tables(nbytes: int) -> tuple[list[int], ...]:
    """Byte-indexed tables of the linear map crc -> crc after ``nbytes`` zero bytes."""
    # One zero *bit* through the reflected register: shift right, xor poly if bit 0.
    one_bit = [(_REFLECTED if i == 0 else 0) ^ ((1 << (i - 1)) if i else 0) for i in range(64)]
    result: list[int] | None = None
    power = one_bit
    n = nbytes * 8
    while n:
        if n & 1:
            result = power if result is None else _mat_mul(power, result)
        n >>= 1
        if n:
            power = _mat_mul(power, power)
    cols = result if result is not None else [1 << i for i in range(64)]
    tables = []
    for k in range(8):
        t = [0] * 256
        for b in range(1, 256):
            low = b & -b
            t[b] = t[b ^ low] ^ cols[8 * k + low.bit_length() - 1]
        tables.append(t)
    return tuple(tables)


def _shift(tables: tuple[list[int], ...], crc: int) -> int:
    t0, t1, t2, t3, t4, t5, t6, t7 = tables
    return (
        t0[crc & 0xFF] ^ t1[(crc >> 8) & 0xFF] ^ t2[(crc >> 16) & 0xFF] ^ t3[(crc >> 24) & 0xFF]
        ^ t4[(crc >> 32) & 0xFF] ^ t5[(crc >> 40) & 0xFF] ^ t6[(crc >> 48) & 0xFF] ^ t7[crc >> 56]
    )


def crc64_lanes(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """Pure-Python CRC-64 that runs the table lookups for many lanes per C call.

    The input is cut into ``lanes`` consecutive pieces of ``width`` bytes.  The
    64-bit state of every lane is kept as eight "byte planes" (plane k holds byte
    k of each lane's CRC, as one big int), so one step of the byte loop for all
    lanes is: xor the data column into plane 0, translate the result through the
    table's eight byte planes, and xor each into the next plane down.  Since the
    CRC is linear (init 0, no final xor), crc(A || B) = zeros(crc(A), len(B)) ^
    crc(B): the lanes are joined from the first, and the leftover tail goes
    through the plain loop.
    """
    n = len(data)
    if n < 8192:
        return crc64_table(data, crc)
    data = bytes(data)
    # Lanes wide enough that each C call does real work, few enough to join cheaply.
    lanes = max(256, min(16384, n // 2048))
    width = n // lanes
    body = lanes * width
    frm = int.from_bytes
    p0, p1, p2, p3, p4, p5, p6, p7 = (0,) * 8
    t0, t1, t2, t3, t4, t5, t6, t7 = _PLANES
    # Lane 0 continues the running checksum: seed its bytes into the planes.
    if crc:
        p0, p1, p2, p3, p4, p5, p6, p7 = ((crc >> (8 * k)) & 0xFF for k in range(8))
    for j in range(width):
        idx = (p0 ^ frm(data[j:body:width], "little")).to_bytes(lanes, "little")
        p0 = frm(idx.translate(t0), "little") ^ p1
        p1 = frm(idx.translate(t1), "little") ^ p2
        p2 = frm(idx.translate(t2), "little") ^ p3
        p3 = frm(idx.translate(t3), "little") ^ p4
        p4 = frm(idx.translate(t4), "little") ^ p5
        p5 = frm(idx.translate(t5), "little") ^ p6
        p6 = frm(idx.translate(t6), "little") ^ p7
        p7 = frm(idx.translate(t7), "little")
    planes = [x.to_bytes(lanes, "little") for x in (p0, p1, p2, p3, p4, p5, p6, p7)]
    tables = _zeros_tables(width)
    acc = 0
    b0, b1, b2, b3, b4, b5, b6, b7 = planes
    for i in range(lanes):
        lane = (
            b0[i] | b1[i] << 8 | b2[i] << 16 | b3[i] << 24
            | b4[i] << 32 | b5[i] << 40 | b6[i] << 48 | b7[i] << 56
        )
        acc = _shift(tables, acc) ^ lane if i else lane
    return crc64_table(data[body:], acc) if body < n else acc


def _load_backend() -> tuple[Callable[..., int], str]:
    if anycrc is None:
        return crc64_lanes, "python"
    model = anycrc.CRC(width=64, poly=POLY, init=0, refin=True, refout=True, xorout=0)
    if model.calc(b"123456789") != 0xE9C6D914C4B8D9CA:  # pragma: no cover - defensive
        return crc64_lanes, "python"
    calc = model.calc

    def crc64_c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
        return calc(data, crc) if len(data) else crc

    return crc64_c, "anycrc"


crc64, BACKEND = _load_backend()
crc64.__doc__ = "CRC-64/REDIS of ``data`` continuing from ``crc`` (0 to start)."
