"""Lists and HyperLogLogs beside strings, hashes, sets and sorted sets in-process: keys
written as two types, RENAME across types, pops by the side the command names. Each case
is a divergence the convergence generator found (test_types_fuzz.py), made small."""

from __future__ import annotations

import pytest

from tests.server.activeactive.test_engine import Region, sync


def everywhere(regions, *cmd) -> bytes:
    replies = [r(*cmd) for r in regions]
    assert all(x == replies[0] for x in replies), replies
    return replies[0]


def test_a_list_shows_before_a_string_written_concurrently():
    """The string's region kept showing the string when the peer's push arrived."""
    a, b = Region(1), Region(2)
    b("RPUSH", "k", "x")
    a("APPEND", "k", "xyz")
    sync(a, b)
    assert everywhere((a, b), "TYPE", "k") == b"+list\r\n"
    assert everywhere((a, b), "LRANGE", "k", "0", "-1") == b"*1\r\n$1\r\nx\r\n"


def test_rename_of_a_list_over_an_hll_moves_the_list():
    """The destination held an HLL: only its HLLDEL was collected, not the list's elements."""
    a, b = Region(1), Region(2)
    a("RPUSH", "l", "1.5")
    a("PFADD", "h", "e1", "e2")
    sync(a, b)
    assert a("RENAME", "l", "h") == b"+OK\r\n"
    sync(a, b)
    assert everywhere((a, b), "TYPE", "h") == b"+list\r\n"
    assert everywhere((a, b), "LRANGE", "h", "0", "-1") == b"*1\r\n$3\r\n1.5\r\n"


def test_a_refused_write_to_a_key_showing_a_list_keeps_what_it_hides():
    """set1 shows region 1's list and hides region 2's set; an SADD refused with WRONGTYPE
    at region 3 made a CDEL of the hidden set, which took the list's TTL at the peers."""
    a, b, c = Region(1), Region(2), Region(3)
    a("LPUSH", "l1", "v")
    a("EXPIRE", "l1", "26859")
    b("SADD", "set1", "m6")
    b.send(c)
    a("RENAME", "l1", "set1")
    a.send(c)
    assert c("SADD", "set1", "m7").startswith(b"-WRONGTYPE")
    sync(a, b, c)
    assert everywhere((a, b, c), "TYPE", "set1") == b"+list\r\n"
    assert everywhere((a, b, c), "PEXPIRETIME", "set1") != b":-1\r\n"


def test_lmpop_pops_from_the_side_it_names():
    """LMPOP's side was read after numkeys+1 arguments counted from the wrong place, so an
    RPOP-like LMPOP shipped the removal of the leftmost element."""
    a, b = Region(1), Region(2)
    b("LPUSH", "l1", "old")
    b.send(a)
    a("LPUSH", "l1", "new", "new")
    assert a("LMPOP", "2", "l0", "l1", "RIGHT", "COUNT", "1") == b"*2\r\n$2\r\nl1\r\n*1\r\n$3\r\nold\r\n"
    sync(a, b)
    assert everywhere((a, b), "LRANGE", "l1", "0", "-1") == b"*2\r\n$3\r\nnew\r\n$3\r\nnew\r\n"


def test_a_list_renamed_over_a_counter_keeps_its_ttl_everywhere():
    """RENAME l1 n0 at region 3 (l1 a list with a TTL, n0 a counter): the list's EXPIRE was
    collected before the counter's CDEL, so at region 3 the register went with the CDEL, and
    region 2's concurrent RENAME n0 n1 then dropped the TTL there alone."""
    a, b, c = Region(1), Region(2), Region(3)
    a("RPUSH", "l1", "v", "xyz")
    a.send(b)
    b("EXPIRE", "l1", "10011")
    c("DECRBY", "n0", "21")
    c.send(b), a.send(c), b.send(c)
    b("RENAME", "n0", "n1")
    c("RENAME", "l1", "n0")
    sync(a, b, c)
    assert everywhere((a, b, c), "TYPE", "n0") == b"+list\r\n"
    assert everywhere((a, b, c), "PEXPIRETIME", "n0") != b":-1\r\n"


@pytest.mark.parametrize("write", [("PFADD", "k", "x"), ("SET", "k", "text"), ("RPUSH", "k", "x"),
                                   ("HSET", "k", "f", "v"), ("SADD", "k", "m"), ("ZADD", "k", "1", "m")])
def test_rename_of_a_stream_over_another_kind_deletes_it_everywhere(write):
    """RENAME of a stream onto a key of another kind made no delete of that kind: it stayed
    hidden under the stream, here and at the peers, and when the stream emptied the peers
    showed it again (here nothing, or the HLL again at both, where Redis had deleted it)."""
    a, b = Region(1), Region(2)
    a(*write)
    sid = a("XADD", "s", "*", "f", "v").split(b"\r\n")[1]
    a("PEXPIREAT", "k", "4000000000000")
    sync(a, b)
    assert a("RENAME", "s", "k") == b"+OK\r\n"
    assert a("PEXPIRETIME", "k") == b":-1\r\n"
    sync(a, b)
    assert everywhere((a, b), "TYPE", "k") == b"+stream\r\n"
    assert everywhere((a, b), "PEXPIRETIME", "k") == b":-1\r\n"
    a("XDEL", "k", sid)
    sync(a, b)
    assert everywhere((a, b), "EXISTS", "k") == b":0\r\n"


def test_a_stream_del_takes_the_ttls_it_saw_where_a_concurrent_set_replaced_the_stream():
    """Seed 306 of the full-sync random runs (test_hll.py), shrunk: a peer's DEL of a stream
    that a concurrent SET replaced here found no stream and returned before dropping the
    TTLs it had seen, so the string took a TTL nobody holds at the deleter."""
    a, b, c = Region(1), Region(2), Region(3)
    a("XADD", "k", "*", "f", "v")
    a.send(b)
    b("PEXPIREAT", "k", "4000000002000")
    b("DEL", "k")
    a("SET", "k", "text")
    a.send(c)
    b.send(c)
    b.send(a)
    a.send(b)
    assert everywhere((a, b, c), "GET", "k") == b"$4\r\ntext\r\n"
    assert everywhere((a, b, c), "PEXPIRETIME", "k") == b":-1\r\n"


def test_a_write_refused_for_its_kind_assigns_nothing():
    """Seed 250 of test_types_fuzz at 600 steps, shrunk: an SADD refused with WRONGTYPE on a
    string re-asserted the string as this instance's own assign (a dot no effect carried),
    so a concurrent SET from a third region resolved differently here."""
    a, b, c = Region(1), Region(2), Region(3)
    c("MSETNX", "s1", "v545", "f0", "b")
    c.send(a)
    b("MSET", "n1", "v598", "f0", "v598")
    state = a.server.active_active.keyed.keys
    before = repr(state[(0, b"f0")])
    assert a("SADD", "f0", "m6").startswith(b"-WRONGTYPE")
    assert repr(state[(0, b"f0")]) == before
    for x in (a, b, c):
        for y in (a, b, c):
            if x is not y:
                x.send(y)
    everywhere((a, b, c), "GET", "f0")


def test_a_command_that_leaves_an_hll_as_it_was_keeps_the_list_it_hides_and_the_ttl():
    """Seed 382 of test_types_fuzz at 800 steps, shrunk: a list pushed concurrently with a
    RENAME of an HLL (with a TTL) over it stays hidden under the HLL; an LMOVE from a missing
    source naming the key changed nothing, yet made an LDEL of the hidden list, which took
    the TTL at every instance."""
    a, b, c = Region(1), Region(2), Region(3)
    b("PFADD", "h", "x")
    b("PEXPIRE", "h", "88471552")
    c("RPUSH", "l", "1")
    c.send(a)
    c.send(b)
    a("LPUSH", "l", "2")  # concurrent with the RENAME: stays, hidden under the HLL
    assert b("RENAME", "h", "l") == b"+OK\r\n"
    ttl = b("PEXPIRETIME", "l")
    b.send(c)
    a.send(c)
    engine = c.server.active_active
    kept = (engine.lists.has(0, b"l"), engine.ttl.get((0, b"l")))
    assert kept[0] and kept[1]
    assert c("LMOVE", "missing", "l", "LEFT", "RIGHT") == b"$-1\r\n"
    assert (engine.lists.has(0, b"l"), engine.ttl.get((0, b"l"))) == kept
    for x in (a, b, c):
        for y in (a, b, c):
            if x is not y:
                x.send(y)
    assert everywhere((a, b, c), "PEXPIRETIME", "l") == ttl != b":-1\r\n"
    assert everywhere((a, b, c), "TYPE", "l") == b"+string\r\n"
