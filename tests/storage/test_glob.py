"""storage.glob against a direct restatement of Redis's stringmatchlen.

The reference below walks the pattern exactly as util.c does, including its
reads of the NUL terminator past the end of the pattern and C's signed chars
in ranges, so that hypothesis can compare it with the compiled matcher.
"""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st
from rill.storage.glob import compile_glob, glob_match

from tests.support import examples


def _sc(b: int) -> int:
    return b - 256 if b >= 128 else b


def _tl(c: int) -> int:
    return c + 32 if 65 <= c <= 90 else c


def reference_match(pattern: bytes, string: bytes, nocase: bool = False) -> bool:
    """util.c's stringmatchlen, step by step (p/s are offsets, plen/slen counts left)."""

    def at(buf: bytes, i: int) -> int:
        return buf[i] if i < len(buf) else 0  # the sds NUL terminator

    def impl(p: int, plen: int, s: int, slen: int, skip: list[bool]) -> bool:
        while plen and slen:
            c = pattern[p]
            if c == 42:  # '*'
                while plen and at(pattern, p + 1) == 42:
                    p += 1
                    plen -= 1
                if plen == 1:
                    return True
                while slen:
                    if impl(p + 1, plen - 1, s, slen, skip):
                        return True
                    if skip[0]:
                        return False
                    s += 1
                    slen -= 1
                skip[0] = True
                return False
            elif c == 63:  # '?'
                s += 1
                slen -= 1
            elif c == 91:  # '['
                p += 1
                plen -= 1
                negate = at(pattern, p) == 94
                if negate:
                    p += 1
                    plen -= 1
                match = False
                while True:
                    if at(pattern, p) == 92 and plen >= 2:
                        p += 1
                        plen -= 1
                        if pattern[p] == string[s]:
                            match = True
                    elif at(pattern, p) == 93:
                        break
                    elif plen == 0:
                        p -= 1
                        plen += 1
                        break
                    elif plen >= 3 and pattern[p + 1] == 45:
                        start, end, ch = _sc(pattern[p]), _sc(pattern[p + 2]), _sc(string[s])
                        if start > end:
                            start, end = end, start
                        if nocase:
                            start, end, ch = _tl(start), _tl(end), _tl(ch)
                        p += 2
                        plen -= 2
                        if start <= ch <= end:
                            match = True
                    else:
                        if nocase:
                            if _tl(_sc(pattern[p])) == _tl(_sc(string[s])):
                                match = True
                        elif pattern[p] == string[s]:
                            match = True
                    p += 1
                    plen -= 1
                if negate:
                    match = not match
                if not match:
                    return False
                s += 1
                slen -= 1
            else:
                if c == 92 and plen >= 2:
                    p += 1
                    plen -= 1
                a, b = pattern[p], string[s]
                if nocase:
                    a, b = _tl(_sc(a)), _tl(_sc(b))
                if a != b:
                    return False
                s += 1
                slen -= 1
            p += 1
            plen -= 1
            if slen == 0:
                while at(pattern, p) == 42:
                    p += 1
                    plen -= 1
                break
        return plen == 0 and slen == 0

    return impl(0, len(pattern), 0, len(string), [False])


PATTERN_BYTES = b"ab*?[]^-\\A\x00\xff\x80Z"
STRING_BYTES = b"abAB-]^\\[*\x00\xff\x80\x7fz"

patterns = st.lists(st.sampled_from(list(PATTERN_BYTES)), max_size=10).map(bytes)
strings = st.lists(st.sampled_from(list(STRING_BYTES)), max_size=8).map(bytes)


@settings(max_examples=examples(1500, ci=500), deadline=None)
@given(patterns, strings, st.booleans())
def test_matches_stringmatchlen(pattern: bytes, s: bytes, nocase: bool) -> None:
    assert glob_match(pattern, s, nocase) == reference_match(pattern, s, nocase), (pattern, s, nocase)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=8), st.binary(max_size=6), st.booleans())
def test_matches_stringmatchlen_any_bytes(pattern: bytes, s: bytes, nocase: bool) -> None:
    assert glob_match(pattern, s, nocase) == reference_match(pattern, s, nocase)


def test_documented_quirks() -> None:
    cases = [
        (b"*", b"", False),  # the empty string matches only the empty pattern
        (b"", b"", True),
        (b"", b"a", False),
        (b"h?llo", b"hello", True),
        (b"h*llo", b"heeeello", True),
        (b"h[ae]llo", b"hallo", True),
        (b"h[^e]llo", b"hello", False),
        (b"h[a-b]llo", b"hbllo", True),
        (b"h[b-a]llo", b"hbllo", True),  # reversed range
        (b"[]a]", b"]", False),  # [] is an empty set: nothing matches
        (b"[^]", b"x", True),
        (b"[a-]", b"^", True),  # a range from ']' to 'a'
        (b"[abc", b"c", True),  # unclosed set takes the rest
        (b"a\\*b", b"a*b", True),
        (b"a\\*b", b"axb", False),
        (b"a\\", b"a\\", True),
        (b"[\x01-\xff]", b"\x80", False),  # signed chars: 0x01..-1 is empty
        (b"[\xff-\x01]", b"\x00", True),  # -1..1
        (b"a*", b"a", True),
        (b"a*?", b"a", False),
    ]
    for pattern, s, expected in cases:
        assert glob_match(pattern, s) is expected, (pattern, s)
        assert reference_match(pattern, s) is expected, (pattern, s)


def test_nocase() -> None:
    assert glob_match(b"HeLLo*", b"hello world", nocase=True)
    assert not glob_match(b"HeLLo*", b"hello world")
    assert glob_match(b"[A-Z]", b"q", nocase=True)
    assert not glob_match(b"[\\A]", b"a", nocase=True)  # escaped set members are exact


def test_many_stars_do_not_backtrack_exponentially() -> None:
    pattern = b"a*" * 30 + b"b"
    match = compile_glob(pattern)
    start = time.perf_counter()
    assert not match(b"a" * 200)
    assert match(b"a" * 200 + b"b")
    assert time.perf_counter() - start < 0.5
