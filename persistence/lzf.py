"""LZF, the compression Redis applies to RDB strings longer than 20 bytes (lzf_d.c).

Decompression must always work (Redis compresses values and stream listpacks by
default, so every file it writes may need it): ``python-lzf`` (C) is used when
installed, else a pure-Python decoder that copies literal runs and
non-overlapping back-references as slices.  Compression is optional for a
writer (raw strings are always valid), so ``compress`` returns None when the C
module is missing and the writer stores the string raw.

Format, token by token: a control byte ``c``; ``c < 32`` is a literal run of
``c + 1`` bytes; otherwise a back-reference of ``(c >> 5) + 2`` bytes (7 means
"add the next byte") starting ``((c & 0x1f) << 8) + next_byte + 1`` bytes back.
"""

from __future__ import annotations

__all__ = ["LZFError", "decompress", "decompress_py", "compress", "compress_bytes", "HAVE_C"]


class LZFError(ValueError):
    """The compressed data is malformed or does not expand to the stated length."""


try:
    import lzf as _lzf

    HAVE_C = True
except ImportError:  # pragma: no cover - depends on the environment
    _lzf = None
    HAVE_C = False


def decompress_py(data: bytes | bytearray | memoryview, out_len: int) -> bytes:
    """Pure-Python LZF decoder; raises LZFError on malformed input."""
    src = bytes(data)
    n = len(src)
    out = bytearray()
    i = 0
    while i < n:
        ctrl = src[i]
        i += 1
        if ctrl < 32:
            run = ctrl + 1
            if i + run > n:
                raise LZFError("literal run past the end of the input")
            out += src[i : i + run]
            i += run
            continue
        length = ctrl >> 5
        if length == 7:
            if i >= n:
                raise LZFError("truncated back-reference")
            length += src[i]
            i += 1
        if i >= n:
            raise LZFError("truncated back-reference")
        pos = len(out)
        ref = pos - ((ctrl & 0x1F) << 8) - src[i] - 1
        i += 1
        length += 2
        if ref < 0:
            raise LZFError("back-reference before the start of the output")
        if ref + length <= pos:
            out += out[ref : ref + length]
        else:  # overlapping copy: the last ``pos - ref`` bytes repeat
            pattern = bytes(out[ref:pos])
            reps = -(-length // len(pattern))
            out += (pattern * reps)[:length]
        if len(out) > out_len:
            raise LZFError("output longer than the stated length")
    if len(out) != out_len:
        raise LZFError(f"expanded to {len(out)} bytes, expected {out_len}")
    return bytes(out)


def decompress(data: bytes | bytearray | memoryview, out_len: int) -> bytes:
    """Expand ``data`` to exactly ``out_len`` bytes; raises LZFError otherwise."""
    if _lzf is not None:
        if out_len == 0:
            if len(data):
                raise LZFError("expanded to more than 0 bytes")
            return b""
        try:
            out = _lzf.decompress(bytes(data), out_len + 1)
        except ValueError as e:  # python-lzf's report of corrupt input
            raise LZFError(str(e)) from None
        if out is None or len(out) != out_len:
            raise LZFError(f"expanded to {0 if out is None else len(out)} bytes, expected {out_len}")
        return out
    return decompress_py(data, out_len)


def compress(data: bytes | bytearray, max_len: int) -> bytes | None:
    """LZF of ``data`` if it fits in ``max_len`` bytes, else None (also without the C module)."""
    if _lzf is None or max_len <= 0:
        return None
    return _compress_as_redis(bytes(data), max_len)


def _no_compress(data: bytes, max_len: int) -> None:
    return None


def fits_as_redis_would(z: bytes, in_len: int, out_len: int) -> bool:
    """Whether lzf_compress, given ``out_len`` bytes of room, would have produced ``z``.

    liblzf gives up before the output is actually full: it wants 4 spare bytes when
    it starts a back-reference, refuses a literal once the room is used, and wants 3
    spare bytes when it reaches the input's last two bytes. python-lzf finds the same
    tokens but bounds only the final length, so near the limit the two disagree on
    whether a string is stored compressed (and Redis's DUMP and RDB bytes differ).
    This replays Redis's checks over ``z``'s tokens. The write position never passes
    ``len(z) + 1``, so output well under the limit skips the replay.
    """
    if len(z) + 6 < out_len:
        return True
    op = 1  # the control byte reserved for the first literal run
    lit = 0
    ip = 0
    tail = in_len - 2  # the main loop stops here; the rest is copied without checks
    at_tail = ip >= tail
    if at_tail and op + 3 > out_len:
        return False
    i = 0
    n = len(z)
    while i < n:
        ctrl = z[i]
        if ctrl < 32:
            run = ctrl + 1
            i += 1 + run
            for _ in range(run):
                if not at_tail and op >= out_len:
                    return False
                lit += 1
                op += 1
                ip += 1
                if lit == 32:
                    lit = 0
                    op += 1
                if not at_tail and ip >= tail:
                    at_tail = True
                    if op + 3 > out_len:
                        return False
            continue
        length = ctrl >> 5
        size = 2
        if length == 7:
            length += z[i + 1]
            size = 3
        if op - (lit == 0) + 4 >= out_len:
            return False
        op += size - (lit == 0) + 1  # the reference, then a new run's control byte
        lit = 0
        ip += length + 2
        i += size
        if not at_tail and ip >= tail:
            at_tail = True
            if op + 3 > out_len:
                return False
    return True


def _compress_as_redis(data: bytes, max_len: int) -> bytes | None:
    z = _lzf.compress(data, max_len)
    if z is None or not fits_as_redis_would(z, len(data), max_len):
        return None
    return z


# The RDB writer's per-string call: ``bytes`` only and ``max_len`` > 0, no checks.
compress_bytes = _compress_as_redis if _lzf is not None else _no_compress
