"""Streams beyond Redis 7: XDELEX/XACKDEL and the KEEPREF/DELREF/ACKED trims (8.2),
XREADGROUP CLAIM (8.4), IDMP/XCFGSET (8.6), XNACK (8.8), MAXCOUNT/MAXSIZE (8.10), and
rill's node garbage collection. Replies follow the redis.io command pages."""

from __future__ import annotations

import time

import pytest


def rawcmd(r, *args):
    """A command whose reply redis-py would reshape, read as the plain RESP values."""
    conn = r.connection_pool.get_connection()
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        r.connection_pool.release(conn)


def streams(reply):
    """XREAD/XREADGROUP reply as [(key, entries)] in RESP2 (pairs) or RESP3 (map)."""
    if isinstance(reply, dict):
        return list(reply.items())
    return [(k, v) for k, v in reply]


def fields(info):
    """A map reply (XINFO) as (ordered key list, dict), RESP2 or RESP3."""
    if isinstance(info, dict):
        return list(info), info
    return list(info[::2]), dict(zip(info[::2], info[1::2], strict=True))


def xadd_n(r, key, n, start=1):
    for i in range(start, start + n):
        r.execute_command("XADD", key, f"{i}-0", "f", f"v{i}")


# -- XDELEX -------------------------------------------------------------------------------------


def test_xdelex_doc_example_missing_ids(raw):
    raw.call("XADD", "mystream", "1-0", "field1", "value1")
    assert raw.call("XDELEX", "mystream", "KEEPREF", "IDS", "2", "1526919030474-55",
                    "1526919030474-56") == b"*2\r\n:-1\r\n:-1\r\n"
    assert raw.call("XLEN", "mystream") == b":1\r\n"


def test_xdelex_missing_key_and_codes(r):
    assert r.execute_command("XDELEX", "nokey", "IDS", "2", "1-0", "2-0") == [-1, -1]
    xadd_n(r, "s", 3)
    assert r.execute_command("XDELEX", "s", "IDS", "2", "1-0", "9-0") == [1, -1]
    # ACKED without groups: nothing references the entry, so it goes.
    assert r.execute_command("XDELEX", "s", "ACKED", "IDS", "1", "2-0") == [1]
    assert r.xlen("s") == 1


def test_xdelex_acked_waits_for_every_group(r):
    xadd_n(r, "s", 2)
    r.xgroup_create("s", "g", "0")
    r.xreadgroup("g", "c", {"s": ">"}, count=1)
    # 1-0 is pending, 2-0 not yet delivered: both referenced.
    assert r.execute_command("XDELEX", "s", "ACKED", "IDS", "2", "1-0", "2-0") == [2, 2]
    r.xack("s", "g", "1-0")
    assert r.execute_command("XDELEX", "s", "ACKED", "IDS", "2", "1-0", "2-0") == [1, 2]
    assert r.xlen("s") == 1


def test_xdelex_delref_drops_pel_entries_even_dangling(r):
    xadd_n(r, "s", 3)
    r.xgroup_create("s", "g", "0")
    r.xreadgroup("g", "c", {"s": ">"})
    r.xdel("s", "1-0")  # dangling reference left in the PEL
    assert r.execute_command("XDELEX", "s", "DELREF", "IDS", "2", "1-0", "2-0") == [-1, 1]
    assert [p["message_id"] for p in r.xpending_range("s", "g", "-", "+", 10)] == [b"3-0"]
    assert r.execute_command("XDELEX", "s", "KEEPREF", "IDS", "1", "3-0") == [1]
    assert r.xpending("s", "g")["pending"] == 1


@pytest.mark.parametrize("args, err", [
    (["IDS", "0", "1-0"], "Number of IDs must be a positive integer"),
    (["IDS", "x", "1-0"], "Number of IDs must be a positive integer"),
    (["IDS", "2", "1-0"], "must match the number of arguments"),
    (["BOGUS", "IDS", "1", "1-0"], "syntax error"),
    (["IDS", "1", "bad"], "Invalid stream ID"),
])
def test_xdelex_errors(r, args, err):
    xadd_n(r, "s", 1)
    with pytest.raises(Exception, match=err):
        r.execute_command("XDELEX", "s", *args)


def test_xdelex_wrongtype_and_arity(r):
    r.set("str", "x")
    with pytest.raises(Exception, match="WRONGTYPE"):
        r.execute_command("XDELEX", "str", "IDS", "1", "1-0")
    with pytest.raises(Exception, match="wrong number of arguments"):
        r.execute_command("XDELEX", "s", "IDS", "1")


# -- XACKDEL ------------------------------------------------------------------------------------


def test_xackdel_doc_example(r):
    xadd_n(r, "mystream", 2)
    r.xgroup_create("mystream", "mygroup", "0")
    r.xreadgroup("mygroup", "consumer1", {"mystream": ">"}, count=2)
    assert r.xpending("mystream", "mygroup")["pending"] == 2
    assert r.execute_command("XACKDEL", "mystream", "mygroup", "KEEPREF", "IDS", "2",
                             "1-0", "2-0") == [1, 1]
    assert r.xpending("mystream", "mygroup")["pending"] == 0
    assert r.xrange("mystream") == []


def test_xackdel_acked_and_delref_across_groups(r):
    xadd_n(r, "s", 3)
    r.xgroup_create("s", "g1", "0")
    r.xgroup_create("s", "g2", "0")
    r.xreadgroup("g1", "c", {"s": ">"})
    r.xreadgroup("g2", "c", {"s": ">"})
    # g2 still has 1-0 pending: acknowledged in g1, kept in the stream.
    assert r.execute_command("XACKDEL", "s", "g1", "ACKED", "IDS", "1", "1-0") == [2]
    assert r.xlen("s") == 3
    assert r.execute_command("XACKDEL", "s", "g2", "ACKED", "IDS", "1", "1-0") == [1]
    # DELREF: acknowledged in g1, deleted, and gone from g2's PEL too.
    assert r.execute_command("XACKDEL", "s", "g1", "DELREF", "IDS", "2", "2-0", "7-0") == [1, -1]
    assert r.xpending("s", "g2")["pending"] == 1
    assert r.execute_command("XACKDEL", "nokey", "g", "IDS", "1", "1-0") == [-1]
    with pytest.raises(Exception, match="NOGROUP"):
        r.execute_command("XACKDEL", "s", "nogroup", "IDS", "1", "1-0")


# -- trims with policies -------------------------------------------------------------------------


def test_xtrim_acked_keeps_referenced_entries(r):
    xadd_n(r, "s", 10)
    r.xgroup_create("s", "g", "0")
    r.xreadgroup("g", "c", {"s": ">"}, count=5)
    r.xack("s", "g", "1-0", "2-0", "4-0")
    # Only 1, 2 and 4 are unreferenced (3 and 5 pending, 6..10 undelivered).
    assert r.execute_command("XTRIM", "s", "ACKED", "MAXLEN", "0") == 3
    assert [e[0] for e in r.xrange("s")][:3] == [b"3-0", b"5-0", b"6-0"]
    assert r.execute_command("XTRIM", "s", "MINID", "6", "ACKED") == 0
    assert r.execute_command("XTRIM", "s", "DELREF", "MINID", "6") == 2
    assert r.xpending("s", "g")["pending"] == 0
    # KEEPREF is Redis 7's trim.
    assert r.execute_command("XTRIM", "s", "KEEPREF", "MAXLEN", "2") == 3
    assert r.xlen("s") == 2


def test_xadd_with_policy_and_trim(r):
    xadd_n(r, "s", 5)
    r.xgroup_create("s", "g", "0")
    r.xreadgroup("g", "c", {"s": ">"}, count=2)
    r.execute_command("XADD", "s", "ACKED", "MAXLEN", "1", "6-0", "f", "v")
    # 1 and 2 are pending, 3..6 undelivered: nothing may go.
    assert r.xlen("s") == 6
    r.execute_command("XADD", "s", "DELREF", "MAXLEN", "3", "7-0", "f", "v")
    assert r.xlen("s") == 3 and r.xpending("s", "g")["pending"] == 0


# -- IDMP / XCFGSET ------------------------------------------------------------------------------


def test_idmp_doc_example_and_xinfo_fields(r):
    a = r.execute_command("XADD", "mystream", "IDMP", "producer1", "msg1", "*", "field", "value")
    b = r.execute_command("XADD", "mystream", "IDMP", "producer1", "msg1", "*", "field", "other")
    assert a == b
    c = r.execute_command("XADD", "mystream", "IDMPAUTO", "producer2", "*", "field", "value")
    d = r.execute_command("XADD", "mystream", "IDMPAUTO", "producer2", "*", "field", "value")
    assert c == d and c != a
    assert r.execute_command("XADD", "mystream", "IDMP", "producer2", "msg1", "*", "f", "v") != a
    assert r.xlen("mystream") == 3
    keys, pairs = fields(rawcmd(r, "xinfo", "STREAM", "mystream"))
    assert pairs[b"idmp-duration"] == 100 and pairs[b"idmp-maxsize"] == 100
    assert pairs[b"pids-tracked"] == 2 and pairs[b"iids-tracked"] == 3
    assert pairs[b"iids-added"] == 3 and pairs[b"iids-duplicates"] == 2
    assert keys.index(b"idmp-duration") == keys.index(b"recorded-first-entry-id") + 1
    assert r.execute_command("XCFGSET", "mystream", "IDMP-DURATION", "300", "IDMP-MAXSIZE", "1000") == b"OK"
    _keys, pairs = fields(rawcmd(r, "xinfo", "STREAM", "mystream"))
    assert pairs[b"idmp-duration"] == 300 and pairs[b"iids-tracked"] == 0  # changed: cleared


def test_plain_stream_has_no_idmp_fields(r):
    xadd_n(r, "s", 1)
    assert b"idmp-duration" not in fields(rawcmd(r, "xinfo", "STREAM", "s"))[1]


def test_idmp_maxsize_evicts_oldest(r):
    r.execute_command("XADD", "s", "*", "f", "v")
    r.execute_command("XCFGSET", "s", "IDMP-MAXSIZE", "2")
    first = r.execute_command("XADD", "s", "IDMP", "p", "a", "*", "f", "v")
    r.execute_command("XADD", "s", "IDMP", "p", "b", "*", "f", "v")
    r.execute_command("XADD", "s", "IDMP", "p", "c", "*", "f", "v")
    assert r.execute_command("XADD", "s", "IDMP", "p", "a", "*", "f", "v") != first


@pytest.mark.parametrize("args, err", [
    (["IDMP-DURATION", "0"], "invalid duration"),
    (["IDMP-DURATION", "86401"], "invalid duration"),
    (["IDMP-MAXSIZE", "10001"], "invalid maxsize"),
    (["IDMP-MAXSIZE", "x"], "invalid maxsize"),
    (["BOGUS", "1"], "syntax error"),
    (["IDMP-MAXSIZE"], "syntax error"),
])
def test_xcfgset_errors(r, args, err):
    xadd_n(r, "s", 1)
    with pytest.raises(Exception, match=err):
        r.execute_command("XCFGSET", "s", *args)


def test_xcfgset_no_such_key_and_idmp_errors(r):
    with pytest.raises(Exception, match="no such key"):
        r.execute_command("XCFGSET", "nokey", "IDMP-DURATION", "5")
    with pytest.raises(Exception, match="auto-generated"):
        r.execute_command("XADD", "s", "IDMP", "p", "i", "1-1", "f", "v")
    with pytest.raises(Exception, match="syntax error"):
        r.execute_command("XADD", "s", "IDMP", "p", "i", "IDMPAUTO", "p", "*", "f", "v")
    assert r.execute_command("XADD", "nokey", "NOMKSTREAM", "IDMP", "p", "i", "*", "f", "v") is None


# -- XNACK / XREADGROUP CLAIM ----------------------------------------------------------------------


def test_xnack_doc_example(r):
    xadd_n(r, "mystream", 2)
    r.xgroup_create("mystream", "mygroup", "0")
    r.xreadgroup("mygroup", "consumer1", {"mystream": ">"})
    assert r.execute_command("XNACK", "mystream", "mygroup", "FAIL", "IDS", "2", "1-0", "2-0") == 2
    pend = rawcmd(r, "xpending", "mystream", "mygroup", "-", "+", "10")
    assert pend == [[b"1-0", b"", -1, 1], [b"2-0", b"", -1, 1]]
    assert r.execute_command("XNACK", "mystream", "mygroup", "SILENT", "IDS", "1", "1-0") == 1
    assert r.execute_command("XNACK", "mystream", "mygroup", "FATAL", "IDS", "1", "2-0") == 1
    pend = rawcmd(r, "xpending", "mystream", "mygroup", "-", "+", "10")
    assert [p[3] for p in pend] == [0, 2**63 - 1]
    assert r.execute_command("XNACK", "mystream", "mygroup", "FAIL", "IDS", "1", "9-0") == 0
    with pytest.raises(Exception, match="NOGROUP"):
        r.execute_command("XNACK", "mystream", "nogroup", "FAIL", "IDS", "1", "1-0")
    with pytest.raises(Exception, match="syntax error"):
        r.execute_command("XNACK", "mystream", "mygroup", "MAYBE", "IDS", "1", "1-0")


def test_xnack_force_and_retrycount(r):
    xadd_n(r, "s", 2)
    r.xgroup_create("s", "g", "$")
    assert r.execute_command("XNACK", "s", "g", "FAIL", "IDS", "2", "1-0", "5-0", "FORCE") == 1
    assert r.execute_command("XNACK", "s", "g", "FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "7") == 1
    assert rawcmd(r, "xpending", "s", "g", "-", "+", "10") == [[b"1-0", b"", -1, 7]]


def test_claim_delivers_idle_and_released_first_with_metadata(r):
    xadd_n(r, "s", 4)
    r.xgroup_create("s", "g", "0")
    r.xreadgroup("g", "c1", {"s": ">"}, count=2)
    r.execute_command("XNACK", "s", "g", "FAIL", "IDS", "1", "2-0")
    time.sleep(0.02)
    reply = rawcmd(r, "xreadgroup", "GROUP", "g", "c2", "CLAIM", "10", "STREAMS", "s", ">")
    entries = streams(reply)[0][1]
    # Released 2-0 first, then idle 1-0, then the new entries 3-0 and 4-0.
    assert [e[0] for e in entries] == [b"2-0", b"1-0", b"3-0", b"4-0"]
    assert len(entries[0]) == 4 and entries[0][3] == 1 and isinstance(entries[0][2], int)
    assert len(entries[1]) == 4 and entries[1][2] >= 10 and entries[1][3] == 1
    assert len(entries[2]) == 2
    pend = rawcmd(r, "xpending", "s", "g", "-", "+", "10", "c2")
    assert [(p[0], p[3]) for p in pend] == [(b"1-0", 2), (b"2-0", 2), (b"3-0", 1), (b"4-0", 1)]


def test_claim_respects_count_and_min_idle(r):
    xadd_n(r, "s", 3)
    r.xgroup_create("s", "g", "0")
    r.xreadgroup("g", "c1", {"s": ">"}, count=2)
    reply = rawcmd(r, "xreadgroup", "GROUP", "g", "c2", "COUNT", "1", "CLAIM", "100000",
                              "STREAMS", "s", ">")
    assert [e[0] for e in streams(reply)[0][1]] == [b"3-0"]
    assert rawcmd(r, "xreadgroup", "GROUP", "g", "c2", "CLAIM", "100000",
                             "STREAMS", "s", ">") is None


# -- MAXCOUNT / MAXSIZE --------------------------------------------------------------------------


def test_xread_maxcount_and_maxsize(r):
    for k in ("s1", "s2", "s3"):
        xadd_n(r, k, 10)
    reply = rawcmd(r, "xread", "COUNT", "5", "MAXCOUNT", "8", "STREAMS", "s1", "s2", "s3", "0", "0", "0")
    assert [(k, len(v)) for k, v in streams(reply)] == [(b"s1", 5), (b"s2", 3)]
    reply = rawcmd(r, "xread", "MAXCOUNT", "7", "STREAMS", "s1", "s2", "s3", "0", "0", "0")
    assert [(k, len(v)) for k, v in streams(reply)] == [(b"s1", 7)]
    r.execute_command("XADD", "big", "1-1", "f", "x" * 5000)
    reply = rawcmd(r, "xread", "MAXSIZE", "50", "STREAMS", "big", "s1", "0", "0")
    assert [(k, len(v)) for k, v in streams(reply)] == [(b"big", 1)]
    with pytest.raises(Exception, match="MAXCOUNT must be greater than or equal to COUNT"):
        rawcmd(r, "xread", "COUNT", "5", "MAXCOUNT", "4", "STREAMS", "s1", "0")
    with pytest.raises(Exception, match="positive integer"):
        rawcmd(r, "xread", "MAXSIZE", "0", "STREAMS", "s1", "0")


def test_xreadgroup_maxcount_leaves_the_rest_undelivered(r):
    for k in ("s1", "s2"):
        xadd_n(r, k, 5)
        r.xgroup_create(k, "g", "0")
    reply = rawcmd(r, "xreadgroup", "GROUP", "g", "c", "MAXCOUNT", "7", "STREAMS", "s1", "s2", ">", ">")
    assert [(k, len(v)) for k, v in streams(reply)] == [(b"s1", 5), (b"s2", 2)]
    assert r.xpending("s2", "g")["pending"] == 2
    reply = rawcmd(r, "xreadgroup", "GROUP", "g", "c", "STREAMS", "s2", ">")
    assert [e[0] for e in streams(reply)[0][1]] == [b"3-0", b"4-0", b"5-0"]


# -- GC ---------------------------------------------------------------------------------------------


def test_gc_reclaims_memory_and_keeps_replies(r):
    """The session server runs with the default stream-node-gc-percent (50)."""
    import random

    rnd = random.Random(7)
    pipe = r.pipeline(transaction=False)
    for i in range(1, 2001):
        pipe.execute_command("XADD", "a", f"{i}-0", "f", str(i))
        pipe.execute_command("XADD", "b", f"{i}-0", "f", str(i))
    pipe.execute_command("CONFIG", "SET", "stream-node-gc-percent", "0")
    pipe.execute()
    victims = rnd.sample(range(1, 2001), 1800)
    r.execute_command("XDEL", "b", *[f"{i}-0" for i in victims])
    r.execute_command("CONFIG", "SET", "stream-node-gc-percent", "50")
    r.execute_command("XDEL", "a", *[f"{i}-0" for i in victims])
    assert r.xrange("a") == r.xrange("b")
    assert r.xrevrange("a", count=7) == r.xrevrange("b", count=7)
    da = fields(rawcmd(r, "xinfo", "STREAM", "a"))[1]
    db = fields(rawcmd(r, "xinfo", "STREAM", "b"))[1]
    # GC compacts nodes in place (issue 20): XINFO, radix-tree counters included, is the
    # same as without it, i.e. as Redis's.
    assert da == db
    ma = r.memory_usage("a", samples=0)
    mb = r.memory_usage("b", samples=0)
    # Every node stays (and the open tail keeps its tombstones), so 20 small nodes keep their
    # fixed costs: well under half here; issue 8's target against Redis is a bench row.
    assert ma < mb / 2
    info = r.info("memory")
    assert info["stream_gc_reclaimed_bytes"] > 0
