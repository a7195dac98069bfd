"""Active-Active effect records: one write's CRDT ops with their causal stamp, as argv.

A record is what an Active-Active link sends and what the AOF keeps (docs/active-active.md):

    ACTIVEACTIVE APPLY <origin> <seq> <ts-ms> <vc> <nops> (<db> <argc> <op...>)*

``vc`` is a vector clock, ``b"1:17,2:4"`` (regions ascending; ``b""`` when empty). An op is
``[NAME, key, args...]``. Pure data: no server, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

APPLY_PREFIX = (b"ACTIVEACTIVE", b"APPLY")

# Region numbers: 1..MAX_REGION (a generated stream ID carries one in the low byte).
MAX_REGION = 255


@dataclass(slots=True)
class Effect:
    """One unit of ops from ``origin``: its ``seq``-th effect, made after the origin had
    applied ``vc`` (its own entry being ``seq - 1``), at wall-clock ``ts`` ms."""

    origin: int
    seq: int
    ts: int
    vc: dict[int, int]
    ops: list[tuple[int, list[bytes]]] = field(default_factory=list)

    def dot_seen_by(self, vc: dict[int, int]) -> bool:
        """Whether a replica whose applied clock is ``vc`` has applied this effect."""
        return vc.get(self.origin, 0) >= self.seq


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


# RESP pieces of a record: a bulk string's header by length, a small number as a whole
# bulk, and the record's first three arguments per origin.
_BULK_HEADS = tuple(b"$%d\r\n" % n for n in range(256))
_SMALL_BULKS = tuple(b"$%d\r\n%d\r\n" % (len(b"%d" % n), n) for n in range(256))
_HEADS = tuple(b"$12\r\nACTIVEACTIVE\r\n$5\r\nAPPLY\r\n" + _SMALL_BULKS[o] for o in range(MAX_REGION + 1))
_ARRAY_HEADS = tuple(b"*%d\r\n" % n for n in range(1024))


def encode_record(origin: int, seq: int, ts: int, vc: bytes, ops: list[tuple[int, list[bytes]]]) -> bytes:
    """The record as the RESP a link writes: the multibulk encoding of
    :func:`encode_effect`'s argv, built directly (the making side's hot path; ``vc`` is
    the clock already encoded)."""
    # Pieces from tables rather than formats: a bytes format costs more than the lookups.
    s = b"%d" % seq
    t = b"%d" % ts
    heads = _BULK_HEADS
    small = _SMALL_BULKS
    try:
        parts = [
            b"", _HEADS[origin], heads[len(s)], s, b"\r\n", heads[len(t)], t, b"\r\n",
            heads[len(vc)], vc, b"\r\n", small[len(ops)],
        ]
        argc = 7
        for db, op in ops:
            k = len(op)
            argc += 2 + k
            parts += (small[db], small[k])
            for a in op:
                parts += (heads[len(a)], a, b"\r\n")
        parts[0] = _ARRAY_HEADS[argc] if argc < 1024 else b"*%d\r\n" % argc
        return b"".join(parts)
    except (IndexError, TypeError):
        # Past the tables (a long argument, many ops, a large db) or an argument that is
        # not bytes-like: the general encoding.
        return _multibulk(encode_effect(Effect(origin, seq, ts, {}, ops), vc))


def _multibulk(argv: list) -> bytes:
    """RESP multibulk of ``argv`` (bytes-like, str or int arguments)."""
    out = [b"*%d\r\n" % len(argv)]
    for a in argv:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = b"%d" % a
        out.append(b"$%d\r\n%b\r\n" % (len(a), a))
    return b"".join(out)


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
