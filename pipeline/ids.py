"""Stream IDs as 128-bit integers (ms << 64 | seq), the only order that is right.

Sorting IDs as strings puts ``5-10`` before ``5-2``; every comparison, range split and
offset in the pipeline goes through these integers instead.
"""

from __future__ import annotations

MASK64 = (1 << 64) - 1
ID_MIN = 0
ID_MAX = (1 << 128) - 1
LONG_MAX = (1 << 63) - 1


def parse_id(text: str | bytes, *, seq_default: int = 0) -> int:
    """``"ms-seq"`` or ``"ms"`` (seq from ``seq_default``) as an integer; ValueError if malformed."""
    s = text.decode() if isinstance(text, bytes) else str(text)
    s = s.strip()
    if s == "-":
        return ID_MIN
    if s == "+":
        return ID_MAX
    ms_s, sep, seq_s = s.partition("-")
    ms = int(ms_s)
    seq = int(seq_s) if sep else seq_default
    if not (0 <= ms <= MASK64 and 0 <= seq <= MASK64) or not ms_s.isdigit() or (sep and not seq_s.isdigit()):
        raise ValueError(f"invalid stream ID {s!r}")
    return (ms << 64) | seq


def format_id(sid: int) -> str:
    return f"{sid >> 64}-{sid & MASK64}"


def split_id(sid: int) -> tuple[int, int]:
    return sid >> 64, sid & MASK64


def fast_parse(eid: bytes) -> int:
    """An ID from a server reply (always ``ms-seq``)."""
    i = eid.index(b"-")
    return (int(eid[:i]) << 64) | int(eid[i + 1:])
