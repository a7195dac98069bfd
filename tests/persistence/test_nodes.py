"""persistence/nodes.py: a stream's nodes taken in one compiled loop load exactly what
rdb's per-string loop loads, and anything that loop would refuse is left to it."""

from __future__ import annotations

import io
import random
import struct

import pytest
from rill.persistence import nodes, rdb
from rill.persistence.crc64 import crc64
from rill.storage.stream import Stream, make_id

NOW = 1700000000000


def _stream(entries: int, seed: int) -> Stream:
    """Entries whose values repeat in places and not in others, so LZF writes literal
    runs, short and long references, and references that overlap what they write."""
    rnd = random.Random(seed)
    s = Stream()
    for i in range(entries):
        value = rnd.choice([b"x" * rnd.randint(1, 300), b"%d" % rnd.getrandbits(40), bytes(rnd.randbytes(12)),
                            b"abc" * rnd.randint(1, 50)])
        s.add([b"field", value, b"n", b"%d" % i], make_id(NOW + i, rnd.randint(0, 3)))
    return s


def _image(s: Stream, compression: bool) -> bytes:
    buf = io.BytesIO()
    rdb.save_file(buf, [(0, {b"s": s}, {})], rdb.SaveOptions(compression=compression))
    return buf.getvalue()


def _load(image: bytes, fast: bool, monkeypatch: pytest.MonkeyPatch):
    with monkeypatch.context() as m:
        m.setattr(nodes, "COMPILED", fast)
        return rdb.load(image)


def _nodes_of(s: Stream) -> list[tuple[int, bytes]]:
    return [(k, s._rax.get(k)) for k in s._rax]


@pytest.mark.parametrize("compression", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_the_loop_loads_what_the_reader_loads(compression, seed, monkeypatch):
    s = _stream(600, seed)
    image = _image(s, compression)
    fast = _load(image, True, monkeypatch).dbs[0][b"s"]
    slow = _load(image, False, monkeypatch).dbs[0][b"s"]
    assert _nodes_of(fast) == _nodes_of(slow) == list(s.nodes())
    assert (fast.length, fast.last_id, fast.first_id) == (slow.length, slow.last_id, slow.first_id)


def _run(lps: list[bytes], keys: list[int], compress: bool = True) -> tuple[bytes, list[int]]:
    """Node strings as a stream stores them, and where each node starts."""
    out = bytearray()
    starts = []
    for k, lp in zip(keys, lps, strict=True):
        starts.append(len(out))
        out += b"\x10" + k.to_bytes(16, "big") + rdb.encode_string(lp, compress=compress)
    return bytes(out), starts


def _lps(n: int) -> tuple[list[int], list[bytes]]:
    s = _stream(n * 100, n)
    pairs = list(s.nodes())
    return [k for k, _ in pairs], [lp for _, lp in pairs]


def test_read_nodes_takes_a_whole_run_in_either_mode():
    """The same function runs compiled or not; rdb only calls it compiled."""
    keys, lps = _lps(5)
    data, _ = _run(lps, keys)
    got_keys: list[int] = []
    got_lps: list[bytes] = []
    assert nodes.read_nodes(data, 0, len(keys), -1, got_keys, got_lps) == len(data)
    assert (got_keys, got_lps) == (keys, lps)


@pytest.mark.parametrize("damage", ["key_size", "not_ascending", "int_encoded", "lzf_cut", "lzf_length",
                                    "lp_header", "lp_end", "lp_empty", "truncated"])
def test_read_nodes_stops_before_a_node_it_does_not_take(damage):
    keys, lps = _lps(5)
    bad = 3
    data, starts = _run(lps, keys)
    body = bytearray(data)
    at = starts[bad]
    if damage == "key_size":
        body[at] = 0x0F
    elif damage == "not_ascending":
        body[at + 1:at + 17] = keys[bad - 1].to_bytes(16, "big")
    elif damage == "int_encoded":
        body[at + 17] = 0xC0
    elif damage == "lzf_cut":
        assert body[at + 17] == 0xC3
        body[at + 18] = 0x01  # a compressed length far shorter than the data
    elif damage == "lzf_length":
        assert body[at + 17] == 0xC3
        clen_size = 1 if body[at + 18] < 0x40 else 2
        body[at + 18 + clen_size + 1] ^= 0x01  # the expanded length no longer matches
    elif damage in ("lp_header", "lp_end", "lp_empty"):
        lp = bytearray(lps[bad])
        if damage == "lp_header":
            lp[0] ^= 0x01
        elif damage == "lp_end":
            lp[-1] = 0xFE
        else:
            lp = bytearray(struct.pack("<IH", 7, 0) + b"\xff")
        fixed, _ = _run([bytes(lp)], [keys[bad]])
        body[at:starts[bad + 1]] = fixed
    else:
        body = body[:at + 30]
    got_keys: list[int] = []
    got_lps: list[bytes] = []
    assert nodes.read_nodes(bytes(body), 0, len(keys), -1, got_keys, got_lps) == at
    assert got_keys == keys[:bad] and got_lps == lps[:bad]


def test_a_corrupt_node_is_refused_as_before(monkeypatch):
    """The loop leaves a bad node to rdb's reader, whose error and offset stand."""
    s = _stream(800, 7)
    image = _image(s, True)
    body = bytearray(image[:-8])
    third = list(s.nodes())[2][0]
    at = body.index(b"\x10" + third.to_bytes(16, "big")) + 17
    assert body[at] == 0xC3
    body[at + 1] = 0x01  # the compressed run cut to one byte: LZF fails
    damaged = bytes(body) + struct.pack("<Q", crc64(bytes(body)))
    errors = []
    for fast in (True, False):
        with pytest.raises(rdb.RdbError) as e:
            _load(damaged, fast, monkeypatch)
        errors.append((str(e.value), e.value.offset))
    assert errors[0] == errors[1]
    assert "invalid LZF compressed string" in errors[0][0]
