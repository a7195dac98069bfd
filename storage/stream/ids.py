"""Stream IDs as single Python ints ``ms << 64 | seq``.

They compare and hash faster than tuples, sort exactly like Redis's 16-byte big-endian rax
keys, and ``id + 1`` / ``id - 1`` are streamIncrID / streamDecrID.  :func:`make_id`,
:func:`split_id`, :func:`format_id`, :func:`format_sid` convert.  Command-level ID parsing
(``-``, ``+``, ``*``, ``ms-*``, ``(``) belongs to the command layer.
"""

from __future__ import annotations

MASK64 = (1 << 64) - 1
ID_MAX = (1 << 128) - 1  # UINT64_MAX-UINT64_MAX
_SIGN64 = 1 << 63
_TWO64 = 1 << 64


# --------------------------------------------------------------------------------------------
# IDs
# --------------------------------------------------------------------------------------------


def make_id(ms: int, seq: int) -> int:
    """The int form of stream ID ``ms-seq``."""
    return (ms << 64) | seq


def split_id(sid: int) -> tuple[int, int]:
    """``(ms, seq)`` of an int ID."""
    return sid >> 64, sid & MASK64


def format_id(ms: int, seq: int) -> bytes:
    """``b"ms-seq"``, the reply/propagation form of an ID."""
    return b"%d-%d" % (ms, seq)


def format_sid(sid: int) -> bytes:
    """``b"ms-seq"`` of an int ID."""
    return b"%d-%d" % (sid >> 64, sid & MASK64)


def encode_key(sid: int) -> bytes:
    """16-byte big-endian ``ms || seq``: the rax/RDB key of a node or PEL entry."""
    return sid.to_bytes(16, "big")


def decode_key(key: bytes) -> int:
    """Inverse of :func:`encode_key`."""
    return int.from_bytes(key, "big")


def incr_id(sid: int) -> int | None:
    """Successor ID, None when ``sid`` is the maximum (streamIncrID's C_ERR)."""
    return None if sid >= ID_MAX else sid + 1


def decr_id(sid: int) -> int | None:
    """Predecessor ID, None when ``sid`` is 0-0 (streamDecrID's C_ERR)."""
    return None if sid <= 0 else sid - 1
