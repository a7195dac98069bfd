"""HyperLogLog commands side by side with redis-server 7.0.15 (RESP2 and RESP3).

Besides the replies, the stored strings (GET) are compared after every kind of
write, so the sparse opcodes and dense registers are proven byte-identical.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import RawClient, inproc_keyevents, keyevents
from tests.support import run_inproc as _run


@pytest.fixture(params=["resp2", "resp3"])
def oracle(request):
    """The side-by-side checker, once per protocol version."""
    return request.getfixturevalue("sbs" if request.param == "resp2" else "sbs3")


def _elements(tag: str, n: int) -> list[str]:
    return [f"{tag}-{i}" for i in range(n)]


def test_pfadd_pfcount_and_stored_bytes(oracle):
    oracle.run([
        ("PFADD", "h"),
        ("GET", "h"),
        ("PFCOUNT", "h"),
        ("GET", "h"),  # the cached count, now valid
        ("OBJECT", "ENCODING", "h"),
        ("PFADD", "h", "a", "b", "c"),
        ("PFADD", "h", "a", "b", "c"),
        ("PFADD", "h", ""),
        ("GET", "h"),
        ("PFCOUNT", "h"),
        ("PFCOUNT", "h"),
        ("GET", "h"),
        ("PFCOUNT", "nokey"),
        ("EXISTS", "nokey"),
        ("PFADD", "h", *_elements("x", 200)),
        ("GET", "h"),
        ("PFDEBUG", "DECODE", "h"),
        ("PFDEBUG", "ENCODING", "h"),
        ("PFCOUNT", "h"),
        ("PFADD", "big", *_elements("y", 5000)),
        ("PFDEBUG", "ENCODING", "big"),
        ("GET", "big"),
        ("PFCOUNT", "big"),
        ("PFADD", "big", *_elements("y", 100)),
        ("PFADD", "big", *_elements("z", 100)),
        ("GET", "big"),
        ("PFCOUNT", "big"),
    ])


def test_pfcount_of_several_keys(oracle):
    oracle.run([
        ("PFADD", "a", *_elements("a", 100)),
        ("PFADD", "b", *_elements("b", 3000)),
        ("PFADD", "c", *_elements("a", 50), *_elements("c", 10)),
        ("PFCOUNT", "a", "b"),
        ("PFCOUNT", "a", "c", "nokey"),
        ("PFCOUNT", "nokey", "nokey2"),
        ("GET", "a"),  # the union is not stored, nor are the caches refreshed
        ("GET", "c"),
        ("PFCOUNT", "a", "b", "c"),
    ])


def test_pfmerge(oracle):
    oracle.run([
        ("PFADD", "s1", *_elements("s", 40)),
        ("PFADD", "s2", *_elements("t", 60)),
        ("PFADD", "d1", *_elements("d", 4000)),
        ("PFMERGE", "m1", "s1", "s2"),
        ("GET", "m1"),
        ("PFCOUNT", "m1"),
        ("PFMERGE", "m1", "s1", "s2"),  # the destination merges with itself too
        ("GET", "m1"),
        ("PFMERGE", "m2", "s1", "d1"),  # a dense source makes the result dense
        ("GET", "m2"),
        ("PFMERGE", "s1", "s2", "d1"),  # a sparse destination goes dense
        ("GET", "s1"),
        ("PFMERGE", "d1", "s2"),
        ("GET", "d1"),
        ("PFMERGE", "m3"),
        ("GET", "m3"),
        ("PFMERGE", "m4", "nokey"),
        ("GET", "m4"),
        ("PFCOUNT", "m1", "m2", "m3", "m4"),
        ("CONFIG", "SET", "hll-sparse-max-bytes", "60"),
        ("PFMERGE", "m5", "s2"),  # promoted while the registers are written
        ("GET", "m5"),
        ("CONFIG", "SET", "hll-sparse-max-bytes", "3000"),
    ])


def test_promotion_follows_hll_sparse_max_bytes(oracle):
    oracle.run([
        ("CONFIG", "SET", "hll-sparse-max-bytes", "40"),
        ("PFADD", "h", *_elements("p", 5)),
        ("PFDEBUG", "ENCODING", "h"),
        ("PFADD", "h", *_elements("q", 30)),
        ("PFDEBUG", "ENCODING", "h"),
        ("GET", "h"),
        ("CONFIG", "SET", "hll-sparse-max-bytes", "3000"),
    ])
    for i in range(0, 3000, 250):
        oracle.check("PFADD", "g", *_elements(f"r{i}", 250))
        oracle.check("PFDEBUG", "ENCODING", "g")
        oracle.check("PFCOUNT", "g")
    oracle.check("GET", "g")


def test_pfdebug(oracle):
    oracle.run([
        ("PFADD", "h", "a", "b", "c"),
        ("PFDEBUG", "GETREG", "h"),
        ("PFDEBUG", "ENCODING", "h"),  # GETREG converted it
        ("GET", "h"),
        ("PFADD", "s", "x", "y"),
        ("PFDEBUG", "decode", "s"),
        ("PFDEBUG", "TODENSE", "s"),
        ("PFDEBUG", "TODENSE", "s"),
        ("PFDEBUG", "DECODE", "s"),
        ("GET", "s"),
        ("PFDEBUG", "nosuch", "s"),
        ("PFDEBUG", "NoSuch", "nokey"),  # the key is looked up first
        ("PFDEBUG", "GETREG", "nokey"),
        ("PFDEBUG", "GETREG"),
        ("PFDEBUG", "GETREG", "h", "extra"),
        ("SET", "str", "abc"),
        ("PFDEBUG", "ENCODING", "str"),
        ("PFSELFTEST",),
        ("PFSELFTEST", "x"),
    ])


def test_type_and_arity_errors(oracle):
    oracle.run([
        ("RPUSH", "list", "a"),
        ("SET", "str", "not an hll at all"),
        ("SET", "int", "12345678901234567"),
        ("PFADD", "list", "a"),
        ("PFADD", "str", "a"),
        ("PFADD", "int", "a"),
        ("PFCOUNT", "list"),
        ("PFCOUNT", "str"),
        ("PFADD", "ok", "a"),
        ("PFCOUNT", "ok", "str"),
        ("PFCOUNT", "ok", "list"),
        ("PFMERGE", "ok", "str"),
        ("PFMERGE", "str", "ok"),
        ("PFMERGE", "new", "ok", "list"),
        ("EXISTS", "new"),
        ("PFDEBUG", "GETREG", "list"),
        ("PFADD",),
        ("PFCOUNT",),
        ("PFMERGE",),
    ])


def test_invalid_strings_and_corruption(oracle):
    oracle.check("PFADD", "h", "a", "b", "c")
    sparse = oracle.check("GET", "h").split(b"\r\n")[1]
    oracle.check("PFADD", "d", *_elements("d", 3000))
    oracle.run([
        ("SET", "short", "HYLL\x01"),
        ("SET", "magic", b"HYLX" + sparse[4:]),
        ("SET", "enc", sparse[:4] + b"\x02" + sparse[5:]),
        ("SETRANGE", "d", "12300", "xx"),  # dense one byte too long
        ("SET", "trail", sparse + b"hello"),
        ("SET", "trunc", sparse[:-1]),
        ("SET", "empty", sparse[:16]),
        ("SET", "val", sparse + b"\x80"),  # a VAL just past the last register
        ("SETRANGE", "dense0", "0", "HYLL\x00"),
    ])
    for key in ("short", "magic", "enc", "d", "trail", "trunc", "empty", "val", "dense0"):
        oracle.run([
            ("PFCOUNT", key),
            ("PFCOUNT", key, "h"),
            ("PFMERGE", "dst", key),
            ("PFDEBUG", "ENCODING", key),
            ("PFDEBUG", "DECODE", key),
            ("PFDEBUG", "TODENSE", key),
            ("GET", key),
            ("PFADD", key, "one", "two", "three"),
            ("GET", key),
            ("PFCOUNT", key),
            ("GET", "dst"),
        ])


def test_cached_cardinality_bytes(oracle):
    oracle.run([
        ("PFADD", "h", "a", "b", "c"),
        ("GETRANGE", "h", "8", "15"),
        ("PFCOUNT", "h"),
        ("GETRANGE", "h", "8", "15"),
        ("PFADD", "h", "a", "b", "c"),
        ("GETRANGE", "h", "8", "15"),
        ("PFADD", "h", "1", "2", "3"),
        ("GETRANGE", "h", "8", "15"),
        # A forged cache is believed as long as it is marked valid.
        ("SETRANGE", "h", "8", "\x2a\x00\x00\x00\x00\x00\x00\x00"),
        ("PFCOUNT", "h"),
        ("SETRANGE", "h", "15", "\x80"),
        ("PFCOUNT", "h"),
    ])


def test_overflowing_estimate(oracle):
    oracle.check("PFADD", "h", *_elements("o", 5000))
    dense = oracle.check("GET", "h").split(b"\r\n", 1)[1][:-2]
    for byte in (b"\xff", b"\xaa"):
        forged = dense[:15] + b"\x80" + byte * (len(dense) - 16)
        oracle.run([
            ("SET", "f", forged),
            ("PFCOUNT", "f"),
            ("GETRANGE", "f", "8", "15"),
            ("PFCOUNT", "f", "h"),
        ])


def test_dirty_counts(oracle):
    def changes():
        mine, theirs = oracle.both("INFO", "persistence")
        pick = [line for line in (mine, theirs) for line in line.split(b"\r\n")
                if line.startswith(b"rdb_changes_since_last_save")]
        return pick[0], pick[1]

    oracle.both("CONFIG", "RESETSTAT")
    base_mine, base_theirs = (int(x.split(b":")[1]) for x in changes())
    for args in [("PFADD", "h", "a", "b", "c", "d"), ("PFADD", "h", "a"), ("PFCOUNT", "h"),
                 ("PFCOUNT", "h"), ("PFMERGE", "m", "h"), ("PFDEBUG", "TODENSE", "m"),
                 ("PFDEBUG", "GETREG", "h"), ("PFDEBUG", "ENCODING", "h"), ("PFCOUNT", "h", "m")]:
        oracle.check(*args)
        mine, theirs = (int(x.split(b":")[1]) for x in changes())
        assert mine - base_mine == theirs - base_theirs, args


def test_watch_sees_pfcount_cache_refresh(rill_server, oracle_server):
    def run(port: int) -> list[bytes]:
        a, b = RawClient(port), RawClient(port)
        a.call("FLUSHALL")
        a.call("PFADD", "h", "x", "y")
        out = []
        for writer in (("PFCOUNT", "h"), ("PFCOUNT", "h"), ("PFDEBUG", "TODENSE", "h"),
                       ("PFADD", "h", "x"), ("PFADD", "h", "zz"), ("PFMERGE", "h")):
            a.call("WATCH", "h")
            b.call(*writer)
            a.call("MULTI")
            a.call("PING")
            out.append(a.call("EXEC"))
        a.close()
        b.close()
        return out

    assert run(rill_server.port) == run(oracle_server.port)


NOTIFY_SCRIPT = [
    ("PFADD", "h", "a"), ("PFADD", "h", "a"), ("PFADD", "h"), ("PFCOUNT", "h"), ("PFCOUNT", "h", "x"),
    ("PFMERGE", "m", "h"), ("PFMERGE", "m"), ("PFDEBUG", "TODENSE", "m"), ("PFDEBUG", "GETREG", "h"),
    ("PFADD", "new"),
]


def _events(port: int, script) -> list[tuple[bytes, bytes]]:
    return keyevents(port, script, "KEA")


def test_keyspace_events_match_redis(rill_server, oracle_server):
    theirs = _events(oracle_server.port, NOTIFY_SCRIPT)
    assert theirs and _events(rill_server.port, NOTIFY_SCRIPT) == theirs


def test_keyspace_events_inproc(oracle_server, inproc, monkeypatch):
    server, c, _ = inproc
    theirs = _events(oracle_server.port, NOTIFY_SCRIPT)
    assert theirs and inproc_keyevents(server, c, NOTIFY_SCRIPT, monkeypatch) == theirs


def test_propagation(inproc):
    """What Redis 7.0.15 writes to its AOF for the same commands (checked by hand)."""
    server, c, effects = inproc
    for args in [("PFADD", "h", "a", "b", "c"), ("PFADD", "h", "a"), ("PFCOUNT", "h"),
                 ("PFCOUNT", "h"), ("PFCOUNT", "h", "nokey"), ("PFMERGE", "d", "h"),
                 ("PFDEBUG", "TODENSE", "h"), ("PFDEBUG", "TODENSE", "h"),
                 ("PFDEBUG", "GETREG", "d"), ("PFDEBUG", "ENCODING", "h"), ("PFCOUNT", "d")]:
        _run(server, c, *args)
    assert [argv for _, argv in effects] == [
        [b"PFADD", b"h", b"a", b"b", b"c"],
        [b"PFCOUNT", b"h"],
        [b"PFMERGE", b"d", b"h"],
        [b"PFDEBUG", b"TODENSE", b"h"],
        [b"PFDEBUG", b"GETREG", b"d"],
        [b"PFCOUNT", b"d"],
    ]


def test_pfcount_cache_refresh_inside_multi_propagates(inproc):
    """Alone in its transaction, the refresh travels unwrapped (as Redis's AOF shows)."""
    server, c, effects = inproc
    _run(server, c, "PFADD", "h", "a")
    effects.clear()
    for args in [("MULTI",), ("PFCOUNT", "h"), ("PFCOUNT", "h"), ("EXEC",)]:
        _run(server, c, *args)
    assert [argv for _, argv in effects] == [[b"PFCOUNT", b"h"]]


# -- properties -----------------------------------------------------------------------
_batches = st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32), batches=_batches, big=st.integers(0, 6000),
       max_bytes=st.sampled_from([3000, 3000, 200, 1000]))
def test_random_batches_match_redis(sbs, seed, batches, big, max_bytes):
    rng = random.Random(seed)
    sbs.check("FLUSHALL")
    sbs.check("CONFIG", "SET", "hll-sparse-max-bytes", str(max_bytes))
    try:
        universe = [rng.randbytes(rng.randrange(0, 20)) for _ in range(sum(batches) + 1)]
        for n in batches:
            sbs.check("PFADD", "a", *rng.sample(universe, n))
            sbs.check("GET", "a")
            sbs.check("PFCOUNT", "a")
        sbs.check("PFADD", "b", *(b"%d" % rng.getrandbits(40) for _ in range(big)))
        sbs.check("PFADD", "c", *rng.sample(universe, len(universe) // 2))
        sbs.check("GET", "b")
        sbs.check("PFCOUNT", "a", "b", "c")
        sbs.check("PFMERGE", "m", "a", "c")
        sbs.check("GET", "m")
        sbs.check("PFMERGE", "m", "b")
        sbs.check("GET", "m")
        sbs.check("PFCOUNT", "m")
        sbs.check("PFMERGE", "c", "a")
        sbs.check("GET", "c")
    finally:
        sbs.check("CONFIG", "SET", "hll-sparse-max-bytes", "3000")


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32), n=st.integers(0, 2500), dense=st.booleans(),
       corruptions=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
                            min_size=1, max_size=5))
def test_corrupted_payloads_match_redis(sbs, seed, n, dense, corruptions):
    """The Tcl unit's fuzzer, with every command run on the damaged string."""
    rng = random.Random(seed)
    sbs.check("FLUSHALL")
    sbs.check("PFADD", "h", *(str(rng.random()) for _ in range(n)))
    if dense:
        sbs.check("PFDEBUG", "TODENSE", "h")
    for where, byte in corruptions:
        size = int(sbs.check("STRLEN", "h")[1:-2])
        sbs.check("SETRANGE", "h", str(int(where * size)), bytes([byte]))
    sbs.check("PFCOUNT", "h")
    sbs.check("PFCOUNT", "h", "nokey")
    sbs.check("PFMERGE", "m", "h")
    sbs.check("PFDEBUG", "DECODE", "h")
    sbs.check("PFADD", "h", *(str(rng.random()) for _ in range(20)))
    sbs.check("GET", "h")
    sbs.check("PFDEBUG", "TODENSE", "h")
    sbs.check("GET", "h")


def test_command_facts(oracle):
    oracle.run([
        ("COMMAND", "INFO", "pfadd", "pfcount", "pfmerge", "pfdebug", "pfselftest"),
        ("COMMAND", "DOCS", "pfadd", "pfmerge"),
        ("COMMAND", "GETKEYS", "PFMERGE", "d", "a", "b"),
        ("COMMAND", "GETKEYS", "PFCOUNT", "a", "b"),
        ("COMMAND", "GETKEYS", "PFDEBUG", "GETREG", "k"),
    ])


def test_hll_strings_travel_as_strings(oracle):
    oracle.check("PFADD", "s", "a", "b", "c")
    oracle.check("PFADD", "d", *_elements("d", 3000))
    sparse = oracle.check("GET", "s").split(b"\r\n", 1)[1][:-2]
    oracle.run([
        ("SET", "copy", sparse),
        ("OBJECT", "ENCODING", "copy"),
        ("PFDEBUG", "ENCODING", "copy"),  # unshared: now a raw string, as Redis makes it
        ("OBJECT", "ENCODING", "copy"),
        ("DUMP", "d"),
        ("COPY", "d", "d2"),
        ("PFADD", "d2", "extra-1", "extra-2"),
        ("GET", "d"),  # the copy is edited, never the original
        ("GET", "d2"),
        ("APPEND", "s", "x"),
        ("PFCOUNT", "s"),
        ("TYPE", "s"),
    ])
