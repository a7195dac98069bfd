"""Consumer groups side by side with redis-server 7.0.15 (RESP2 and RESP3): XGROUP,
XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO GROUPS/CONSUMERS/STREAM FULL; and
their propagation (XCLAIM ... FORCE JUSTID LASTID, XGROUP CREATECONSUMER/SETID) in-process.

Replies that carry clock readings (idle times, delivery and seen times) are compared
structurally with only those fields masked, after checking each is a plausible reading.
"""

from __future__ import annotations

import time

import pytest
from rill.server.commands import load_all
from rill.server.server import Server

from tests.support import run_inproc as run

MAX = "18446744073709551615"


@pytest.fixture(params=["resp2", "resp3"])
def oracle(request):
    return request.getfixturevalue("sbs" if request.param == "resp2" else "sbs3")


# -- a RESP reader and the time masks ---------------------------------------------------------------


class Map(list):
    """A RESP3 map, kept as (key, value) pairs in order."""


def parse(data: bytes):
    """One RESP2/RESP3 reply to Python values (maps as Map of pairs, errors as ('err', text))."""
    value, pos = _parse(data, 0)
    assert pos == len(data), data
    return value


def _parse(data: bytes, pos: int):
    end = data.index(b"\r\n", pos)
    t, head = data[pos : pos + 1], data[pos + 1 : end]
    pos = end + 2
    if t in (b"+",):
        return ("status", head), pos
    if t == b"-":
        return ("err", head), pos
    if t == b":":
        return int(head), pos
    if t == b"_":
        return None, pos
    if t == b"$":
        n = int(head)
        if n < 0:
            return None, pos
        return data[pos : pos + n], pos + n + 2
    if t in (b"*", b"~"):
        n = int(head)
        if n < 0:
            return "NULL_ARRAY", pos
        out = []
        for _ in range(n):
            v, pos = _parse(data, pos)
            out.append(v)
        return out, pos
    if t == b"%":
        out = Map()
        for _ in range(int(head)):
            k, pos = _parse(data, pos)
            v, pos = _parse(data, pos)
            out.append((k, v))
        return out, pos
    raise AssertionError(f"unexpected RESP type {t!r}")


def pairs(x) -> list:
    """A map reply as (key, value) pairs, whichever protocol produced it."""
    if isinstance(x, Map):
        return list(x)
    assert isinstance(x, list) and len(x) % 2 == 0, x
    return [(x[i], x[i + 1]) for i in range(0, len(x), 2)]


def rebuild(x, items: list):
    if isinstance(x, Map):
        return Map(items)
    return [v for kv in items for v in kv]


def idle(v) -> str:
    """An idle time in ms: small and non-negative."""
    assert isinstance(v, int) and 0 <= v < 60_000, v
    return "IDLE"


def stamp(v) -> str:
    """A unix time in ms: close to now."""
    assert isinstance(v, int) and abs(v - time.time() * 1000) < 600_000, v
    return "TIME"


def mask_xpending(reply):
    if not isinstance(reply, list) or (reply and not isinstance(reply[0], list)):
        return reply
    return [[row[0], row[1], idle(row[2]), row[3]] for row in reply]


def mask_consumers(reply):
    if not isinstance(reply, list):
        return reply
    return [rebuild(c, [(k, idle(v) if k == b"idle" else v) for k, v in pairs(c)]) for c in reply]


def mask_full(reply):
    if isinstance(reply, tuple):
        return reply
    items = []
    for k, v in pairs(reply):
        if k == b"groups":
            v = [_mask_group(g) for g in v]
        items.append((k, v))
    return rebuild(reply, items)


def _mask_group(g):
    items = []
    for k, v in pairs(g):
        if k == b"pending":
            v = [[row[0], row[1], stamp(row[2]), row[3]] for row in v]
        elif k == b"consumers":
            v = [_mask_consumer(c) for c in v]
        items.append((k, v))
    return rebuild(g, items)


def _mask_consumer(c):
    items = []
    for k, v in pairs(c):
        if k == b"seen-time":
            v = stamp(v)
        elif k == b"pending":
            v = [[row[0], stamp(row[1]), row[2]] for row in v]
        items.append((k, v))
    return rebuild(c, items)


MASKS = {"XPENDING": mask_xpending, "CONSUMERS": mask_consumers, "FULL": mask_full}


def check_masked(o, *args) -> None:
    """Compare a reply with clock readings: structure and every other field must match."""
    mine, theirs = o.both(*args)
    if mine == theirs:
        return
    kind = "XPENDING" if args[0].upper() == "XPENDING" else (
        "CONSUMERS" if args[1].upper() == "CONSUMERS" else "FULL"
    )
    mask = MASKS[kind]
    assert mask(parse(mine)) == mask(parse(theirs)), f"{args}: {mine!r} != {theirs!r}"


def run_script(o, script) -> None:
    for args in script:
        if args[0] == "XPENDING" and len(args) > 3 or args[:2] in (("XINFO", "CONSUMERS"),) or (
            args[:2] == ("XINFO", "STREAM") and "FULL" in args
        ):
            check_masked(o, *args)
        else:
            o.check(*args)


def setup_stream(o, key: str = "s", n: int = 5) -> None:
    for i in range(1, n + 1):
        o.check("XADD", key, f"{i}-1", "f", f"v{i}")


# -- XGROUP ------------------------------------------------------------------------------------------


def test_xgroup_create_and_errors(oracle):
    setup_stream(oracle)
    run_script(oracle, [
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XGROUP", "CREATE", "s", "g2", "$", "ENTRIESREAD", "2"),
        ("XGROUP", "CREATE", "s", "g3", "3", "ENTRIESREAD", "-1"),
        ("XGROUP", "CREATE", "s", "g4", "$", "ENTRIESREAD", "-2"),
        ("XGROUP", "CREATE", "s", "g4", "$", "ENTRIESREAD", "x"),
        ("XGROUP", "CREATE", "s", "g4", "$", "ENTRIESREAD"),
        ("XGROUP", "CREATE", "s", "g4", "$", "FOO"),
        ("XGROUP", "CREATE", "s", "g4", "-"),
        ("XGROUP", "CREATE", "s", "g4", "+"),
        ("XGROUP", "CREATE", "s", "g4", "bad"),
        ("XGROUP", "CREATE", "s", "g4", f"{MAX}-{MAX}"),
        ("XGROUP", "CREATE", "s", "g5", "$", "MKSTREAM", "MKSTREAM", "ENTRIESREAD", "1"),
        ("XGROUP", "CREATE", "s", "g6", "$", "MKSTREAM", "ENTRIESREAD", "1"),
        ("XGROUP", "CREATE", "s", "g7"),
        ("XGROUP", "CREATE", "nokey", "g", "0"),
        ("XGROUP", "CREATE", "nokey", "g", "bad", "MKSTREAM"),
        ("EXISTS", "nokey"),
        ("XGROUP", "CREATE", "nokey", "g", "$", "MKSTREAM"),
        ("XINFO", "STREAM", "nokey"),
        ("XGROUP", "CREATE", "nokey", "g", "$", "MKSTREAM"),
        ("SET", "str", "x"),
        ("XGROUP", "CREATE", "str", "g", "$"),
        ("XGROUP", "CREATE", "str", "g", "$", "MKSTREAM"),
        ("XINFO", "GROUPS", "s"),
    ])


def test_xgroup_other_subcommands(oracle):
    setup_stream(oracle)
    run_script(oracle, [
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XGROUP", "SETID", "s", "g", "2-1"),
        ("XGROUP", "SETID", "s", "g", "$", "ENTRIESREAD", "5"),
        ("XGROUP", "SETID", "s", "g", "-"),  # SETID accepts - and +
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "+"),
        ("XINFO", "GROUPS", "s"),
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD"),
        ("XGROUP", "SETID", "s", "g", "0", "MKSTREAM"),
        ("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "-7"),
        ("XGROUP", "SETID", "s", "g", "bad"),
        ("XGROUP", "SETID", "s", "nog", "0"),
        ("XGROUP", "SETID", "nokey", "g", "0"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "alice"),
        ("XGROUP", "CREATECONSUMER", "s", "g", "alice"),
        ("XGROUP", "CREATECONSUMER", "s", "nog", "alice"),
        ("XGROUP", "CREATECONSUMER", "nokey", "g", "alice"),
        ("XGROUP", "CREATECONSUMER", "s", "g"),
        ("XGROUP", "DELCONSUMER", "s", "g", "bob"),
        ("XGROUP", "DELCONSUMER", "s", "nog", "bob"),
        ("XGROUP", "SETID", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">"),
        ("XGROUP", "DELCONSUMER", "s", "g", "alice"),
        ("XPENDING", "s", "g"),
        ("XGROUP", "DESTROY", "s", "g"),
        ("XGROUP", "DESTROY", "s", "g"),
        ("XGROUP", "DESTROY", "nokey", "g"),
        ("XGROUP", "DESTROY", "s", "g", "extra"),
        ("XGROUP", "FOO", "s", "g"),
        ("XGROUP",),
        ("XGROUP", "HELP"),
        ("XGROUP", "help", "x"),
        ("SET", "str", "x"),
        ("XGROUP", "DESTROY", "str", "g"),
    ])


# -- XREADGROUP --------------------------------------------------------------------------------------


def test_xreadgroup_new_entries_and_history(oracle):
    setup_stream(oracle, n=6)
    run_script(oracle, [
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "1", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", "1-1"),
        ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "0"),
        ("XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "0"),  # empty history, consumer created
        ("XINFO", "GROUPS", "s"),
        ("XINFO", "CONSUMERS", "s", "g"),
        ("XDEL", "s", "2-1"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),  # deleted entry: [id, nil]
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),  # nothing new: null
        ("XPENDING", "s", "g"),
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XINFO", "STREAM", "s", "FULL"),
        ("XGROUP", "SETID", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "3", "STREAMS", "s", ">"),  # NACKs move to bob
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XPENDING", "s", "g", "-", "+", "10", "alice"),
        ("XINFO", "CONSUMERS", "s", "g"),
    ])


def test_xreadgroup_noack_and_multiple_streams(oracle):
    setup_stream(oracle, "a", 3)
    setup_stream(oracle, "b", 2)
    run_script(oracle, [
        ("XGROUP", "CREATE", "a", "g", "0"),
        ("XGROUP", "CREATE", "b", "g", "$"),
        ("XREADGROUP", "GROUP", "g", "c", "NOACK", "COUNT", "2", "STREAMS", "a", "b", ">", ">"),
        ("XPENDING", "a", "g"),
        ("XINFO", "GROUPS", "a"),
        ("XADD", "b", "9-9", "x", "y"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", "b", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", "b", "0", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "a", "a", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "0", "STREAMS", "b", "0"),
        ("XINFO", "STREAM", "b", "FULL"),
    ])


def test_xreadgroup_errors(oracle):
    setup_stream(oracle)
    run_script(oracle, [
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "nokey", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "nokey", ">", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "+"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "bad"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "s", ">"),
        ("XREADGROUP", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "x", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "x", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "FOO", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "c", "COUNT", "1"),
        ("SET", "str", "x"),
        ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "str", ">"),
        ("XINFO", "CONSUMERS", "s", "g"),  # no consumer was created by the failures
    ])


# -- XACK / XPENDING -------------------------------------------------------------------------------


def test_xack_and_xpending(oracle):
    setup_stream(oracle, n=8)
    run_script(oracle, [
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XPENDING", "s", "g"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g", "bob", "COUNT", "3", "STREAMS", "s", ">"),
        ("XPENDING", "s", "g"),
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XPENDING", "s", "g", "-", "+", "2"),
        ("XPENDING", "s", "g", "-", "+", "0"),
        ("XPENDING", "s", "g", "-", "+", "-1"),
        ("XPENDING", "s", "g", "(2-1", "(5-1", "10"),
        ("XPENDING", "s", "g", "3", "4", "10"),
        ("XPENDING", "s", "g", "5", "2", "10"),
        ("XPENDING", "s", "g", "-", "+", "10", "bob"),
        ("XPENDING", "s", "g", "-", "+", "10", "nobody"),
        ("XPENDING", "s", "g", "IDLE", "0", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "600000", "-", "+", "10"),
        ("XPENDING", "s", "g", "IDLE", "-5", "-", "+", "10", "alice"),
        ("XPENDING", "s", "g", "IDLE", "0", "-", "+"),
        ("XPENDING", "s", "g", "IDLE", "x", "-", "+", "10"),
        ("XPENDING", "s", "g", "-"),
        ("XPENDING", "s", "g", "-", "+"),
        ("XPENDING", "s", "g", "-", "+", "x"),
        ("XPENDING", "s", "g", "bad", "+", "10"),
        ("XPENDING", "s", "g", "-", "bad", "10"),
        ("XPENDING", "s", "g", f"({MAX}-{MAX}", "+", "10"),
        ("XPENDING", "s", "g", "-", "(0-0", "10"),
        ("XPENDING", "s", "g", "-", "+", "10", "bob", "extra"),
        ("XPENDING", "s", "g", "-", "+", "10", "bob", "extra", "extra2"),
        ("XPENDING", "s", "nog"),
        ("XPENDING", "nokey", "g"),
        ("XPENDING", "nokey", "g", "-", "+", "x"),
        ("XACK", "s", "g", "1-1", "1-1", "9-9", "2"),
        ("XACK", "s", "g", "3-1", "bad"),
        ("XACK", "s", "nog", "bad"),
        ("XACK", "nokey", "g", "bad"),
        ("XACK", "s", "g", "3-1", "4-1", "5-1", "6-1"),
        ("XPENDING", "s", "g"),
        ("XINFO", "CONSUMERS", "s", "g"),
        ("SET", "str", "x"),
        ("XACK", "str", "g", "1-1"),
        ("XPENDING", "str", "g"),
    ])


# -- XCLAIM / XAUTOCLAIM -------------------------------------------------------------------------------


def test_xclaim(oracle):
    setup_stream(oracle, n=6)
    run_script(oracle, [
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "4", "STREAMS", "s", ">"),
        ("XCLAIM", "s", "g", "bob", "3600000", "1-1"),  # not idle enough
        ("XCLAIM", "s", "g", "bob", "0", "1-1", "2-1"),
        ("XCLAIM", "s", "g", "bob", "0", "3-1", "JUSTID"),
        ("XCLAIM", "s", "g", "carol", "0", "4-1", "RETRYCOUNT", "7", "IDLE", "5000"),
        ("XCLAIM", "s", "g", "carol", "0", "5-1"),  # not pending
        ("XCLAIM", "s", "g", "carol", "0", "5-1", "FORCE", "JUSTID"),
        ("XCLAIM", "s", "g", "carol", "0", "99-1", "FORCE"),  # no such entry
        ("XCLAIM", "s", "g", "dave", "0", "1-1", "TIME", "1", "RETRYCOUNT", "-4"),
        ("XCLAIM", "s", "g", "dave", "0", "2-1", "LASTID", "6-1"),
        ("XINFO", "GROUPS", "s"),
        ("XCLAIM", "s", "g", "erin", "0", "6-1", "LASTID", "3-1"),
        ("XCLAIM", "s", "g", "erin", "-100", "1", "1-1", "JUSTID"),  # incomplete IDs, twice
        ("XPENDING", "s", "g", "-", "+", "10"),
        ("XINFO", "CONSUMERS", "s", "g"),
        ("XDEL", "s", "2-1"),
        ("XCLAIM", "s", "g", "frank", "0", "2-1", "3-1"),  # a deleted entry loses its NACK
        ("XPENDING", "s", "g"),
        ("XCLAIM", "s", "nog", "c", "0", "1-1"),
        ("XCLAIM", "nokey", "g", "c", "x", "1-1"),
        ("XCLAIM", "s", "g", "c", "x", "1-1"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "FOO"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "JUSTID", "2-1"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "IDLE", "x"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "TIME", "x"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "RETRYCOUNT", "x"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "LASTID", "x"),
        ("XCLAIM", "s", "g", "c", "0", "1-1", "IDLE"),
        ("XCLAIM", "s", "g", "c", "0", "JUSTID"),
        ("XINFO", "CONSUMERS", "s", "g"),
        ("SET", "str", "x"),
        ("XCLAIM", "str", "g", "c", "0", "1-1"),
    ])


def test_xautoclaim(oracle):
    setup_stream(oracle, n=12)
    run_script(oracle, [
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XAUTOCLAIM", "s", "g", "bob", "3600000", "0"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "0", "COUNT", "3"),
        ("XAUTOCLAIM", "s", "g", "bob", "0", "(3-1", "COUNT", "2", "JUSTID"),
        ("XDEL", "s", "6-1", "7-1", "9-1"),
        ("XAUTOCLAIM", "s", "g", "carol", "0", "6-1", "COUNT", "2"),  # deleted ones count too
        ("XAUTOCLAIM", "s", "g", "carol", "0", "-", "COUNT", "100"),
        ("XAUTOCLAIM", "s", "g", "carol", "0", "+"),
        ("XPENDING", "s", "g"),
        ("XINFO", "CONSUMERS", "s", "g"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "0"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "-1"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "x"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "9223372036854775807"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0", "FOO"),
        ("XAUTOCLAIM", "s", "g", "c", "x", "0"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "bad"),
        ("XAUTOCLAIM", "s", "g", "c", "0", f"({MAX}-{MAX}"),
        ("XAUTOCLAIM", "s", "nog", "c", "0", "0"),
        ("XAUTOCLAIM", "nokey", "g", "c", "0", "0"),
        ("XAUTOCLAIM", "nokey", "g", "c", "0", "0", "FOO"),
        ("SET", "str", "x"),
        ("XAUTOCLAIM", "str", "g", "c", "0", "0"),
    ])


def test_xautoclaim_attempts_limit_and_cursor(oracle):
    setup_stream(oracle, n=40)
    run_script(oracle, [
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">"),
        ("XCLAIM", "s", "g", "alice", "0", "35-1", "IDLE", "900000"),
        # COUNT 1 -> 10 attempts: the idle-enough entry is beyond them
        ("XAUTOCLAIM", "s", "g", "bob", "800000", "0", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "bob", "800000", "11-1", "COUNT", "1"),
        ("XAUTOCLAIM", "s", "g", "bob", "800000", "21-1", "COUNT", "2"),
        ("XPENDING", "s", "g", "-", "+", "50", "bob"),
    ])


# -- XINFO and lag ----------------------------------------------------------------------------------------


def test_lag_and_entries_read(oracle):
    """Redis 7's read counters, the Tcl suite's "Consumer group lag with XDELs" and more."""
    run_script(oracle, [
        ("XGROUP", "CREATE", "x", "g0", "0", "MKSTREAM"),
        ("XINFO", "GROUPS", "x"),
    ])
    setup_stream(oracle, "x", 9)
    run_script(oracle, [
        ("XGROUP", "CREATE", "x", "g1", "0"),
        ("XGROUP", "CREATE", "x", "g2", "$"),
        ("XGROUP", "CREATE", "x", "g3", "5-1"),
        ("XINFO", "GROUPS", "x"),
        ("XDEL", "x", "5-1"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c", "COUNT", "1", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c", "COUNT", "4", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
        ("XREADGROUP", "GROUP", "g1", "c", "STREAMS", "x", ">"),
        ("XINFO", "GROUPS", "x"),
        ("XADD", "x", "10-1", "f", "v"),
        ("XINFO", "GROUPS", "x"),
        ("XDEL", "x", "1-1"),
        ("XINFO", "GROUPS", "x"),
        ("XTRIM", "x", "MAXLEN", "1"),
        ("XINFO", "GROUPS", "x"),
        ("XGROUP", "SETID", "x", "g2", "0", "ENTRIESREAD", "3"),
        ("XINFO", "GROUPS", "x"),
        ("XSETID", "x", "20-0", "ENTRIESADDED", "30", "MAXDELETEDID", "15-0"),
        ("XINFO", "GROUPS", "x"),
        ("XINFO", "STREAM", "x", "FULL"),
        ("XINFO", "GROUPS", "nokey"),
        ("XINFO", "GROUPS", "x", "extra"),
        ("XINFO", "CONSUMERS", "x", "nog"),
        ("XINFO", "CONSUMERS", "nokey", "g"),
        ("SET", "str", "x"),
        ("XINFO", "GROUPS", "str"),
        ("XINFO", "CONSUMERS", "str", "g"),
    ])


def test_xinfo_stream_full_with_groups(oracle):
    setup_stream(oracle, n=15)
    run_script(oracle, [
        ("XGROUP", "CREATE", "s", "g1", "0"),
        ("XGROUP", "CREATE", "s", "g2", "$"),
        ("XGROUP", "CREATECONSUMER", "s", "g2", "idle"),
        ("XREADGROUP", "GROUP", "g1", "b", "COUNT", "6", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "g1", "a", "COUNT", "6", "STREAMS", "s", ">"),
        ("XINFO", "STREAM", "s", "FULL"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "2"),
        ("XINFO", "STREAM", "s", "FULL", "COUNT", "0"),
        ("XINFO", "STREAM", "s"),
    ])


# -- propagation (in-process) -------------------------------------------------------------------------------


@pytest.fixture
def inproc():
    load_all()
    server = Server()
    effects: list = []
    server.propagation.attach("observer", effects.append)
    client = server.new_client()
    return server, client, effects




def xclaim(key, group, consumer, sid, t, count, lastid):
    return [b"XCLAIM", key, group, consumer, b"0", sid, b"TIME", t, b"RETRYCOUNT", count,
            b"FORCE", b"JUSTID", b"LASTID", lastid]


def masked(ops):
    """Effects with TIME arguments replaced (they are clock readings)."""
    out = []
    for db, argv in ops:
        argv = list(argv)
        if argv[0] == b"XCLAIM":
            t = int(argv[7])
            assert t == 12345 or abs(t - time.time() * 1000) < 60_000
            argv[7] = b"T"
        out.append((db, argv))
    return out


def test_xreadgroup_propagates_xclaims(inproc):
    server, c, effects = inproc
    for i in range(1, 5):
        run(server, c, "XADD", "s", f"{i}-0", "f", "v")
    run(server, c, "XGROUP", "CREATE", "s", "g", "0")
    effects.clear()
    d = server.dirty
    run(server, c, "XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    assert server.dirty - d == 2  # the new consumer and the served stream
    assert [masked(batch) for batch in effects] == [[
        (0, [b"MULTI"]),
        (0, xclaim(b"s", b"g", b"c", b"1-0", b"T", b"1", b"1-0")),
        (0, xclaim(b"s", b"g", b"c", b"2-0", b"T", b"1", b"2-0")),
        (0, [b"EXEC"]),
    ]]
    effects.clear()
    run(server, c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "0")  # history: not propagated
    run(server, c, "XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">")
    run(server, c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    run(server, c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")  # nothing new
    run(server, c, "SET", "k", "v")  # later commands still propagate
    assert [masked(batch) for batch in effects] == [
        [(0, xclaim(b"s", b"g", b"c", b"3-0", b"T", b"1", b"3-0"))],
        [(0, xclaim(b"s", b"g", b"c", b"4-0", b"T", b"1", b"4-0"))],
        [(0, [b"SET", b"k", b"v"])],
    ]


def test_xreadgroup_noack_propagates_consumer_and_group_id(inproc):
    server, c, effects = inproc
    for i in range(1, 5):
        run(server, c, "XADD", "s", f"{i}-0", "f", "v")
    run(server, c, "XGROUP", "CREATE", "s", "g", "0")
    effects.clear()
    run(server, c, "XREADGROUP", "GROUP", "g", "c", "NOACK", "COUNT", "3", "STREAMS", "s", ">")
    run(server, c, "XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "s", ">")
    assert effects == [
        [(0, [b"MULTI"]), (0, [b"XGROUP", b"CREATECONSUMER", b"s", b"g", b"c"]),
         (0, [b"XGROUP", b"SETID", b"s", b"g", b"3-0", b"ENTRIESREAD", b"3"]), (0, [b"EXEC"])],
        [(0, [b"XGROUP", b"SETID", b"s", b"g", b"4-0", b"ENTRIESREAD", b"4"])],
    ]


def test_xclaim_and_xautoclaim_propagation(inproc):
    server, c, effects = inproc
    for i in range(1, 6):
        run(server, c, "XADD", "s", f"{i}-0", "f", "v")
    run(server, c, "XGROUP", "CREATE", "s", "g", "0")
    run(server, c, "XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    run(server, c, "XDEL", "s", "2-0")
    effects.clear()
    d = server.dirty
    # IDs as typed; the deleted entry is propagated too (its NACK goes away on replicas)
    run(server, c, "XCLAIM", "s", "g", "b", "0", "1", "2-0", "TIME", "12345", "RETRYCOUNT", "9")
    assert server.dirty - d == 3  # new consumer + two NACKs changed
    assert masked(effects[0]) == [
        (0, [b"MULTI"]),
        (0, xclaim(b"s", b"g", b"b", b"1", b"T", b"9", b"5-0")),
        (0, xclaim(b"s", b"g", b"a", b"2-0", b"T", b"1", b"5-0")),
        (0, [b"EXEC"]),
    ]
    assert effects[0][1][1][7] == b"12345"
    effects.clear()
    run(server, c, "XCLAIM", "s", "g", "b", "3600000", "3-0")  # nothing claimed
    run(server, c, "XCLAIM", "s", "g", "b", "0", "9-0", "LASTID", "9-0")  # only the group moved
    run(server, c, "XCLAIM", "s", "g", "b", "0", "3-0", "LASTID", "10-0", "JUSTID")
    assert masked([op for batch in effects for op in batch]) == [
        (0, [b"XGROUP", b"SETID", b"s", b"g", b"9-0", b"ENTRIESREAD", b"5"]),
        (0, xclaim(b"s", b"g", b"b", b"3-0", b"T", b"1", b"10-0")),
    ]
    effects.clear()
    run(server, c, "XDEL", "s", "4-0")
    effects.clear()
    run(server, c, "XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "2")
    assert masked(effects[0]) == [
        (0, [b"MULTI"]),
        (0, xclaim(b"s", b"g", b"c", b"1-0", b"T", b"10", b"10-0")),
        (0, xclaim(b"s", b"g", b"c", b"3-0", b"T", b"2", b"10-0")),
        (0, [b"EXEC"]),
    ]
    effects.clear()
    run(server, c, "XAUTOCLAIM", "s", "g", "c", "0", "4-0", "COUNT", "5", "JUSTID")
    assert masked(effects[0]) == [
        (0, [b"MULTI"]),
        (0, xclaim(b"s", b"g", b"a", b"4-0", b"T", b"1", b"10-0")),  # deleted: dropped
        (0, xclaim(b"s", b"g", b"c", b"5-0", b"T", b"1", b"10-0")),
        (0, [b"EXEC"]),
    ]
    effects.clear()
    run(server, c, "XAUTOCLAIM", "s", "g", "c", "3600000", "0")
    run(server, c, "XACK", "s", "g", "1-0", "1-0", "7-0")
    run(server, c, "XACK", "s", "g", "1-0")
    assert effects == [[(0, [b"XACK", b"s", b"g", b"1-0", b"1-0", b"7-0"])]]


def test_xgroup_propagation_and_dirty(inproc):
    server, c, effects = inproc
    run(server, c, "XADD", "s", "1-0", "f", "v")
    effects.clear()
    script = [
        (("XGROUP", "CREATE", "s", "g", "$"), 1),
        (("XGROUP", "CREATE", "s", "g", "$"), 0),
        (("XGROUP", "CREATE", "m", "g", "$", "MKSTREAM"), 1),
        (("XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "0"), 1),
        (("XGROUP", "CREATECONSUMER", "s", "g", "c"), 1),
        (("XGROUP", "CREATECONSUMER", "s", "g", "c"), 0),
        (("XGROUP", "DELCONSUMER", "s", "g", "c"), 1),
        (("XGROUP", "DELCONSUMER", "s", "g", "c"), 0),
        (("XGROUP", "DESTROY", "s", "g"), 1),
        (("XGROUP", "DESTROY", "s", "g"), 0),
    ]
    propagated = []
    for args, dirt in script:
        d = server.dirty
        run(server, c, *args)
        assert server.dirty - d == dirt, args
        if dirt:
            propagated.append([a.encode() for a in args])
    assert [argv for batch in effects for _, argv in batch] == propagated


AOF_SCRIPT = [
    ("XADD", "s", "1-1", "f", "v"), ("XADD", "s", "1-*", "f", "v"), ("XADD", "s", "5-*", "g", "w"),
    *[("XADD", "t", f"{i}-0", "f", "v") for i in range(1, 251)],
    ("XADD", "t", "MAXLEN", "~", "120", "LIMIT", "500", "300-*", "f", "v"),
    ("XADD", "t", "MINID", "~", "250", "301-0", "f", "v"),
    ("XTRIM", "t", "MAXLEN", "~", "10"), ("XTRIM", "t", "MAXLEN", "~", "10"), ("XTRIM", "t", "MAXLEN", "30"),
    ("XDEL", "t", "290-0", "1-0"), ("XDEL", "t", "1-0"),
    ("XGROUP", "CREATE", "s", "g", "0"), ("XGROUP", "CREATE", "s", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
    ("XREADGROUP", "GROUP", "g", "bob", "NOACK", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
    ("XGROUP", "SETID", "s", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "carol", "COUNT", "1", "STREAMS", "s", ">"),
    ("XDEL", "s", "1-2"),
    ("XCLAIM", "s", "g", "dave", "0", "1-1", "1-2", "TIME", "12345", "RETRYCOUNT", "4"),
    ("XCLAIM", "s", "g", "dave", "0", "9-0", "LASTID", "9-0"),
    ("XCLAIM", "s", "g", "erin", "0", "1-1", "JUSTID", "LASTID", "10-0"),
    ("XADD", "s", "11-0", "f", "v"), ("XADD", "s", "12-0", "f", "v"),
    ("XREADGROUP", "GROUP", "g", "frank", "STREAMS", "s", ">"),
    ("XDEL", "s", "11-0"),
    ("XAUTOCLAIM", "s", "g", "gina", "0", "0", "COUNT", "2"),
    ("XAUTOCLAIM", "s", "g", "gina", "0", "0", "JUSTID"),
    ("XACK", "s", "g", "12-0", "99-0"), ("XACK", "s", "g", "12-0"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "hank"), ("XGROUP", "DELCONSUMER", "s", "g", "hank"),
    ("XSETID", "s", "20-0", "ENTRIESADDED", "50", "MAXDELETEDID", "11-0"),
    ("XGROUP", "DESTROY", "s", "g"),
]


def test_propagation_matches_redis_aof(inproc, tmp_path):
    """The same script through redis-server with appendonly yes: its AOF holds exactly
    what rill hands to its propagation feeds (clock readings masked)."""
    from tests.support import redis_aof_commands, require_tool

    require_tool("redis-server")
    theirs = redis_aof_commands(str(tmp_path), AOF_SCRIPT)
    assert theirs[0][0] == b"SELECT"
    server, c, effects = inproc
    for args in AOF_SCRIPT:
        run(server, c, *args)
    mine = [argv for batch in effects for _, argv in batch]

    def mask(cmds):
        out = []
        for argv in cmds:
            if argv[0] == b"XCLAIM" and argv[7] != b"12345":
                argv = [*argv[:7], b"T", *argv[8:]]
            out.append(argv)
        return out

    assert mask(mine) == mask(theirs[1:])
