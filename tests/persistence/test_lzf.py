"""LZF: the pure-Python decoder against the C compressor, and refusal of malformed input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rill.persistence import lzf

needs_c = pytest.mark.requires(modules=["lzf"])  # python-lzf, the C compressor

# Compressible inputs: runs and repeats over a small alphabet (overlapping back-references).
texty = st.lists(st.sampled_from([b"a", b"b", b"ab", b"abc", b"xyz" * 5, b"\x00", b"hello "]), max_size=400).map(
    b"".join
)


def test_hand_made_streams():
    # literal run "ab", then a back-reference of length 4 at distance 2 (overlapping copy)
    assert lzf.decompress_py(b"\x01ab\x40\x01", 6) == b"ababab"
    # a long back-reference: ctrl length 7 plus an extra length byte
    assert lzf.decompress_py(b"\x00a\xe0\x05\x00", 1 + 7 + 5 + 2) == b"a" * 15


@pytest.mark.parametrize(
    "data, out_len",
    [
        (b"\x05ab", 6),  # literal run past the end
        (b"\x20", 3),  # back-reference without its offset byte
        (b"\x00a\x20\x05", 4),  # back-reference before the start of the output
        (b"\x01ab", 3),  # shorter than announced
        (b"\x02abc", 2),  # longer than announced
    ],
)
def test_malformed_is_refused(data, out_len):
    with pytest.raises(lzf.LZFError):
        lzf.decompress_py(data, out_len)
    with pytest.raises(lzf.LZFError):
        lzf.decompress(data, out_len)


@needs_c
@settings(max_examples=200, deadline=None)
@given(texty)
def test_python_decoder_reads_c_output(data):
    z = lzf.compress(data, len(data) + 64)
    if not data:
        assert z is None or lzf.decompress(z, 0) == b""
        return
    assert z is not None
    assert lzf.decompress_py(z, len(data)) == data
    assert lzf.decompress(z, len(data)) == data


@needs_c
def test_compress_respects_max_len():
    assert lzf.compress(b"abcdefghijklmnopqrstuvwxyz", 10) is None
    z = lzf.compress(b"a" * 100, 96)
    assert z is not None and len(z) <= 96


@needs_c
@pytest.mark.parametrize("data, kept", [
    # 17 bytes would fit the 18 Redis allows, but its checks give up first.
    (b"babaaaababababaaaababa", False),
    (b"5158487z965158487z96q", False),
    (b"aechebdbcafcaechebdbcafc", False),
    (b"abc" * 10, True),
])
def test_compress_gives_up_where_redis_does(data, kept):
    assert (lzf.compress(data, len(data) - 4) is not None) is kept


def _near_limit_strings() -> list[bytes]:
    """Strings whose compressed size lands near the n-4 limit, where the checks matter."""
    import random

    rng = random.Random(5)
    out = []
    while len(out) < 300:
        n = rng.randint(21, 400)
        alpha = rng.choice([b"ab", b"abcdefgh", bytes(range(256)), b"xyz0123456789"])
        reps = rng.randint(1, 3)
        s = (bytes(rng.choice(alpha) for _ in range(max(1, n // reps))) * reps)[:n].ljust(21, b"q")
        z = lzf._lzf.compress(s, len(s))
        if z is not None and len(z) + 8 >= len(s) - 4:
            out.append(s)
    return out


@needs_c
def test_dump_compresses_exactly_what_redis_compresses(sbs):
    """DUMP (and so RDB) strings near the limit are byte for byte Redis's."""
    for s in _near_limit_strings():
        sbs.rill.call("SET", "k", s)
        sbs.oracle.call("SET", "k", s)
        sbs.check("DUMP", "k")
