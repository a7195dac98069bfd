"""Redis's glob-style pattern matching (KEYS, SCAN MATCH, CONFIG GET, PSUBSCRIBE).

Patterns are translated once into an equivalent regular expression and cached:
matching every key of a large keyspace in C beats walking the pattern in Python.
The translation keeps Redis's quirks: an empty string never matches (not even
``*``), ``[a-]`` is a range ending at ``]``, an unclosed ``[`` takes the rest of
the pattern as its set, and ``\\`` escapes inside and outside sets.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache


def _translate(pattern: bytes) -> bytes:
    out = bytearray()
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == 42:  # '*'
            while i + 1 < n and pattern[i + 1] == 42:
                i += 1
            out += b".*"
        elif c == 63:  # '?'
            out += b"."
        elif c == 91:  # '['
            i += 1
            negate = i < n and pattern[i] == 94
            if negate:
                i += 1
            items = bytearray()
            while True:
                if i < n and pattern[i] == 92 and n - i >= 2:
                    i += 1
                    items += re.escape(pattern[i : i + 1])
                elif i < n and pattern[i] == 93:
                    break
                elif i >= n:
                    break
                elif n - i >= 3 and pattern[i + 1] == 45:
                    lo, hi = pattern[i], pattern[i + 2]
                    if lo > hi:
                        lo, hi = hi, lo
                    items += re.escape(bytes([lo])) + b"-" + re.escape(bytes([hi]))
                    i += 2
                else:
                    items += re.escape(pattern[i : i + 1])
                i += 1
            if items:
                out += b"[" + (b"^" if negate else b"") + items + b"]"
            else:
                out += b"." if negate else b"(?!)"
        elif c == 92 and n - i >= 2:  # '\\' escapes the next byte
            i += 1
            out += re.escape(pattern[i : i + 1])
        else:
            out += re.escape(pattern[i : i + 1])
        i += 1
    return bytes(out)


@lru_cache(maxsize=256)
def compile_glob(pattern: bytes, nocase: bool = False) -> Callable[[bytes], bool]:
    """Return a predicate telling whether a string matches ``pattern``."""
    if pattern == b"*":
        return bool  # every non-empty string
    flags = re.DOTALL | (re.IGNORECASE if nocase else 0)
    fullmatch = re.compile(_translate(pattern), flags).fullmatch

    def match(s: bytes) -> bool:
        return bool(s) and fullmatch(s) is not None

    return match


def glob_match(pattern: bytes, s: bytes, nocase: bool = False) -> bool:
    """Whether ``s`` matches the glob ``pattern`` as Redis's stringmatchlen decides."""
    return compile_glob(pattern, nocase)(s)
