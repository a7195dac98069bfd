"""rill as a replica (REPLICAOF): following a redis-server master and a rill master,
side by side with a redis-server replica of the same master where replies can differ."""

from __future__ import annotations

import time

import pytest
import redis

from tests.support import RawClient, free_port, start_redis, start_rill, wait_until


def _linked(r: redis.Redis) -> bool:
    return r.info("replication").get("master_link_status") == "up"


def _caught_up(master: redis.Redis, replica: redis.Redis) -> bool:
    return replica.info("replication")["slave_repl_offset"] >= master.info("replication")["master_repl_offset"]


@pytest.fixture
def redis_master(oracle_server):
    # No diskless delay: the full sync starts at once.
    m = start_redis("--repl-diskless-sync-delay", "0")
    yield m
    m.stop()


def _dataset(port: int) -> dict:
    """Every key of every database, read back by type (TTLs as present or not)."""
    out = {}
    for db in range(16):
        r = redis.Redis(port=port, db=db)
        for key in sorted(r.keys("*")):
            kind = r.type(key)
            if kind == b"string":
                value = r.get(key)
            elif kind == b"list":
                value = r.lrange(key, 0, -1)
            elif kind == b"hash":
                value = sorted(r.hgetall(key).items())
            elif kind == b"set":
                value = sorted(r.smembers(key))
            elif kind == b"zset":
                value = r.zrange(key, 0, -1, withscores=True)
            else:
                full = r.execute_command("XINFO", "STREAM", key, "FULL")
                for group in full[b"groups"]:
                    for consumer in group[b"consumers"]:
                        del consumer[b"seen-time"]  # when the replica ran the master's XCLAIM
                value = (r.xrange(key), full)
            out[(db, key)] = (kind, value, r.ttl(key) > 0)
        r.close()
    return out


def _fill(m: redis.Redis) -> None:
    m.set("s", "v")
    m.rpush("l", *"abc")
    m.hset("h", mapping={"f1": "1", "f2": "2"})
    m.sadd("set", 1, 2, 3)
    m.zadd("z", {"a": 1, "b": 2})
    m.xadd("st", {"f": "v"}, id="1-1")
    m.xadd("st", {"f": "w"}, id="2-1")
    m.xgroup_create("st", "g", id="0")
    m.xreadgroup("g", "alice", {"st": ">"}, count=1)
    m.set("ttl", "v", ex=1000)
    redis.Redis(port=m.connection_pool.connection_kwargs["port"], db=5).set("in5", "y")


def test_follows_a_redis_server_master(redis_master):
    """The dataset after the full sync and after a stream of writes is what a
    redis-server replica of the same master holds (a replica's consumer groups lag
    their master's entries-read counter, as Redis 7.0 propagates reads as XCLAIMs)."""
    m = redis.Redis(port=redis_master.port)
    _fill(m)
    with start_rill() as rill, start_redis("--replicaof", "127.0.0.1", str(redis_master.port)) as twin:
        r = redis.Redis(port=rill.port)
        r.set("gone", "soon")  # a full sync replaces the dataset
        assert r.execute_command("REPLICAOF", "127.0.0.1", redis_master.port) == b"OK"
        wait_until(lambda: _linked(r) and _linked(redis.Redis(port=twin.port)))
        assert r.get("gone") is None
        assert _dataset(rill.port) == _dataset(twin.port) == _dataset(redis_master.port)
        # The stream of writes: transactions, other databases, consumer groups, expiry.
        with m.pipeline(transaction=True) as p:
            p.incr("counter")
            p.lpush("l", "z")
            p.execute()
        m3 = redis.Redis(port=redis_master.port, db=3)
        m3.set("in3", "x")
        m.xreadgroup("g", "bob", {"st": ">"})
        m.xack("st", "g", "1-1")
        m.pexpire("s", 100_000)
        m.delete("h")
        assert m.execute_command("WAIT", 2, 5000) == 2  # both replicas acknowledge
        # (WAIT covers this client's writes; m3's came later, so both replicas are
        # also waited for up to the master's offset)
        wait_until(lambda: _caught_up(m, r) and _caught_up(m, redis.Redis(port=twin.port)))
        assert _dataset(rill.port) == _dataset(twin.port)
        assert redis.Redis(port=rill.port, db=3).get("in3") == b"x"
        assert r.xpending("st", "g")["pending"] == m.xpending("st", "g")["pending"] == 1
        assert r.execute_command("ROLE") == [b"slave", b"127.0.0.1", redis_master.port, b"connected",
                                             r.info("replication")["slave_repl_offset"]]
        assert r.info("replication")["slave_repl_offset"] == m.info("replication")["master_repl_offset"]
        r.close()
    m.close()


def test_read_only_and_errors_match_a_redis_replica(redis_master):
    m = redis.Redis(port=redis_master.port)
    m.set("k", "v")
    with start_rill() as rill, start_redis("--replicaof", "127.0.0.1", str(redis_master.port)) as twin:
        RawClient(rill.port).call("REPLICAOF", "127.0.0.1", str(redis_master.port))
        mine, theirs = RawClient(rill.port), RawClient(twin.port)
        wait_until(lambda: _linked(redis.Redis(port=rill.port)) and _linked(redis.Redis(port=twin.port)))
        for args in [
            ("GET", "k"),
            ("SET", "k", "x"),
            ("DEL", "k"),
            ("EVAL", "return redis.call('set', 'k', 'y')", "0"),
            ("EVAL", "return redis.call('get', 'k')", "0"),
            ("EVAL", "#!lua\nreturn 1", "0"),
            ("MULTI",), ("SET", "k", "x"), ("GET", "k"), ("EXEC",),
            ("REPLICAOF", "127.0.0.1", str(redis_master.port)),
            ("REPLICAOF", "127.0.0.1", "x"),
            ("REPLICAOF", "127.0.0.1", "70000"),
            ("REPLICAOF", "127.0.0.1"),
            ("SLAVEOF", "127.0.0.1", "-1"),
            ("WAIT", "0", "0"),
        ]:
            a, b = mine.call(*args), theirs.call(*args)
            assert a == b, f"{args}: rill {a!r} != redis {b!r}"
        fields = set(redis.Redis(port=twin.port).info("replication"))
        assert set(redis.Redis(port=rill.port).info("replication")) == fields
        role_mine = redis.Redis(port=rill.port).execute_command("ROLE")
        role_theirs = redis.Redis(port=twin.port).execute_command("ROLE")
        assert role_mine[:4] == role_theirs[:4]
        mine.close()
        theirs.close()
    m.close()


def test_expired_keys_stay_until_the_master_deletes_them(redis_master):
    m = redis.Redis(port=redis_master.port)
    m.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    with start_rill() as rill:
        r = redis.Redis(port=rill.port)
        r.execute_command("REPLICAOF", "127.0.0.1", redis_master.port)
        wait_until(lambda: _linked(r))
        m.set("e", "v", px=200)
        m.set("other", "x")
        wait_until(lambda: r.get("other") == b"x")
        time.sleep(0.3)
        assert r.get("e") is None  # past its time: reads as missing on the replica...
        assert r.dbsize() == 2  # ...but is not deleted there
        assert m.get("e") is None  # the master expires it and sends DEL
        wait_until(lambda: r.dbsize() == 1)
        r.close()
    m.close()


def test_follows_a_rill_master_then_becomes_a_master_again():
    with start_rill("--repl-diskless-sync-delay", "0") as master, start_rill() as rill:
        m = redis.Redis(port=master.port)
        r = redis.Redis(port=rill.port)
        _fill(m)
        r.execute_command("REPLICAOF", "127.0.0.1", master.port)
        wait_until(lambda: _linked(r))
        m.incr("counter")
        assert m.execute_command("WAIT", 1, 5000) == 1
        assert r.execute_command("DEBUG", "DIGEST") == m.execute_command("DEBUG", "DIGEST")
        info = m.info("replication")
        assert info["connected_slaves"] == 1 and info["slave0"]["port"] == rill.port
        with pytest.raises(redis.ReadOnlyError):
            r.set("x", 1)
        assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        assert r.set("x", 1) and r.get("counter") == b"1"
        assert r.execute_command("ROLE")[0] == b"master"
        assert r.info("replication")["role"] == "master"
        m.incr("counter")  # no longer followed
        time.sleep(0.2)
        assert r.get("counter") == b"1"
        r.close()
        m.close()


def test_a_lost_master_is_reconnected_and_resynced(tmp_path):
    master = start_rill("--repl-diskless-sync-delay", "0", workdir=str(tmp_path))
    port = master.port
    with start_rill() as rill:
        r = redis.Redis(port=rill.port)
        redis.Redis(port=port).set("before", 1)
        r.execute_command("REPLICAOF", "127.0.0.1", port)
        wait_until(lambda: _linked(r))
        master.stop()
        wait_until(lambda: r.info("replication")["master_link_status"] == "down")
        assert r.execute_command("ROLE")[3] in (b"connect", b"connecting")
        assert r.get("before") == b"1"  # the data stays while the link is down
        master = start_rill("--repl-diskless-sync-delay", "0", workdir=str(tmp_path), port=port)
        redis.Redis(port=port).set("after", 2)
        wait_until(lambda: _linked(r) and r.get("after") == b"2")
        r.close()
    master.stop()


def test_replicaof_in_the_config_file_and_command_line(redis_master):
    redis.Redis(port=redis_master.port).set("k", "v")
    with start_rill("--replicaof", "127.0.0.1", str(redis_master.port)) as rill:
        r = redis.Redis(port=rill.port)
        wait_until(lambda: _linked(r) and r.get("k") == b"v")
        assert r.config_get("replicaof") == {"replicaof": f"127.0.0.1 {redis_master.port}"}
        r.close()


def test_a_dropped_link_continues_with_a_partial_resync(redis_master):
    """After the link drops (killed from either side) the replica asks to continue at
    its offset, and a master with the backlog resumes its stream (+CONTINUE)."""
    m = redis.Redis(port=redis_master.port)
    m.set("k", "0")
    with start_rill() as rill:
        r = redis.Redis(port=rill.port)
        r.execute_command("REPLICAOF", "127.0.0.1", redis_master.port)
        wait_until(lambda: _linked(r))
        full = m.info("stats")["sync_full"]
        for kill in (lambda: m.client_kill_filter(_type="replica"),
                     lambda: r.client_kill_filter(_type="master")):
            m.incr("k")
            wait_until(lambda: _caught_up(m, r))
            assert kill() == 1
            m.incr("k")  # while the link may be down: the backlog keeps it
            wait_until(lambda: _linked(r) and _caught_up(m, r))
        stats = m.info("stats")
        assert stats["sync_full"] == full and stats["sync_partial_ok"] == 2
        assert r.get("k") == b"4"
        assert m.execute_command("WAIT", 1, 5000) == 1
        r.close()
    m.close()


def _random_writes(rng, n: int) -> list[tuple]:
    """A mixed write workload over a few keys of every type, in two databases."""
    keys = [f"k{i}" for i in range(8)]
    out: list[tuple] = []
    for _ in range(n):
        k = rng.choice(keys)
        roll = rng.randrange(16)
        if roll == 0:
            out.append(("SELECT", rng.choice(["0", "1"])))
        elif roll == 1:
            # (long enough not to expire while the datasets are read and compared)
            out.append(("SET", k, str(rng.randrange(100)), "PX", str(rng.randrange(60_000, 120_000))))
        elif roll == 2:
            out.append(("APPEND", k + ":s", "x"))
        elif roll == 3:
            out.append(("RPUSH", k + ":l", *[str(rng.randrange(9)) for _ in range(rng.randrange(1, 4))]))
        elif roll == 4:
            out.append(("LPOP", k + ":l"))
        elif roll == 5:
            out.append(("HSET", k + ":h", f"f{rng.randrange(5)}", str(rng.randrange(9))))
        elif roll == 6:
            out.append(("HINCRBYFLOAT", k + ":h", "n", "1.5"))
        elif roll == 7:
            out.append(("SADD", k + ":set", str(rng.randrange(20))))
        elif roll == 8:
            out.append(("SPOP", k + ":set"))
        elif roll == 9:
            out.append(("ZINCRBY", k + ":z", str(rng.randrange(1, 5)), f"m{rng.randrange(6)}"))
        elif roll == 10:
            out.append(("XADD", "st", "MAXLEN", "~", "50", "*", "f", str(rng.randrange(9))))
        elif roll == 11:
            out.append(("XREADGROUP", "GROUP", "g", f"c{rng.randrange(3)}", "COUNT", "2", "STREAMS", "st", ">"))
        elif roll == 12:
            out.append(("XAUTOCLAIM", "st", "g", "c0", "0", "0-0", "COUNT", "2"))
        elif roll == 13:
            out.append(("DEL", rng.choice(keys) + rng.choice([":s", ":l", ":h", ":set", ":z"])))
        elif roll == 14:
            out.append(("EXPIRE", k + ":h", str(rng.randrange(10, 1000))))
        else:
            out.append(("INCRBY", k + ":n", str(rng.randrange(-5, 6))))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_random_write_workload_leaves_rill_as_a_redis_replica(redis_master, seed):
    """The same random writes on a redis-server master: rill's dataset ends equal to a
    redis-server replica's (consumer groups, expiry marks and all)."""
    import random

    m = redis.Redis(port=redis_master.port)
    m.xadd("st", {"f": "0"})
    m.xgroup_create("st", "g", id="0")
    with start_rill() as rill, start_redis("--replicaof", "127.0.0.1", str(redis_master.port)) as twin:
        r = redis.Redis(port=rill.port)
        r.execute_command("REPLICAOF", "127.0.0.1", redis_master.port)
        wait_until(lambda: _linked(r) and _linked(redis.Redis(port=twin.port)))
        c = RawClient(redis_master.port)
        for args in _random_writes(random.Random(seed), 400):
            c.call(*args)
        c.close()
        # WAIT would only cover m's own writes: wait for both replicas' offsets instead.
        wait_until(lambda: _caught_up(m, r) and _caught_up(m, redis.Redis(port=twin.port)))
        mine = _dataset(rill.port)
        assert len(mine) > 20 and mine == _dataset(twin.port)
        r.close()
    m.close()


def test_stale_data_refused_while_the_link_is_down_side_by_side():
    """replica-serve-stale-data no: while the master cannot be reached, only commands
    flagged stale run; the others get MASTERDOWN."""
    from tests.support import stale_replicas

    with stale_replicas("k", "v") as (mine, theirs):
        assert mine.call("GET", "k").startswith(b"-MASTERDOWN Link with MASTER is down")
        for args in [("GET", "k"), ("PING",), ("ECHO", "x"), ("CONFIG", "GET", "maxmemory"), ("DBSIZE",),
                     ("MULTI",), ("INFO", "nosuchsection"), ("EXEC",),
                     ("MULTI",), ("GET", "k"), ("EXEC",),
                     ("CONFIG", "SET", "replica-serve-stale-data", "yes"), ("GET", "k")]:
            a, b = mine.call(*args), theirs.call(*args)
            assert a == b, f"{args}: rill {a!r} != redis {b!r}"
            if args == ("GET", "k"):
                refused = a.startswith(b"-MASTERDOWN")
        assert not refused  # the last GET, with stale data served again
        assert mine.call("DBSIZE") == b":1\r\n"


def test_a_chained_replica_resyncs_when_its_master_resyncs():
    """rill A <- rill B <- rill C: when B does a full sync from a new master, C is
    disconnected and comes back for a full resync instead of continuing from B's
    backlog with data B no longer has."""
    with start_rill("--repl-diskless-sync-delay", "0") as a, start_rill("--repl-diskless-sync-delay", "0") as a2, start_rill("--repl-diskless-sync-delay", "0") as b, start_rill() as c:
        ra, ra2 = redis.Redis(port=a.port), redis.Redis(port=a2.port)
        rb, rc = redis.Redis(port=b.port), redis.Redis(port=c.port)
        ra.set("from-a", 1)
        ra2.set("from-a2", 2)
        rb.execute_command("REPLICAOF", "127.0.0.1", a.port)
        wait_until(lambda: _linked(rb))
        rc.execute_command("REPLICAOF", "127.0.0.1", b.port)
        wait_until(lambda: _linked(rc) and rc.get("from-a") == b"1")
        rb.execute_command("REPLICAOF", "127.0.0.1", a2.port)
        wait_until(lambda: _linked(rb) and rb.get("from-a2") == b"2")
        wait_until(lambda: _linked(rc) and rc.get("from-a2") == b"2")
        assert rc.get("from-a") is None
        assert rb.info("stats")["sync_full"] == 2
        for r in (ra, ra2, rb, rc):
            r.close()


def test_a_silent_master_is_given_up_after_repl_timeout():
    """A master that accepts the connection and then says nothing: after repl-timeout
    the link is dropped and dialled again, rather than waited on for ever."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []

    def accept() -> None:
        listener.settimeout(10)
        try:
            while len(accepted) < 2:
                conn, _ = listener.accept()
                accepted.append(conn)  # never answers PING
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        with start_rill() as rill:
            r = redis.Redis(port=rill.port)
            r.config_set("repl-timeout", 1)
            r.execute_command("REPLICAOF", "127.0.0.1", listener.getsockname()[1])
            wait_until(lambda: len(accepted) >= 2, timeout=10)
            assert r.execute_command("ROLE")[3] in (b"connect", b"connecting", b"handshake")  # never connected
            assert r.info("replication")["master_link_status"] == "down"
            r.close()
    finally:
        listener.close()
        for conn in accepted:
            conn.close()


def test_a_large_value_in_the_stream_arrives_whole(redis_master):
    """A value of several megabytes comes in many reads; the replica applies it once."""
    m = redis.Redis(port=redis_master.port)
    with start_rill() as rill:
        r = redis.Redis(port=rill.port)
        r.execute_command("REPLICAOF", "127.0.0.1", redis_master.port)
        wait_until(lambda: _linked(r))
        big = bytes(range(256)) * 40_000  # 10 MB
        m.set("big", big)
        m.set("after", "1")
        wait_until(lambda: _caught_up(m, r))
        assert r.get("big") == big and r.get("after") == b"1"
        r.close()
    m.close()


@pytest.mark.parametrize("kind", ["rill", "redis"])
def test_client_pause_write_holds_the_masters_stream_read_but_unapplied(redis_master, kind):
    # Redis pauses the master client too: what it sends meanwhile is read
    # (slave_read_repl_offset) but not applied (slave_repl_offset) until CLIENT UNPAUSE.
    m = redis.Redis(port=redis_master.port)
    m.config_set("repl-ping-replica-period", 3600)  # no PING moves the offsets meanwhile
    with (start_redis() if kind == "redis" else start_rill()) as replica:
        r = redis.Redis(port=replica.port)
        r.replicaof("127.0.0.1", redis_master.port)
        wait_until(lambda: _linked(r))
        m.set("foo", "bar")
        wait_until(lambda: _caught_up(m, r))
        applied = r.info("replication")["slave_repl_offset"]
        assert r.execute_command("CLIENT", "PAUSE", 100000, "WRITE")
        m.set("foo2", "bar2")
        sent = m.info("replication")["master_repl_offset"]
        wait_until(lambda: r.info("replication")["slave_read_repl_offset"] == sent)
        assert r.info("replication")["slave_repl_offset"] == applied
        assert r.get("foo2") is None
        assert r.execute_command("CLIENT", "UNPAUSE")
        wait_until(lambda: r.info("replication")["slave_repl_offset"] == sent)
        assert r.get("foo2") == b"bar2"
        r.close()
    m.close()


@pytest.mark.parametrize("kind", ["rill", "redis"])
def test_a_writable_replica_expires_the_keys_its_own_clients_gave_a_ttl(redis_master, kind):
    # No master will ever DEL them, so the replica's cron deletes them itself
    # (counted in expired_keys); the master's own volatile keys still wait for its DEL.
    m = redis.Redis(port=redis_master.port)
    m.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    with (start_redis() if kind == "redis" else start_rill()) as replica:
        r = redis.Redis(port=replica.port)
        r.replicaof("127.0.0.1", redis_master.port)
        wait_until(lambda: _linked(r))
        m.set("from-master", "v", px=1)
        m.set("marker", "x")
        wait_until(lambda: r.get("marker") == b"x")
        assert r.config_set("replica-read-only", "no")
        before = r.info("stats")["expired_keys"]
        assert r.set("foo", "bar", px=1)
        wait_until(lambda: r.info("stats")["expired_keys"] == before + 1)
        assert r.get("foo") is None
        assert r.dbsize() == 2  # from-master (past its time) and marker remain
        r.close()
    m.close()


def test_errors_from_the_master_stream_are_logged_and_counted_side_by_side():
    """An error the replica answers its master with (nobody reads it) is logged as
    Redis's "== CRITICAL ==" warning naming the command, and counted in INFO's
    unexpected_error_replies: a command only the replica got (DEBUG REPLICATE), and
    an INCRBY that fails on a writable replica's diverged value (integration/
    replication-4's data-divergence tests)."""
    import re

    seen = []
    for start in (start_rill, start_redis):
        with start() as master, start() as replica:
            m, r = RawClient(master.port), RawClient(replica.port)
            assert r.call("REPLICAOF", "127.0.0.1", str(master.port)) == b"+OK\r\n"
            wait_until(lambda r=r: b"master_link_status:up" in r.call("INFO", "replication"))
            assert m.call("DEBUG", "REPLICATE", "fake-command-1") == b"+OK\r\n"
            m.call("SET", "foo", "bar2")
            assert m.call("WAIT", "1", "0") == b":1\r\n"
            assert r.call("GET", "foo") == b"$4\r\nbar2\r\n"
            r.call("CONFIG", "SET", "replica-read-only", "no")
            r.call("SET", "number2", "foo")
            m.call("INCRBY", "number2", "1")
            assert m.call("WAIT", "1", "0") == b":1\r\n"
            got = [m.call("GET", "number2"), r.call("GET", "number2"),
                   re.search(rb"unexpected_error_replies:\d+", r.call("INFO", "stats")).group()]
            critical = [ln for ln in replica.log().splitlines() if "== CRITICAL ==" in ln]
            got.append([re.sub(r".*(This replica is sending an error to its master).*'(\S+)'$", r"\1 \2", ln)
                        for ln in critical])
            got.append(sum("fake-command-1" in ln for ln in critical))
            seen.append(got)
            m.close()
            r.close()
    assert seen[0] == seen[1]
    assert seen[0][2] == b"unexpected_error_replies:2" and seen[0][4] == 1


@pytest.mark.parametrize("kind", ["redis", "rill"])
def test_a_master_that_refuses_is_dialled_once_a_second(kind):
    """A replica whose master is down retries from its replication cron, once a
    second, as Redis does: not on every server cron tick (hz), which would fill the
    log with ten failures a second."""
    start = start_redis if kind == "redis" else start_rill
    closed = free_port()
    with start("--replicaof", "127.0.0.1", str(closed)) as srv:
        wait_until(lambda: "Error condition on socket for SYNC" in srv.log())
        time.sleep(2.5)
        # The first dial, then at most one a second (fewer under load, never more).
        assert srv.log().count("Error condition on socket for SYNC") <= 4


@pytest.mark.parametrize("kind", ["rill", "redis"])
def test_what_a_replica_reads_from_its_master_counts_as_replication_input(redis_master, kind):
    """A replica's INFO stats counts what it reads from its master (the snapshot and the
    stream) in total_net_repl_input_bytes, and in total_net_input_bytes with its clients'
    requests; its acknowledgements count as output, as any client's replies do."""
    replica = start_rill() if kind == "rill" else start_redis()
    m = redis.Redis(port=redis_master.port)
    r = redis.Redis(port=replica.port)
    try:
        m.set("before", "y" * 50_000)
        r.execute_command("REPLICAOF", "127.0.0.1", redis_master.port)
        wait_until(lambda: _linked(r))
        m.set("big", "x" * 200_000)
        wait_until(lambda: r.strlen("big") == 200_000)
        stats = r.info("stats")
        repl = stats["total_net_repl_input_bytes"]
        assert repl >= 200_000  # the snapshot (its 50 KB of "y" compress to little) and the SET
        assert 0 < stats["total_net_input_bytes"] - repl < 20_000  # this client's requests
        assert stats["total_net_output_bytes"] > 0
    finally:
        m.close()
        r.close()
        replica.stop()
