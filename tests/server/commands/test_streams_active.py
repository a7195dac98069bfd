"""The stream handlers on an Active-Active stream (in-process, the engine left out): XADD's
ID modes, XSETID's rule, XREADGROUP ``>`` through the per-sub-stream cursors (a late entry
is delivered, not skipped), and replies for the merged view. The plain-stream replies are
the side-by-side tests' (test_streams.py, test_stream_groups.py)."""

from __future__ import annotations

import pytest
from rill.server.commands import load_all
from rill.server.server import Server
from rill.storage.stream.active import ActiveStream

from tests.support import run_inproc as run


@pytest.fixture
def aa(monkeypatch):
    load_all()
    server = Server()
    monkeypatch.setattr(server, "new_stream", lambda: ActiveStream(1))
    monkeypatch.setattr(ActiveStream, "id_mode", "strict")
    return server, server.new_client()


def test_xadd_id_modes(aa):
    server, c = aa
    assert run(server, c, "XADD", "x", "110", "f", "v") == b"$5\r\n110-1\r\n"
    assert type(c.db.lookup(b"x")) is ActiveStream
    assert run(server, c, "XADD", "x", "110", "f", "v") == b"$7\r\n110-257\r\n"
    assert run(server, c, "XADD", "x", "200-5", "f", "v") == (
        b"-ERR Active-Active strict XADD ID mode accepts only '*' or a milliseconds-only ID\r\n"
    )
    assert run(server, c, "XADD", "x", "200-*", "f", "v") == b"$5\r\n200-1\r\n"
    assert run(server, c, "XADD", "x", "100", "f", "v") == (
        b"-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n"
    )
    ActiveStream.id_mode = "semi-strict"
    assert run(server, c, "XADD", "x", "300-5", "f", "v") == b"$5\r\n300-5\r\n"
    ActiveStream.id_mode = "liberal"
    assert run(server, c, "XADD", "x", "400", "f", "v") == b"$5\r\n400-0\r\n"
    reply = run(server, c, "XADD", "x", "*", "f", "v")
    assert reply.endswith(b"-1\r\n")
    assert run(server, c, "XLEN", "x") == b":6\r\n"


def test_xsetid_refuses_a_lower_id(aa):
    server, c = aa
    run(server, c, "XADD", "x", "110", "f", "v")
    run(server, c, "XDEL", "x", "110-1")
    # a plain stream with no entries takes any ID; Active-Active never goes below the top
    assert run(server, c, "XSETID", "x", "50") == (
        b"-ERR The ID specified in XSETID is smaller than the target stream top item\r\n"
    )
    assert run(server, c, "XSETID", "x", "500", "ENTRIESADDED", "7") == b"+OK\r\n"
    s = c.db.lookup(b"x")
    assert s.last_id == 500 << 64 and s.entries_added == 7
    assert s.drain()[-1] == [b"SETID", b"500-0", b"7", b"110-1"]


def test_xreadgroup_delivers_a_late_entry(aa):
    server, c = aa
    for ms in ("110", "120", "130"):
        run(server, c, "XADD", "x", ms, "f", "v")
    assert run(server, c, "XGROUP", "CREATE", "x", "g", "0") == b"+OK\r\n"
    reply = run(server, c, "XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "x", ">")
    assert b"110-1" in reply and b"120-1" in reply and b"130-1" not in reply
    s = c.db.lookup(b"x")
    s.apply([b"XADD", b"2", b"115-2", b"f", b"late"])
    reply = run(server, c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "x", ">")
    assert reply.index(b"115-2") < reply.index(b"130-1")
    assert run(server, c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "x", ">") == b"*-1\r\n"
    # a late entry alone (below the group's last_id) still wakes the read
    s.apply([b"XADD", b"2", b"125-2", b"f", b"later"])
    reply = run(server, c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "x", ">")
    assert b"125-2" in reply
    rng = run(server, c, "XRANGE", "x", "(120-1", "+")
    assert rng.startswith(b"*2\r\n") and rng.index(b"125-2") < rng.index(b"130-1")
    assert run(server, c, "XREAD", "STREAMS", "x", "120-1") == b"*1\r\n*2\r\n$1\r\nx\r\n" + rng


def test_xrange_merges_sub_streams(aa):
    server, c = aa
    run(server, c, "XADD", "x", "110", "f", "v")
    s = c.db.lookup(b"x")
    s.apply([b"XADD", b"2", b"105-2", b"g", b"w"])
    assert run(server, c, "XRANGE", "x", "-", "+") == (
        b"*2\r\n*2\r\n$5\r\n105-2\r\n*2\r\n$1\r\ng\r\n$1\r\nw\r\n"
        b"*2\r\n$5\r\n110-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    )
    assert run(server, c, "XREVRANGE", "x", "+", "-", "COUNT", "1") == (
        b"*1\r\n*2\r\n$5\r\n110-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    )
