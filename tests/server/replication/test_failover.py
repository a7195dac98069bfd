"""FAILOVER: a master hands over to one of its replicas without losing a write. Each
scenario runs on redis-server and on rill and must give the same replies, roles, sync
counts and data."""

from __future__ import annotations

import os
import signal
import socket
from contextlib import contextmanager

import pytest
import redis

from tests.server.replication.test_replica import _dataset
from tests.support import start_redis, start_rill, wait_until

KINDS = ["redis", "rill"]


def _start(kind: str, *args: str):
    start = start_redis if kind == "redis" else start_rill
    return start("--repl-diskless-sync-delay", "0", *args)


def _state(r: redis.Redis) -> str:
    return r.info("replication")["master_failover_state"]


def _caught_up(m: redis.Redis, r: redis.Redis) -> bool:
    info = r.info("replication")
    return (info.get("master_link_status") == "up"
            and info["master_repl_offset"] == m.info("replication")["master_repl_offset"])


def _online(m: redis.Redis, n: int = 1) -> bool:
    """The master counts ``n`` replicas online (a diskless sync's replica is, on its first ACK)."""
    info = m.info("replication")
    return sum(1 for i in range(n) if info.get(f"slave{i}", {}).get("state") == "online") == n


def _error(r: redis.Redis, *args) -> str:
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


@pytest.mark.parametrize("kind", KINDS)
def test_failover_arguments_and_states_refused(oracle_server, kind):
    with _start(kind) as m, _start(kind) as a:
        rm, ra = redis.Redis(port=m.port), redis.Redis(port=a.port)
        errors = [
            _error(rm, "FAILOVER"),
            _error(rm, "FAILOVER", "ABORT"),
            _error(rm, "FAILOVER", "TIMEOUT", "0"),
            _error(rm, "FAILOVER", "TIMEOUT", "x"),
            _error(rm, "FAILOVER", "TO", "127.0.0.1"),
            _error(rm, "FAILOVER", "FORCE", "FORCE"),
            _error(rm, "FAILOVER", "TO", "127.0.0.1", "notaport"),
        ]
        ra.replicaof("127.0.0.1", m.port)
        wait_until(lambda: _caught_up(rm, ra) and _online(rm))
        errors += [
            _error(rm, "FAILOVER", "FORCE", "TIMEOUT", "100"),
            _error(rm, "FAILOVER", "TO", "127.0.0.1", str(a.port), "FORCE"),
            _error(rm, "FAILOVER", "TO", "127.0.0.1", str(a.port + 1)),
            _error(ra, "FAILOVER"),
            _error(ra, "PSYNC", "0" * 40, "1", "FAILOVER"),
        ]
        assert errors == [
            "FAILOVER requires connected replicas.",
            "No failover in progress.",
            "FAILOVER timeout must be greater than 0",
            "value is not an integer or out of range",
            "syntax error",
            "syntax error",
            "value is not an integer or out of range",
            "FAILOVER with force option requires both a timeout and target HOST and IP.",
            "FAILOVER with force option requires both a timeout and target HOST and IP.",
            "FAILOVER target HOST and PORT is not a replica.",
            "FAILOVER is not valid when server is a replica.",
            "PSYNC FAILOVER replid must match my replid.",
        ]
        assert _state(rm) == "no-failover"
        for r in (rm, ra):
            r.close()


@pytest.mark.parametrize("kind", KINDS)
def test_failover_to_a_replica_swaps_roles_with_partial_resyncs(oracle_server, kind):
    """The master pauses writes, waits for the target to acknowledge everything, then
    follows it; the target promotes itself on the PSYNC FAILOVER and the old master
    continues with it. A write sent during the switch waits, then meets a replica."""
    with _start(kind) as m, _start(kind) as a, _start(kind) as b:
        rm, ra, rb = (redis.Redis(port=s.port) for s in (m, a, b))
        for r in (ra, rb):
            r.replicaof("127.0.0.1", m.port)
        for i in range(50):
            rm.set(f"k{i}", i)
        for r in (ra, rb):
            wait_until(lambda r=r: _caught_up(rm, r))
        wait_until(lambda: _online(rm, 2))
        before = ra.info("stats")["sync_partial_ok"]
        assert rm.execute_command("FAILOVER", "TO", "127.0.0.1", str(a.port)) == b"OK"
        wait_until(lambda: _state(rm) == "no-failover" and rm.info("replication")["role"] == "slave")
        rb.replicaof("127.0.0.1", a.port)
        for r in (rm, rb):
            wait_until(lambda r=r: _caught_up(ra, r))
        assert ra.info("replication")["role"] == "master"
        assert ra.info("stats")["sync_partial_ok"] - before == 2
        assert ra.info("stats")["sync_full"] == 0
        ra.set("after", "1")
        for r in (rm, rb):
            wait_until(lambda r=r: _caught_up(ra, r))
        assert _dataset(m.port) == _dataset(a.port) == _dataset(b.port)
        with pytest.raises(redis.ReadOnlyError):
            rm.set("x", "1")
        for r in (rm, ra, rb):
            r.close()


@contextmanager
def _stopped_replica(kind: str):
    """A master and its one replica, online, then stopped (SIGSTOP) so that it never
    acknowledges what comes next. On the way out the replica runs again (SIGCONT) and
    must catch up with the master it still follows, with the same data."""
    with _start(kind) as m, _start(kind) as a:
        rm, ra = redis.Redis(port=m.port), redis.Redis(port=a.port)
        ra.replicaof("127.0.0.1", m.port)
        wait_until(lambda: _caught_up(rm, ra) and _online(rm))
        os.kill(a.proc.pid, signal.SIGSTOP)
        try:
            yield m, a, rm
        finally:
            os.kill(a.proc.pid, signal.SIGCONT)
        wait_until(lambda: _caught_up(rm, ra))
        assert rm.info("replication")["role"] == "master"
        assert ra.info("stats")["sync_full"] == 0
        assert _dataset(m.port) == _dataset(a.port)
        rm.close()
        ra.close()


@pytest.mark.parametrize("kind", KINDS)
def test_failover_pauses_writes_until_abort(oracle_server, kind):
    """While the target cannot catch up (stopped), writes wait and reads go on; ABORT
    resumes the writes on the master it still is, and nothing resyncs."""
    with _stopped_replica(kind) as (m, a, rm):
        rm.set("case", "1")  # a delta the stopped replica never acknowledges
        assert rm.execute_command("FAILOVER", "TO", "127.0.0.1", str(a.port), "TIMEOUT", "60000") == b"OK"
        assert _state(rm) == "waiting-for-sync"
        assert rm.get("case") == b"1"
        assert _error(rm, "FAILOVER") == "FAILOVER already in progress."
        assert _error(rm, "REPLICAOF", "NO", "ONE") == "REPLICAOF not allowed while failing over."
        writer = socket.create_connection(("127.0.0.1", m.port))
        writer.sendall(b"*3\r\n$3\r\nSET\r\n$4\r\nheld\r\n$1\r\n1\r\n")
        writer.settimeout(0.3)
        with pytest.raises(TimeoutError):
            writer.recv(100)  # paused, not refused
        # CLIENT UNPAUSE ends CLIENT PAUSE's pause only: the failover's holds.
        assert rm.execute_command("CLIENT", "PAUSE", "100000", "WRITE") == b"OK"
        assert rm.execute_command("CLIENT", "UNPAUSE") == b"OK"
        with pytest.raises(TimeoutError):
            writer.recv(100)
        assert rm.get("held") is None
        assert rm.execute_command("FAILOVER", "ABORT") == b"OK"
        assert _state(rm) == "no-failover"
        writer.settimeout(10)
        assert writer.recv(100) == b"+OK\r\n"
        writer.close()
        assert rm.get("held") == b"1"


@pytest.mark.parametrize("kind", KINDS)
def test_failover_timeout_without_force_aborts(oracle_server, kind):
    with _stopped_replica(kind) as (m, a, rm):
        rm.set("case", "1")
        assert rm.execute_command("FAILOVER", "TO", "127.0.0.1", str(a.port), "TIMEOUT", "300") == b"OK"
        wait_until(lambda: _state(rm) == "no-failover")
        assert rm.info("replication")["role"] == "master"
        rm.set("after", "1")  # writes flow again


@pytest.mark.parametrize("kind", KINDS)
def test_failover_aborts_when_the_target_refuses_psync(oracle_server, kind):
    """A target whose ACL refuses PSYNC: the old master is a master again, under a new
    replication ID, and its replicas continue with it."""
    with _start(kind) as m, _start(kind) as a:
        rm, ra = redis.Redis(port=m.port), redis.Redis(port=a.port)
        ra.replicaof("127.0.0.1", m.port)
        wait_until(lambda: _caught_up(rm, ra) and _online(rm))
        ra.execute_command("ACL", "SETUSER", "default", "-psync")
        before = rm.info("stats")["sync_partial_ok"]
        assert rm.execute_command("FAILOVER", "TO", "127.0.0.1", str(a.port)) == b"OK"
        wait_until(lambda: _state(rm) == "no-failover")
        ra.execute_command("ACL", "SETUSER", "default", "+psync")
        wait_until(lambda: _caught_up(rm, ra))
        assert rm.info("replication")["role"] == "master"
        assert ra.info("replication")["role"] == "slave"
        assert rm.info("stats")["sync_partial_ok"] - before == 1
        assert rm.info("stats")["sync_full"] == 1
        for r in (rm, ra):
            r.close()
