"""Active-Active effect records: one write's CRDT ops with their causal stamp, as argv.

A record is what an Active-Active link sends and what the AOF keeps (docs/active-active.md).
Two formats, told apart by their argv:

- **compact** (version 2, what rill writes): ``ACTIVEACTIVE APPLY <records>``, one bulk of one
  or more binary records back to back, so a link sends a whole run of effects as one
  command (one parse, one dispatch) and the AOF keeps one record per command. A record is
  ``<2> <origin> <seq:u64> <ts:u64> <n>`` (little-endian; the bytes as ``struct`` format
  ``<BBQQB``), ``n`` clock entries ``<region> <count:u64>`` (regions ascending, the origin's
  own entry left out: it is ``seq - 1``), then ``<nops>`` and per op ``<db> <argc>`` and
  ``argc`` arguments as ``<len> <bytes>``. ``nops``, ``db``, ``argc`` and ``len`` are one
  byte below 255, else 255 and a ``u32``.
- **argv** (version 1, what main wrote before): ``ACTIVEACTIVE APPLY <origin> <seq> <ts-ms>
  <vc> <nops> (<db> <argc> <op...>)*`` with ``vc`` as ``b"1:17,2:4"`` (regions ascending;
  ``b""`` when empty). Still read from AOFs and RDB backlogs written by it.

An op is ``[NAME, key, args...]``. Pure data: no server, no I/O.
"""

from __future__ import annotations

import struct

from .parser import ProtocolError, RequestParser

APPLY_PREFIX = (b"ACTIVEACTIVE", b"APPLY")

# Region numbers: 1..MAX_REGION (a generated stream ID carries one in the low byte).
MAX_REGION = 255


class Effect:
    """One unit of ops from ``origin``: its ``seq``-th effect, made after the origin had
    applied ``vc`` (its own entry being ``seq - 1``), at wall-clock ``ts`` ms.

    A plain class rather than a dataclass: compiled, it is an extension type
    (effects.pxd) that the decoder fills field by field, where a dataclass's
    ``__init__`` ran as bytecode for every record a peer sent."""

    __slots__ = ("origin", "seq", "ts", "vc", "ops", "raw")

    def __init__(self, origin: int, seq: int, ts: int, vc: dict[int, int],
                 ops: list[tuple[int, list[bytes]]] | None = None, raw: bytes | None = None) -> None:
        self.origin = origin
        self.seq = seq
        self.ts = ts
        self.vc = vc
        self.ops = [] if ops is None else ops
        # The compact record it was read from, when it was (the AOF keeps it as it came).
        self.raw = raw

    def __eq__(self, other: object) -> bool:
        """Field by field, ``raw`` aside (the same effect read from either format)."""
        if not isinstance(other, Effect):
            return NotImplemented
        return (self.origin, self.seq, self.ts, self.vc, self.ops) == (
            other.origin, other.seq, other.ts, other.vc, other.ops)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return f"Effect(origin={self.origin}, seq={self.seq}, ts={self.ts}, vc={self.vc}, ops={self.ops})"


def encode_vc(vc: dict[int, int]) -> bytes:
    """``{1: 17, 2: 4}`` -> ``b"1:17,2:4"`` (zero entries left out)."""
    return b",".join(b"%d:%d" % (r, n) for r, n in sorted(vc.items()) if n)


def decode_vc(raw: bytes) -> dict[int, int]:
    """The inverse of :func:`encode_vc`; ValueError on anything malformed."""
    vc: dict[int, int] = {}
    if not raw:
        return vc
    for part in raw.split(b","):
        r, sep, n = part.partition(b":")
        if not sep:
            raise ValueError("malformed vector clock")
        region, count = int(r), int(n)
        if not 1 <= region <= MAX_REGION or count < 0 or region in vc:
            raise ValueError("malformed vector clock")
        vc[region] = count
    return vc


def encode_effect(e: Effect, vc: bytes | None = None) -> list[bytes]:
    """The record's argv (``vc``: the clock already encoded, if the caller has it)."""
    argv = [
        *APPLY_PREFIX,
        b"%d" % e.origin,
        b"%d" % e.seq,
        b"%d" % e.ts,
        encode_vc(e.vc) if vc is None else vc,
        b"%d" % len(e.ops),
    ]
    for db, op in e.ops:
        argv.append(b"%d" % db)
        argv.append(b"%d" % len(op))
        argv.extend(op)
    return argv


def decode_effect(argv: list[bytes], start: int = 2) -> Effect:
    """Parse a record's argv from ``argv[start]`` (after ACTIVEACTIVE APPLY); ValueError
    on anything malformed, so a damaged record is refused whole."""
    try:
        origin, seq, ts = int(argv[start]), int(argv[start + 1]), int(argv[start + 2])
        vc = decode_vc(argv[start + 3])
        nops = int(argv[start + 4])
        i = start + 5
        ops: list[tuple[int, list[bytes]]] = []
        for _ in range(nops):
            db, argc = int(argv[i]), int(argv[i + 1])
            i += 2
            if db < 0 or argc < 2 or i + argc > len(argv):
                raise ValueError("malformed op")
            op = argv[i : i + argc]
            ops.append((db, op if type(op) is list else list(op)))
            i += argc
    except (IndexError, TypeError) as exc:
        raise ValueError("truncated effect record") from exc
    if i != len(argv):
        raise ValueError("trailing data after effect record")
    if not 1 <= origin <= MAX_REGION or seq < 1 or ts < 0 or nops < 0:
        raise ValueError("malformed effect header")
    return Effect(origin, seq, ts, vc, ops)


# -- the compact format (version 2) --------------------------------------------------------

RECORD_VERSION = 2
_HEADER = struct.Struct("<BBQQB")  # version, origin, seq, ts, clock entries
_ENTRY = struct.Struct("<BQ")  # a clock entry: region, count
_U32 = struct.Struct("<I")
# A small number's byte, by value (0..254); 255 and more take 255 and a u32.
_BYTE = tuple(bytes((n,)) for n in range(255))


def _small(n: int) -> bytes:
    return _BYTE[n] if n < 255 else b"\xff" + _U32.pack(n)


def encode_clock(vc: dict[int, int], origin: int) -> bytes:
    """A clock's entries as a compact record holds them: ``origin``'s own left out, and
    zero entries too. The count of entries is the length over 9."""
    return b"".join(_ENTRY.pack(r, n) for r, n in sorted(vc.items()) if n and r != origin)


def encode_compact(origin: int, seq: int, ts: int, clock: bytes, ops: list[tuple[int, list[bytes]]]) -> bytes:
    """One compact record (``clock`` as :func:`encode_clock` made it): the making side's hot
    path, so the pieces come from tables. Compiled, effects.pxd's ``_c_encode_compact``
    writes the usual record (every count and length one byte) straight into one bytes of
    its size: the parts list and its join were most of the ~8.8k instructions a record cost."""
    if _COMPILED:
        wire = _c_encode_compact(origin, seq, ts, clock, ops)  # noqa: F821 (see _COMPILED)
        if wire is not None:
            return wire
    byte = _BYTE
    parts = [_HEADER.pack(RECORD_VERSION, origin, seq, ts, len(clock) // 9), clock]
    try:
        parts.append(byte[len(ops)])
        for db, op in ops:
            parts += (byte[db], byte[len(op)])
            for a in op:
                parts += (byte[len(a)], a)
    except IndexError:
        # A long argument, many ops or a large db number: the general form.
        parts[2:] = [_small(len(ops))]
        for db, op in ops:
            parts += (_small(db), _small(len(op)))
            for a in op:
                parts += (_small(len(a)), a)
    return b"".join(parts)


# -- a record made as the write goes (the writer's side) --------------------------------------
#
# A write that knows its op encodes it once, into the op section of the effect being made
# (the engine's ``pre``), and seal adds only the header: no op list, no unit to walk, no
# second encoding. A record is ``encode_record(header fields, nops, section)``; the section
# is ``put_op``'s ops back to back, exactly as encode_compact lays out a unit's.


def put_op(out: bytearray, db: int, head: tuple[bytes, ...], tail: list[bytes], start: int) -> None:
    """Append the op ``[*head, *tail[start:]]`` in database ``db`` to the op section ``out``:
    the op's head (name, key and what the write decided) and the arguments it takes as
    they came (XADD's fields and values from its argv), with no list made of them.
    Compiled, effects.pxd's ``_c_put_op`` writes the usual op (every count and length
    below 255) in one resize; otherwise, or for a long one, the general form here."""
    if _COMPILED and _c_put_op(out, db, head, tail, start):  # noqa: F821 (see _COMPILED)
        return
    rest = tail[start:]
    parts = [_small(db), _small(len(head) + len(rest))]
    for a in head:
        parts += (_small(len(a)), a)
    for a in rest:
        parts += (_small(len(a)), a)
    out += b"".join(parts)


def clear_section(out: bytearray) -> None:
    """Empty an op section for the next effect. Compiled, its buffer stays allocated
    (``del out[:]`` gives it back to the allocator, and the next write's op takes it
    again: two reallocations per effect)."""
    if _COMPILED:
        _c_clear(out)  # noqa: F821 (see _COMPILED)
    else:
        del out[:]


def encode_record(origin: int, seq: int, ts: int, clock: bytes, nops: int, section: bytes | bytearray) -> bytes:
    """One compact record (``clock`` as :func:`encode_clock` made it) of ``nops`` ops whose
    encoding ``section`` holds (:func:`put_op`'s)."""
    if _COMPILED:
        wire = _c_encode_record(origin, seq, ts, clock, nops, section)  # noqa: F821 (see _COMPILED)
        if wire is not None:
            return wire
    return b"".join((_HEADER.pack(RECORD_VERSION, origin, seq, ts, len(clock) // 9), clock, _small(nops),
                     section))


def encode_effect_compact(e: Effect) -> bytes:
    return encode_compact(e.origin, e.seq, e.ts, encode_clock(e.vc, e.origin), e.ops)


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (as protocol/parser.py tells it): the fixed-width
# numbers of a record are C loads compiled and int.from_bytes in the interpreter.
_COMPILED = type(_probe).__name__ != "function"


def _uint(p: bytes, i: int, width: int) -> int:
    """The little-endian unsigned ``width``-byte number at ``p[i]`` (the caller checked
    that it is all there)."""
    if not _COMPILED:
        return int.from_bytes(p[i:i + width], "little")
    v = 0
    k = i + width
    while k > i:
        k -= 1
        v = v << 8 | p[k]
    return v


def decode_records(blob: bytes, keep_raw: bool = True) -> list[Effect]:
    """The compact records of one APPLY, in order; ValueError on anything malformed, so a
    damaged batch is refused whole (nothing of it applied). ``keep_raw``: each effect's
    ``raw`` is its record's bytes (what an AOF keeps of it), else None: a peer without an
    AOF has no use for them, and a record of a batch is a copy.

    Compiled, ``p`` is a C pointer into ``blob`` (effects.pxd): a field is a load and an
    argument one PyBytes_FromStringAndSize, with no slice object between; so every read
    is bounds-checked here, not by an IndexError."""
    out: list[Effect] = []
    p = blob
    end = len(blob)
    i = 0
    while i < end:
        start = i
        if i + 19 > end:  # version, origin, seq, ts, clock entries
            raise ValueError("truncated effect record")
        version = p[i]
        if version != RECORD_VERSION:
            raise ValueError(f"unknown effect record version {version}")
        origin = p[i + 1]
        seq = _uint(p, i + 2, 8)
        ts = _uint(p, i + 10, 8)
        n = p[i + 18]
        if origin < 1 or seq < 1:  # origin <= MAX_REGION: it is one byte
            raise ValueError("malformed effect header")
        i += 19
        vc: dict[int, int] = {}
        if i + 9 * n > end:
            raise ValueError("truncated effect record")
        for _ in range(n):
            r = p[i]
            if r < 1 or r == origin or r in vc:
                raise ValueError("malformed vector clock")
            vc[r] = _uint(p, i + 1, 8)
            i += 9
        if seq > 1:
            vc[origin] = seq - 1
        if i >= end:
            raise ValueError("truncated effect record")
        nops = p[i]
        i += 1
        if nops == 255:
            if i + 4 > end:
                raise ValueError("truncated effect record")
            nops = _uint(p, i, 4)
            i += 4
        ops: list[tuple[int, list[bytes]]] = []
        for _ in range(nops):
            if i >= end:
                raise ValueError("truncated effect record")
            db = p[i]
            i += 1
            if db == 255:
                if i + 4 > end:
                    raise ValueError("truncated effect record")
                db = _uint(p, i, 4)
                i += 4
            if i >= end:
                raise ValueError("truncated effect record")
            argc = p[i]
            i += 1
            if argc == 255:
                if i + 4 > end:
                    raise ValueError("truncated effect record")
                argc = _uint(p, i, 4)
                i += 4
            if argc < 2:
                raise ValueError("malformed op")
            op = []
            for _ in range(argc):
                if i >= end:
                    raise ValueError("truncated effect record")
                k = p[i]
                i += 1
                if k == 255:
                    if i + 4 > end:
                        raise ValueError("truncated effect record")
                    k = _uint(p, i, 4)
                    i += 4
                if k > end - i:
                    raise ValueError("truncated effect record")
                op.append(p[i:i + k])
                i += k
            ops.append((db, op))
        e = Effect.__new__(Effect)
        e.origin = origin
        e.seq = seq
        e.ts = ts
        e.vc = vc
        e.ops = ops
        if not keep_raw:
            e.raw = None
        elif start == 0 and i == end:
            e.raw = blob
        else:
            e.raw = p[start:i]
        out.append(e)
    if not out:
        raise ValueError("no effect record")
    return out


def decode_apply(argv: list[bytes], start: int = 2, keep_raw: bool = True) -> list[Effect]:
    """The effects of an APPLY's argv, either format: one bulk of compact records, or one
    record as argv (version 1). ValueError on anything malformed. ``keep_raw``: as for
    :func:`decode_records` (a version 1 record has no compact bytes to keep)."""
    if len(argv) == start + 1:
        blob = argv[start]
        # Compiled, decode_records takes bytes only (protocol/effects.pxd).
        return decode_records(blob if type(blob) is bytes else bytes(blob), keep_raw)
    return [decode_effect(argv, start)]


def compact_from_wire(wire: bytes) -> bytes:
    """A backlog record as rill keeps it now (compact), from one in either format: a
    version-1 record is its APPLY command's RESP. ValueError when it is neither."""
    wire = bytes(wire)
    if wire[:1] != b"*":
        decode_records(wire)  # checked here: a damaged one is refused, not kept
        return wire
    argv = _resp_argv(wire)
    if argv[:2] != list(APPLY_PREFIX):
        raise ValueError("not an ACTIVEACTIVE APPLY record")
    return b"".join(encode_effect_compact(e) for e in decode_apply(argv))


def _resp_argv(wire: bytes) -> list[bytes]:
    """The argv of the one RESP command that fills ``wire`` (the request parser's reading
    of it); ValueError otherwise."""
    parser = RequestParser()
    commands = parser.feed(wire)
    if len(commands) != 1 or isinstance(commands[0], ProtocolError) or parser.pending_bytes():
        raise ValueError("malformed version-1 effect record")
    return [bytes(a) for a in commands[0]]
