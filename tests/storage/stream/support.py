"""Helpers shared by the stream storage tests: short ID and stream constructors, and the
parsing of a real redis-server's DUMP used by the side-by-side tests."""

from __future__ import annotations

from rill.storage.stream import MASK64, Stream, make_id


def I(ms: int, seq: int = 0) -> int:  # noqa: E743 - short ID constructor for tests
    return make_id(ms, seq)


def stream_with(node_max_entries: int = 100, node_max_bytes: int = 4096) -> Stream:
    cls = type(
        "TStream",
        (Stream,),
        {"node_max_entries": node_max_entries, "node_max_bytes": node_max_bytes, "__slots__": ()},
    )
    return cls()


def node_list(s: Stream) -> list[tuple[int, bytes]]:
    return list(s.nodes())


def to_int64(v: int) -> int:
    v &= MASK64
    return v - (1 << 64) if v >= 1 << 63 else v


def _rdb_len(b, p):
    c = b[p]
    if c >> 6 == 0:
        return c & 63, p + 1
    if c >> 6 == 1:
        return ((c & 63) << 8) | b[p + 1], p + 2
    if c == 0x80:
        return int.from_bytes(b[p + 1 : p + 5], "big"), p + 5
    if c == 0x81:
        return int.from_bytes(b[p + 1 : p + 9], "big"), p + 9
    raise AssertionError("encoded length where a plain one was expected")


def dump_nodes(r, key):
    """Node keys, listpacks and metadata from DUMP (type 19, rdbcompression off)."""
    d = r.execute_command("DUMP", key)
    assert d[0] == 19
    n, p = _rdb_len(d, 1)
    nodes = []
    for _ in range(n):
        kl, p = _rdb_len(d, p)
        k = d[p : p + kl]
        p += kl
        ll, p = _rdb_len(d, p)
        nodes.append((int.from_bytes(k, "big"), d[p : p + ll]))
        p += ll
    meta = []
    for _ in range(8):
        v, p = _rdb_len(d, p)
        meta.append(v)
    return nodes, meta


def pairs(x):
    return dict(zip(x[0::2], x[1::2], strict=True))


def parse_id(b):
    ms, seq = b.split(b"-")
    return I(int(ms), int(seq))
