"""BZPOPMIN/BZPOPMAX/BZMPOP over real connections, each scenario run on rill and on redis-server."""

from __future__ import annotations

import time

import pytest

from tests.support import RawClient, Waiter


def _on_both(rill_server, oracle_server, scenario) -> None:
    """Run ``scenario(port)`` (which returns a transcript) on both servers; they must agree."""
    results = []
    for port in (rill_server.port, oracle_server.port):
        c = RawClient(port)
        c.call("FLUSHALL")
        c.close()
        results.append(scenario(port))
    assert results[0] == results[1]


def _blocked(port: int, n: int) -> None:
    """Wait until ``n`` clients are blocked (INFO clients)."""
    c = RawClient(port)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        info = c.call("INFO", "clients")
        if b"blocked_clients:%d\r\n" % n in info:
            c.close()
            return
        time.sleep(0.01)
    c.close()
    raise AssertionError(f"never saw {n} blocked clients")


def test_served_in_order_with_key_names(rill_server, oracle_server):
    def scenario(port):
        out = []
        w1, w2, w3 = Waiter(port), Waiter(port), Waiter(port)
        w3.call("HELLO", "3")
        w1.send("BZPOPMIN", "a", "b", "0")
        _blocked(port, 1)
        w2.send("BZPOPMAX", "b", "0")
        _blocked(port, 2)
        w3.send("BZMPOP", "0", "2", "a", "b", "MAX", "COUNT", "5")
        _blocked(port, 3)
        p = RawClient(port)
        out.append(p.call("ZADD", "b", "1", "x", "2", "y", "3", "z", "4", "w"))
        out += [w1.reply(), w2.reply(), w3.reply()]
        out.append(p.call("EXISTS", "b"))
        for c in (w1, w2, w3, p):
            c.close()
        return out

    _on_both(rill_server, oracle_server, scenario)


def test_timeouts_and_nonblocking_forms(rill_server, oracle_server):
    def scenario(port):
        out = []
        w = Waiter(port)
        t0 = time.monotonic()
        w.send("BZPOPMIN", "nokey", "0.2")
        out.append(w.reply())
        out.append(0.15 < time.monotonic() - t0 < 2)
        w.send("BZMPOP", "0.1", "1", "nokey", "MIN")
        out.append(w.reply())
        w.call("HELLO", "3")
        w.send("BZPOPMAX", "nokey", "0.1")
        out.append(w.reply())
        out.append(w.call("ZADD", "k", "1", "a"))
        out.append(w.call("BZPOPMAX", "k", "0.1"))
        w.close()
        return out

    _on_both(rill_server, oracle_server, scenario)


def test_inside_multi_nothing_blocks(rill_server, oracle_server):
    def scenario(port):
        c = RawClient(port)
        out = [c.call("MULTI")]
        for cmd in (("BZPOPMIN", "nokey", "0"), ("BZPOPMAX", "nokey", "0"),
                    ("BZMPOP", "0", "1", "nokey", "MIN"), ("ZADD", "k", "1", "a"),
                    ("BZPOPMIN", "k", "0")):
            out.append(c.call(*cmd))
        out.append(c.call("EXEC"))
        c.close()
        return out

    _on_both(rill_server, oracle_server, scenario)


def test_key_replaced_by_another_type_keeps_waiting(rill_server, oracle_server):
    def scenario(port):
        out = []
        w = Waiter(port)
        w.send("BZPOPMIN", "k", "0")
        _blocked(port, 1)
        p = RawClient(port)
        out.append(p.call("SET", "k", "string"))
        out.append(w.silent(0.2))
        out.append(p.call("DEL", "k"))
        out.append(p.call("RPUSH", "k", "x"))
        out.append(w.silent(0.2))
        out.append(p.call("DEL", "k"))
        # a MULTI that creates and deletes the set wakes nobody
        p.call("MULTI")
        p.call("ZADD", "k", "1", "a")
        p.call("DEL", "k")
        out.append(p.call("EXEC"))
        out.append(w.silent(0.2))
        out.append(p.call("ZADD", "k", "5", "five"))
        out.append(w.reply())
        for c in (w, p):
            c.close()
        return out

    _on_both(rill_server, oracle_server, scenario)


def test_waiters_take_what_is_there_and_the_rest_keep_waiting(rill_server, oracle_server):
    def scenario(port):
        out = []
        ws = [Waiter(port) for _ in range(3)]
        for i, w in enumerate(ws):
            w.send("BZPOPMIN", "k", "0")
            _blocked(port, i + 1)
        p = RawClient(port)
        out.append(p.call("ZADD", "k", "1", "a", "2", "b"))
        out += [ws[0].reply(), ws[1].reply(), ws[2].silent(0.2)]
        out.append(p.call("EXISTS", "k"))
        out.append(p.call("CLIENT", "UNBLOCK", p.call("CLIENT", "ID")[1:-2]))  # not blocked: 0
        for w in ws + [p]:
            w.close()
        return out

    _on_both(rill_server, oracle_server, scenario)


def test_client_unblock(rill_server, oracle_server):
    def scenario(port):
        out = []
        w = Waiter(port)
        wid = w.call("CLIENT", "ID")[1:-2]
        w.send("BZMPOP", "0", "1", "k", "MIN")
        _blocked(port, 1)
        p = RawClient(port)
        out.append(p.call("CLIENT", "UNBLOCK", wid))
        out.append(w.reply())
        w.send("BZPOPMAX", "k", "0")
        _blocked(port, 1)
        out.append(p.call("CLIENT", "UNBLOCK", wid, "ERROR"))
        out.append(w.reply())
        w.close()
        p.close()
        return out

    _on_both(rill_server, oracle_server, scenario)


@pytest.mark.parametrize("cmd", [("BZPOPMIN", "k", "0"), ("BZMPOP", "0", "1", "k", "MAX", "COUNT", "2")])
def test_served_pop_reaches_the_aof_as_zpop(tmp_path, cmd):
    from tests.support import start_rill

    server = start_rill("--appendonly", "yes", "--appendfsync", "always", workdir=str(tmp_path))
    try:
        w = Waiter(server.port)
        w.send(*cmd)
        _blocked(server.port, 1)
        p = RawClient(server.port)
        p.call("ZADD", "k", "1", "a", "2", "b", "3", "c")
        assert w.reply().startswith(b"*")
        text = b"".join(f.read_bytes() for f in sorted((tmp_path / "appendonlydir").glob("*.incr.aof")))
        if cmd[0] == "BZPOPMIN":
            assert b"$7\r\nZPOPMIN\r\n$1\r\nk\r\n" in text
        else:
            assert b"$7\r\nZPOPMAX\r\n$1\r\nk\r\n$1\r\n2\r\n" in text
        assert b"BZ" not in text
        w.close()
        p.close()
    finally:
        server.stop()
