"""Partial resynchronization keeps master and replica equal: a rill replica whose
link drops continues from the backlog (+CONTINUE) exactly where it stopped, in the
state it stopped in, side by side with a redis-server replica of the same master."""

from __future__ import annotations

import pytest
import redis

from tests.server.replication.test_replica import _dataset
from tests.support import RawClient, encode_command, start_redis, start_rill, wait_until


def _master(kind: str):
    if kind == "redis":
        return start_redis("--repl-diskless-sync-delay", "0")
    return start_rill("--repl-diskless-sync-delay", "0")


def _linked(r: redis.Redis) -> bool:
    return r.info("replication").get("master_link_status") == "up"


def _caught_up(m: redis.Redis, r: redis.Redis) -> bool:
    return _linked(r) and r.info("replication")["slave_repl_offset"] >= m.info("replication")["master_repl_offset"]


@pytest.mark.parametrize("master_kind", ["redis", "rill"])
def test_a_continued_stream_stays_in_the_database_it_selected(oracle_server, master_kind):
    """The master's backlog does not repeat the SELECT it sent before the link dropped:
    the replica must go on in the database its master client had selected (Redis keeps
    the master client cached for that), not in database 0."""
    with _master(master_kind) as master, start_rill() as rill, start_redis() as twin:
        m = redis.Redis(port=master.port, db=9)
        replicas = [redis.Redis(port=s.port) for s in (rill, twin)]
        for r in replicas:
            r.execute_command("REPLICAOF", "127.0.0.1", master.port)
        for r in replicas:
            wait_until(lambda r=r: _caught_up(m, r))
        m.set("before", "1")  # the stream selects db 9
        for r in replicas:
            wait_until(lambda r=r: _caught_up(m, r))
        for r in replicas:
            assert r.client_kill_filter(_type="master") == 1
        m.set("after", "2")  # in db 9, with no new SELECT in the stream
        for r in replicas:
            wait_until(lambda r=r: _caught_up(m, r))
        assert m.info("stats")["sync_partial_ok"] == 2
        assert _dataset(rill.port) == _dataset(twin.port) == _dataset(master.port)
        for r in replicas:
            r.close()
        m.close()


@pytest.mark.parametrize("master_kind", ["redis", "rill"])
def test_a_transaction_cut_by_a_dropped_link_is_run_after_the_resync(oracle_server, master_kind):
    """A MULTI whose EXEC had not run when the link dropped (here CLIENT PAUSE WRITE
    holds the commands after it) is discarded with the link; the replica's offset
    never counted the transaction's start, so the master sends it again whole."""
    with _master(master_kind) as master, start_rill() as rill, start_redis() as twin:
        m = redis.Redis(port=master.port)
        m.set("k", "0")
        replicas = [redis.Redis(port=s.port) for s in (rill, twin)]
        for r in replicas:
            r.execute_command("REPLICAOF", "127.0.0.1", master.port)
        for r in replicas:
            wait_until(lambda r=r: _caught_up(m, r))
            r.execute_command("CLIENT", "PAUSE", 100000, "WRITE")
        with m.pipeline(transaction=True) as p:
            p.incr("k").set("t", "x").execute()
        end = m.info("replication")["master_repl_offset"]
        for r in replicas:
            # the whole transaction has arrived; its EXEC waits for the pause to end
            wait_until(lambda r=r: r.info("replication")["slave_read_repl_offset"] == end)
            assert r.info("replication")["slave_repl_offset"] < end
            assert r.client_kill_filter(_type="master") == 1
            r.execute_command("CLIENT", "UNPAUSE")
        for r in replicas:
            wait_until(lambda r=r: _caught_up(m, r))
        # (Redis does not cache a master client blocked by the pause: its replica comes
        # back with a full resync; rill's, caching it, continues. Both must end equal.)
        assert _dataset(rill.port) == _dataset(twin.port) == _dataset(master.port)
        for r in replicas:
            assert r.get("k") == b"1"
            # the transaction ran whole: no "EXEC without MULTI" from a stream resumed
            # in its middle
            assert r.info("stats")["unexpected_error_replies"] == 0
            r.close()
        m.close()


def _psync(port: int, replid: str, offset: int) -> bytes:
    """The first word of a PSYNC's answer, from a replica that leaves at once."""
    c = RawClient(port)
    c.call("REPLCONF", "listening-port", "1")
    c.send_raw(encode_command(["PSYNC", replid, offset]))
    reply = c.read_reply()
    c.close()
    return reply.split()[0]


@pytest.mark.parametrize("master_kind", ["redis", "rill"])
def test_the_backlog_is_freed_after_repl_backlog_ttl_without_replicas(oracle_server, master_kind):
    """A master without replicas keeps its backlog for repl-backlog-ttl seconds; then
    it frees it under a new replication ID, so a replica coming back with the old one
    gets a full resync rather than a continuation that would skip the writes made
    meanwhile."""
    with _master(master_kind) as master:
        m = redis.Redis(port=master.port)
        assert _psync(master.port, "?", -1) == b"+FULLRESYNC"
        m.set("k", "v")
        wait_until(lambda: m.info("replication")["connected_slaves"] == 0)
        info = m.info("replication")
        replid, offset = info["master_replid"], info["master_repl_offset"]
        assert _psync(master.port, replid, offset + 1) == b"+CONTINUE"
        wait_until(lambda: m.info("replication")["connected_slaves"] == 0)
        assert m.config_set("repl-backlog-ttl", 1)
        wait_until(lambda: m.info("replication")["repl_backlog_active"] == 0)
        assert m.info("replication")["master_replid"] != replid
        assert _psync(master.port, replid, offset + 1) == b"+FULLRESYNC"
        stats = m.info("stats")
        assert (stats["sync_full"], stats["sync_partial_ok"], stats["sync_partial_err"]) == (2, 1, 1)
        assert "Replication backlog freed after 1 seconds without connected replicas." in master.log()
        m.close()


@pytest.mark.parametrize("replica_kind", ["redis", "rill"])
def test_a_master_link_killed_inside_a_transaction_ends_at_once(oracle_server, replica_kind):
    """CLIENT KILL of the master client closes the link when it runs, not when the
    transaction around it ends: the master sees its replica gone while a DEBUG SLEEP
    after the kill still holds the replica (so repl-backlog-ttl counts from then)."""
    start = start_redis if replica_kind == "redis" else start_rill
    with start_rill() as master, start() as replica:
        m = redis.Redis(port=master.port)
        r = redis.Redis(port=replica.port)
        r.execute_command("REPLICAOF", "127.0.0.1", master.port)
        wait_until(lambda: _caught_up(m, r))
        assert m.info("replication")["connected_slaves"] == 1
        c = RawClient(replica.port)
        c.send_raw(b"".join(encode_command(argv) for argv in (
            ["MULTI"], ["CLIENT", "KILL", "TYPE", "master"], ["DEBUG", "SLEEP", 120], ["EXEC"])))
        try:
            wait_until(lambda: m.info("replication")["connected_slaves"] == 0)
        finally:
            replica.kill()  # still asleep
            c.close()
        r.close()
        m.close()
