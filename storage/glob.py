"""Redis's glob-style pattern matching (KEYS, SCAN MATCH, CONFIG GET, PSUBSCRIBE).

A pattern is compiled once (and cached) into a regular expression whose matches
are exactly those of Redis's ``stringmatchlen``, quirks included:

* the empty string matches only the empty pattern (``*`` does not match it);
* ``\\`` escapes the next byte, inside and outside sets; a trailing ``\\`` is literal;
* a set ``[...]`` ends at the first unescaped ``]`` (so ``[]`` matches nothing and
  ``[^]`` anything), or takes the rest of the pattern when unclosed;
* ``x-y`` inside a set is a range between two bytes compared as C's *signed*
  chars (Redis runs on x86, where ``char`` is signed), ends swapped if reversed,
  and ``[a-]`` is the range from ``a`` to ``]``;
* with ``nocase`` literals and ranges fold ASCII case, escaped bytes inside a set
  do not.

Instead of translating a set into regex syntax, its membership is decided by
evaluating Redis's rules for each of the 256 byte values, and the set is
emitted as an explicit class: every quirk of sets comes out right by construction.

Matching runs in linear-ish time however many ``*`` the pattern has: the
segments between stars have fixed lengths, so committing each middle segment to
its leftmost occurrence (an atomic group) is exact, and nothing backtracks
exponentially ("a*a*a*...b" against a long run of "a" is instant).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

_STAR = object()
_ANY = object()


def _signed(b: int) -> int:
    return b - 256 if b >= 128 else b


def _lower(c: int) -> int:
    """C's tolower in the C locale, applied to a (possibly negative) char value."""
    return c + 32 if 65 <= c <= 90 else c


def _set_members(pattern: bytes, i: int, nocase: bool) -> tuple[frozenset[int], int]:
    """Parse the set starting right after ``[`` at ``i``; (member bytes, index after it)."""
    n = len(pattern)
    negate = i < n and pattern[i] == 94  # '^'
    if negate:
        i += 1
    escaped: list[int] = []
    literals: list[int] = []
    ranges: list[tuple[int, int]] = []
    while True:
        left = n - i
        if left >= 2 and pattern[i] == 92:  # '\\'
            i += 1
            escaped.append(pattern[i])
        elif left > 0 and pattern[i] == 93:  # ']'
            break
        elif left == 0:
            i -= 1  # unclosed: the set swallowed the rest of the pattern
            break
        elif left >= 3 and pattern[i + 1] == 45:  # 'x-y'
            lo, hi = _signed(pattern[i]), _signed(pattern[i + 2])
            if lo > hi:
                lo, hi = hi, lo
            if nocase:
                lo, hi = _lower(lo), _lower(hi)
            ranges.append((lo, hi))
            i += 2
        else:
            literals.append(pattern[i])
        i += 1
    members = set(escaped)  # escaped bytes compare exactly, even with nocase
    if nocase:
        folded = {_lower(x) for x in literals}
        members.update(b for b in range(256) if _lower(b) in folded)
        for lo, hi in ranges:
            members.update(b for b in range(256) if lo <= _lower(_signed(b)) <= hi)
    else:
        members.update(literals)
        for lo, hi in ranges:
            members.update(v & 0xFF for v in range(max(lo, -128), min(hi, 127) + 1))
    if negate:
        members = set(range(256)) - members
    return frozenset(members), i + 1


def _tokens(pattern: bytes, nocase: bool) -> list:
    """Split a pattern into _STAR, _ANY, literal byte (int) and set (frozenset) tokens."""
    out: list = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == 42:  # '*'
            if not out or out[-1] is not _STAR:
                out.append(_STAR)
            i += 1
        elif c == 63:  # '?'
            out.append(_ANY)
            i += 1
        elif c == 91:  # '['
            members, i = _set_members(pattern, i + 1, nocase)
            out.append(members)
        else:
            if c == 92 and n - i >= 2:  # '\\' escapes the next byte
                i += 1
                c = pattern[i]
            out.append(c)
            i += 1
    return out


def _class(members: frozenset[int]) -> bytes:
    if not members:
        return b"(?!)"
    if len(members) == 256:
        return b"."
    parts = bytearray(b"[")
    run_start = prev = -2
    for b in sorted(members) + [-2]:
        if b == prev + 1:
            prev = b
            continue
        if run_start >= 0:
            parts += b"\\x%02x" % run_start
            if prev > run_start:
                parts += b"-\\x%02x" % prev
        run_start = prev = b
    parts += b"]"
    return bytes(parts)


def _unit(tok: object, nocase: bool) -> bytes:
    if tok is _ANY:
        return b"."
    if type(tok) is int:
        if nocase and (65 <= tok <= 90 or 97 <= tok <= 122):
            return b"[\\x%02x\\x%02x]" % (tok | 32, tok & ~32)
        return b"\\x%02x" % tok
    return _class(tok)  # type: ignore[arg-type]


def translate(pattern: bytes, nocase: bool = False) -> bytes:
    """The regular expression (for ``fullmatch`` on non-empty strings) of a glob."""
    segments: list[bytes] = [b""]
    for tok in _tokens(pattern, nocase):
        if tok is _STAR:
            segments.append(b"")
        else:
            segments[-1] += _unit(tok, nocase)
    if len(segments) == 1:
        return segments[0]
    out = segments[0]
    for seg in segments[1:-1]:
        out += b"(?>.*?" + seg + b")"
    return out + b".*" + segments[-1]


@lru_cache(maxsize=256)
def compile_glob(pattern: bytes, nocase: bool = False) -> Callable[[bytes], bool]:
    """Return a predicate telling whether a string matches ``pattern`` as Redis decides."""
    if pattern == b"*":
        return bool  # every non-empty string
    if not pattern:
        return lambda s: not s
    fullmatch = re.compile(translate(pattern, nocase), re.DOTALL).fullmatch

    def match(s: bytes) -> bool:
        return bool(s) and fullmatch(s) is not None

    return match


def glob_match(pattern: bytes, s: bytes, nocase: bool = False) -> bool:
    """Whether ``s`` matches the glob ``pattern`` as Redis's stringmatchlen decides."""
    return compile_glob(bytes(pattern), nocase)(s)
