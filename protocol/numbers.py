"""Redis's strict integer parse (util.c's string2ll), the one copy above storage/.

Everything that reads an integer argument the way Redis does (request lengths, command
arguments, CONFIG values, timeouts) uses this function, so "12", "-3" and "0" parse while
"+1", "01", "-0", " 1" and anything outside int64 do not.

storage/ may not import protocol/, so it keeps its own copy under Redis's own name for it,
``storage.listpack.string_to_int64`` (lpStringToInt64); tests/protocol/test_numbers.py
checks that the two agree.
"""

from __future__ import annotations

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def string2ll(s: bytes) -> int | None:
    """The int64 ``s`` spells: optional '-', no '+', no leading zeros, no spaces; else None."""
    n = len(s)
    if n == 0 or n > 20:
        return None
    if s.isdigit():
        if s[0] == 48 and n > 1:
            return None
    elif not (s[0] == 45 and n > 1 and s[1] != 48 and s[1:].isdigit()):
        return None
    v = int(s)
    if v < INT64_MIN or v > INT64_MAX:
        return None
    return v
