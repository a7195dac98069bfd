"""PSYNC2: every server of a replication chain shares its master's history (its
replication ID and offsets), so that a replica of a replica, a promoted replica's
old peers, a demoted master and a server restarted from its dump all continue with
a partial resync instead of a full one. Each scenario runs all-redis and all-rill
(or mixed chains) and must give the same sync counts and equal data."""

from __future__ import annotations

import socket
import subprocess

import pytest
import redis

from tests.server.replication.test_replica import _dataset
from tests.support import start_redis, start_rill, wait_until


def _start(kind: str, *args: str):
    start = start_redis if kind == "redis" else start_rill
    return start("--repl-diskless-sync-delay", "0", *args)


def _repl(r: redis.Redis) -> dict:
    return r.info("replication")


def _caught_up(m: redis.Redis, r: redis.Redis) -> bool:
    info = _repl(r)
    return (info.get("master_link_status") == "up"
            and info["master_repl_offset"] == _repl(m)["master_repl_offset"])


def _syncs(r: redis.Redis) -> tuple[int, int]:
    stats = r.info("stats")
    return stats["sync_full"], stats["sync_partial_ok"]


@pytest.mark.parametrize(("top", "middle"), [("redis", "rill"), ("rill", "rill"), ("rill", "redis")])
def test_a_chain_shares_its_masters_history(oracle_server, top, middle):
    """A replica passes its master's stream on byte for byte: its replicas see the top
    master's replication ID and offsets, and a replica that full-syncs from the middle
    resumes the stream in the database the snapshot says it had selected (no SELECT
    follows, since the top master sent its SELECT before)."""
    with _start(top) as a, _start(middle) as b, start_rill() as c, start_redis() as d:
        ma, mb = redis.Redis(port=a.port, db=9), redis.Redis(port=b.port)
        leaves = [redis.Redis(port=s.port) for s in (c, d)]
        mb.replicaof("127.0.0.1", a.port)
        wait_until(lambda: _caught_up(ma, mb))
        ma.set("before", "1")  # the stream selects db 9 here, once
        wait_until(lambda: _caught_up(ma, mb))
        for r in leaves:
            r.replicaof("127.0.0.1", b.port)
        for r in leaves:
            wait_until(lambda r=r: _caught_up(ma, r))
        ma.set("after", "2")
        ma.incr("n")
        for r in [mb, *leaves]:
            wait_until(lambda r=r: _caught_up(ma, r))
        top_info = _repl(ma)
        for r in [mb, *leaves]:
            info = _repl(r)
            assert info["master_replid"] == top_info["master_replid"]
            assert info["master_repl_offset"] == top_info["master_repl_offset"]
        assert _dataset(a.port) == _dataset(b.port) == _dataset(c.port) == _dataset(d.port)
        assert leaves[0].get("after") is None and redis.Redis(port=c.port, db=9).get("after") == b"2"
        for r in [ma, mb, *leaves]:
            r.close()


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_promoted_replica_continues_its_old_master_and_peers(oracle_server, kind):
    """REPLICAOF NO ONE starts a new history and keeps the old one as the second, valid
    up to where it left it: the old master's other replica, and the old master itself
    once demoted, continue with the promoted one (two partial resyncs, no full one)."""
    with _start(kind) as m, _start(kind) as a, _start(kind) as b:
        rm, ra, rb = (redis.Redis(port=s.port, db=3) for s in (m, a, b))
        for r in (ra, rb):
            r.replicaof("127.0.0.1", m.port)
        rm.set("k", "v")
        rm.rpush("l", 1, 2, 3)
        for r in (ra, rb):
            wait_until(lambda r=r: _caught_up(rm, r))
        old = _repl(rm)
        ra.replicaof("no", "one")
        promoted = _repl(ra)
        assert promoted["master_replid2"] == old["master_replid"]
        assert promoted["second_repl_offset"] == old["master_repl_offset"] + 1
        assert promoted["master_replid"] != old["master_replid"]
        rb.replicaof("127.0.0.1", a.port)
        rm.replicaof("127.0.0.1", a.port)
        ra.set("new", "1")
        for r in (rb, rm):
            wait_until(lambda r=r: _caught_up(ra, r))
            assert _repl(r)["master_replid"] == promoted["master_replid"]
            assert _repl(r)["master_replid2"] == old["master_replid"]
        assert _syncs(ra) == (0, 2)
        assert _dataset(m.port) == _dataset(a.port) == _dataset(b.port)
        for r in (rm, ra, rb):
            r.close()


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_middle_replica_continued_under_a_new_id_sends_its_replicas_nothing_of_it(oracle_server, kind):
    """A replica continued under a new replication ID drops its own replicas before any
    byte of the new history reaches them: they come back asking for the old ID at an
    offset it still serves as its second, and continue (no full sync). The new master's
    backlog already holds writes, so they follow +CONTINUE on the same link."""
    with _start(kind) as m, _start(kind) as p, _start(kind) as mid, _start(kind) as leaf:
        rm, rp, rmid, rleaf = (redis.Redis(port=s.port) for s in (m, p, mid, leaf))
        for r in (rp, rmid):
            r.replicaof("127.0.0.1", m.port)
        rleaf.replicaof("127.0.0.1", mid.port)
        rm.set("k", "v")
        for r in (rp, rmid, rleaf):
            wait_until(lambda r=r: _caught_up(rm, r))
        rp.replicaof("no", "one")
        for i in range(20):
            rp.set(f"new{i}", i)
        before = _syncs(rmid)
        rmid.replicaof("127.0.0.1", p.port)
        for r in (rmid, rleaf):
            wait_until(lambda r=r: _caught_up(rp, r))
        assert _syncs(rmid) == (before[0], before[1] + 1)
        assert _repl(rleaf)["master_replid"] == _repl(rp)["master_replid"]
        assert _dataset(p.port) == _dataset(mid.port) == _dataset(leaf.port)
        for r in (rm, rp, rmid, rleaf):
            r.close()


def _restart_with_dump(server, client: redis.Redis) -> None:
    """SHUTDOWN SAVE, then the same process again on its directory and port."""
    try:
        client.shutdown(save=True)
    except redis.ConnectionError:
        pass
    client.close()
    try:
        server.proc.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
        raise
    server.start()


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_replica_restarted_from_its_dump_continues(oracle_server, kind):
    """The dump records where in its master's stream the replica was (aux repl-id,
    repl-offset and the database the stream had selected): restarted, it asks its
    master to continue from there, and writes made meanwhile arrive in that database."""
    with _start(kind) as m:
        with _start(kind, "--replicaof", "127.0.0.1", str(m.port)) as r:
            rm, rr = redis.Redis(port=m.port, db=5), redis.Redis(port=r.port)
            rm.set("a", "1")
            wait_until(lambda: _caught_up(rm, rr))
            _restart_with_dump(r, rr)
            rm.set("b", "2")  # db 5 still: no SELECT in the stream
            rr = redis.Redis(port=r.port)
            wait_until(lambda: _caught_up(rm, rr))
            assert _syncs(rm) == (1, 1)
            assert _dataset(m.port) == _dataset(r.port)
            rr.close()
        rm.close()


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_replica_restarted_from_its_rewritten_config_continues(oracle_server, kind, tmp_path):
    """CONFIG GET replicaof and CONFIG REWRITE name the master followed now: a replica
    that was told REPLICAOF at run time, rewrote its file and was stopped (SIGTERM saves
    its dump, with its history's aux fields) comes back following the same master and
    continues (Redis's psync2 "Partial resync after restart using RDB aux fields")."""
    conf = tmp_path / f"{kind}.conf"
    conf.write_text("# written by the test\n")
    start = start_redis if kind == "redis" else start_rill
    with _start(kind) as m, start("--save", "900 1", config_file=str(conf), workdir=str(tmp_path)) as r:
        rm, rr = redis.Redis(port=m.port), redis.Redis(port=r.port)
        assert rr.config_get("replicaof") == {"replicaof": ""}
        rr.replicaof("127.0.0.1", m.port)
        assert rr.config_get("replicaof") == {"replicaof": f"127.0.0.1 {m.port}"}
        rm.set("k", "v")
        wait_until(lambda: _caught_up(rm, rr))
        rr.config_rewrite()
        lines = conf.read_text().splitlines()
        assert f"replicaof 127.0.0.1 {m.port}" in lines
        rr.close()
        r.stop()  # SIGTERM: saves the dump, as the save point asks
        before = _syncs(rm)
        r.start()
        rr = redis.Redis(port=r.port)
        rm.set("k2", "v2")
        wait_until(lambda: _caught_up(rm, rr))
        assert _syncs(rm) == (before[0], before[1] + 1)
        assert rr.get("k2") == b"v2"
        rr.replicaof("no", "one")
        assert rr.config_get("replicaof") == {"replicaof": ""}
        rr.config_rewrite()
        assert not [line for line in conf.read_text().splitlines() if line.startswith(("replicaof", "slaveof"))]
        for c in (rm, rr):
            c.close()


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_master_restarted_from_its_dump_continues_its_replicas(oracle_server, kind):
    """A master restarted from its dump keeps the history the dump names as its second
    one: its replica continues with it (under the master's new ID), no full sync."""
    # No PING in the stream, and SHUTDOWN finds the replica's ACK up to date (else it
    # sends GETACK first): the offset the dump records is the one read here.
    with _start(kind, "--repl-ping-replica-period", "3600") as m, _start(kind) as r:
        rm, rr = redis.Redis(port=m.port, db=2), redis.Redis(port=r.port)
        rr.replicaof("127.0.0.1", m.port)
        rm.set("a", "1")
        wait_until(lambda: _caught_up(rm, rr))
        old = _repl(rm)
        wait_until(lambda: _repl(rm)["slave0"]["offset"] == old["master_repl_offset"])
        _restart_with_dump(m, rm)
        rm = redis.Redis(port=m.port, db=2)
        wait_until(lambda: _caught_up(rm, rr))
        restarted = _repl(rm)
        assert restarted["master_replid2"] == old["master_replid"]
        assert restarted["second_repl_offset"] == old["master_repl_offset"] + 1
        assert _syncs(rm) == (0, 1)
        rm.set("b", "2")
        wait_until(lambda: _caught_up(rm, rr))
        assert _repl(rr)["master_replid"] == restarted["master_replid"]
        assert _dataset(m.port) == _dataset(r.port)
        rm.close()
        rr.close()



def _fake_master_psyncs(listener: socket.socket, rounds: int) -> list[list[bytes]]:
    """A master that answers each connection's handshake, then +FULLRESYNC, and closes
    before any snapshot (the transfer is lost); returns each connection's PSYNC."""
    seen = []
    for _ in range(rounds):
        conn, _ = listener.accept()
        with conn, conn.makefile("rb") as f:
            conn.settimeout(30)
            while True:
                argv = [f.read(int(f.readline()[1:]) + 2)[:-2] for _ in range(int(f.readline()[1:]))]
                name = argv[0].upper()
                if name == b"PSYNC":
                    conn.sendall(b"+FULLRESYNC %s 100\r\n" % (b"a" * 40))
                    seen.append(argv[1:])
                    break
                conn.sendall(b"+PONG\r\n" if name == b"PING" else b"+OK\r\n")
    return seen


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_full_sync_lost_before_its_snapshot_is_not_continued(oracle_server, kind):
    """+FULLRESYNC names the master's history, but it is the replica's only once the
    snapshot is loaded: after a transfer lost before that, the replica offers again
    the history its dataset still belongs to (here its own, as a master turned
    replica does), not the master's, whose data it never got."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with _start(kind) as r:
            rr = redis.Redis(port=r.port)
            rr.replicaof("127.0.0.1", listener.getsockname()[1])
            own = _repl(rr)["master_replid"]
            first, second = _fake_master_psyncs(listener, 2)
            rr.replicaof("no", "one")
            rr.close()
    assert first == [own.encode(), b"1"]
    assert second == first
