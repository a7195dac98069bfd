"""maxmemory and its policies (server/evict.py): what each policy evicts, the OOM refusal,
the evicted event, its propagation, and a write flood against a real rill-server."""

from __future__ import annotations

import gc

import pytest
import redis
import rill.server.commands  # noqa: F401  (registers the command families)
from rill.server import evict
from rill.server.evict import EVICT_OK, evictor_of
from rill.server.memory import memory_of
from rill.server.server import Server

from tests.support import (
    RawClient,
    encode_command,
    inproc_keyevents,
    run_inproc,
    start_rill,
    wait_until,
)

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
POLICIES = ["noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random",
            "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"]


def _server(policy: str) -> tuple[Server, object]:
    server = Server()
    client = server.new_client()
    run_inproc(server, client, "CONFIG", "SET", "maxmemory-policy", policy)
    return server, client


def _limit_here(server: Server, client, room: int) -> None:
    """maxmemory at the current figure plus ``room`` bytes."""
    fig = memory_of(server)
    fig.refresh()
    run_inproc(server, client, "CONFIG", "SET", "maxmemory", str(fig.for_eviction() + room))


def _fill(server: Server, client, n: int, prefix: str = "k", ttl: int | None = None, size: int = 200) -> None:
    for i in range(n):
        args = ["SET", f"{prefix}{i}", f"{i:0{size}d}"]
        if ttl is not None:
            args += ["EX", str(ttl + i)]
        run_inproc(server, client, *args)


def test_noeviction_refuses_denyoom_commands_and_evicts_nothing():
    server, c = _server("noeviction")
    _fill(server, c, 1000)
    _limit_here(server, c, 0)
    _fill(server, c, 50, prefix="more")
    assert run_inproc(server, c, "SET", "x", "y") == OOM
    assert run_inproc(server, c, "GET", "k1") == b"$200\r\n" + b"%0200d" % 1 + b"\r\n"
    assert run_inproc(server, c, "MULTI") == b"+OK\r\n"
    assert run_inproc(server, c, "GET", "k2") == OOM  # nothing is queued while over
    assert run_inproc(server, c, "EXEC") == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
    assert run_inproc(server, c, "DEL", "k1") == b":1\r\n"  # not deny-oom
    assert server.evictor.evicted_keys == 0
    assert len(server.keyspace.dbs[0]) >= 1000


@pytest.mark.parametrize("policy", [p for p in POLICIES if p != "noeviction"])
def test_every_policy_keeps_the_figure_under_maxmemory(policy):
    server, c = _server(policy)
    _fill(server, c, 500, ttl=1000)
    _limit_here(server, c, 100_000)
    _fill(server, c, 3000, prefix="new", ttl=2000)
    fig = memory_of(server)
    # eviction runs before a command, so the last write may leave the figure a key over
    # (and the key's sampled size is an estimate): Redis's own suite allows 4 KB
    assert fig.for_eviction() <= server.maxmemory + 4096
    assert server.evictor.evicted_keys > 2000
    info = run_inproc(server, c, "INFO", "stats")
    assert b"evicted_keys:%d\r\n" % server.evictor.evicted_keys in info


@pytest.mark.parametrize("policy", ["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"])
def test_volatile_policies_evict_only_keys_with_a_ttl(policy):
    server, c = _server(policy)
    _fill(server, c, 300, prefix="keep")
    _fill(server, c, 300, prefix="ttl", ttl=1000)
    _limit_here(server, c, 0)
    _fill(server, c, 200, prefix="keep-more")
    db = server.keyspace.dbs[0]
    assert all(f"keep{i}".encode() in db.data for i in range(300))
    assert sum(f"ttl{i}".encode() in db.data for i in range(300)) < 300
    # with no volatile key left, writes are refused
    for key in list(db.expires):
        db.persist(key)
    _fill(server, c, 100, prefix="last")  # the TTLs' room first, then refusals
    assert run_inproc(server, c, "SET", "one-more", "x" * 100) == OOM


def test_volatile_ttl_evicts_the_shortest_ttls_first():
    server, c = _server("volatile-ttl")
    run_inproc(server, c, "CONFIG", "SET", "maxmemory-samples", "10")
    _fill(server, c, 1000, prefix="ttl", ttl=1000)  # ttl{i} lives 1000 + i seconds
    _limit_here(server, c, 0)
    _fill(server, c, 300, prefix="plain")
    db = server.keyspace.dbs[0]
    gone = [i for i in range(1000) if f"ttl{i}".encode() not in db.data]
    assert len(gone) >= 200  # a key with a TTL frees its expiry time too: fewer than 300
    # sampling is approximate: the evicted ones are mostly the shorter-lived half
    assert sum(i < 500 for i in gone) / len(gone) > 0.8


def test_allkeys_lru_evicts_idle_keys_first():
    server, c = _server("allkeys-lru")
    run_inproc(server, c, "CONFIG", "SET", "maxmemory-samples", "10")
    _fill(server, c, 1000)
    db = server.keyspace.dbs[0]
    for i in range(500):
        db.set_idle(f"k{i}".encode(), 1000)  # the first half idle for a while
    _limit_here(server, c, 0)
    _fill(server, c, 300, prefix="new")
    gone = [i for i in range(1000) if f"k{i}".encode() not in db.data]
    assert len(gone) >= 250
    assert sum(i < 500 for i in gone) / len(gone) > 0.9


def test_allkeys_lfu_evicts_rarely_used_keys_first():
    server, c = _server("allkeys-lfu")
    run_inproc(server, c, "CONFIG", "SET", "maxmemory-samples", "10")
    _fill(server, c, 1000)
    db = server.keyspace.dbs[0]
    for i in range(500, 1000):
        db.set_frequency(f"k{i}".encode(), 100)  # the second half often used
    for i in range(500):
        db.set_frequency(f"k{i}".encode(), 1)
    _limit_here(server, c, 0)
    _fill(server, c, 300, prefix="new")
    gone = [i for i in range(1000) if f"k{i}".encode() not in db.data]
    assert len(gone) >= 250
    assert sum(i < 500 for i in gone) / len(gone) > 0.9
    assert run_inproc(server, c, "OBJECT", "FREQ", "k900") == b":100\r\n"


def test_an_eviction_raises_evicted_and_propagates_a_del(monkeypatch):
    server, c = _server("allkeys-random")
    fed: list = []
    server.propagation.attach("observer", fed.append)
    _fill(server, c, 200)
    _limit_here(server, c, 0)
    events = inproc_keyevents(server, c, [("SET", "trigger", "x" * 200), ("SET", "again", "x" * 200)],
                              monkeypatch)
    evicted = [key for event, key in events if event == b"evicted"]
    assert evicted
    dels = [argv[1] for ops in fed for _, argv in ops if argv[0] == b"DEL"]
    assert dels == evicted
    assert all(key not in server.keyspace.dbs[0].data for key in evicted)
    # each DEL travels on its own, ahead of the write that made room
    first = next(i for i, ops in enumerate(fed) if ops[0][1][0] == b"SET")
    assert all(len(ops) == 1 for ops in fed[:first])


def test_lazyfree_lazy_eviction_propagates_unlink():
    server, c = _server("allkeys-random")
    run_inproc(server, c, "CONFIG", "SET", "lazyfree-lazy-eviction", "yes")
    fed: list = []
    server.propagation.attach("observer", fed.append)
    _fill(server, c, 200)
    _limit_here(server, c, 0)
    _fill(server, c, 20, prefix="new")
    assert {argv[0] for ops in fed for _, argv in ops} == {b"UNLINK", b"SET"}


def test_a_watched_key_that_is_evicted_fails_exec():
    server, c = _server("allkeys-lru")
    other = server.new_client()
    run_inproc(server, c, "CONFIG", "SET", "maxmemory-samples", "20")
    _fill(server, c, 10)
    db = server.keyspace.dbs[0]
    for i in range(10):
        db.set_idle(f"k{i}".encode(), 10)
    run_inproc(server, c, "WATCH", "k5")
    db.set_idle(b"k5", 10_000)
    _limit_here(server, c, 0)
    _fill(server, other, 2, prefix="new")
    assert b"k5" not in db.data
    run_inproc(server, c, "MULTI")
    run_inproc(server, c, "SET", "k5", "x")
    assert run_inproc(server, c, "EXEC") == b"*-1\r\n"


def test_small_integers_are_not_shared_under_lru_or_lfu():
    server, c = _server("noeviction")
    run_inproc(server, c, "SET", "n", "100")
    assert run_inproc(server, c, "OBJECT", "REFCOUNT", "n") == b":2147483647\r\n"
    run_inproc(server, c, "CONFIG", "SET", "maxmemory", "1gb")
    assert run_inproc(server, c, "OBJECT", "REFCOUNT", "n") == b":2147483647\r\n"
    for policy in ("allkeys-lru", "volatile-lfu"):
        run_inproc(server, c, "CONFIG", "SET", "maxmemory-policy", policy)
        run_inproc(server, c, "SET", "n", "100")
        assert run_inproc(server, c, "OBJECT", "REFCOUNT", "n") == b":1\r\n"
        assert run_inproc(server, c, "OBJECT", "ENCODING", "n") == b"$3\r\nint\r\n"


def test_tenacity_bounds_one_call_and_the_rest_continues_later():
    server, c = _server("allkeys-random")
    run_inproc(server, c, "CONFIG", "SET", "maxmemory-eviction-tenacity", "0")
    _fill(server, c, 3000)
    fig = memory_of(server)
    fig.refresh()
    run_inproc(server, c, "CONFIG", "SET", "maxmemory", str(fig.for_eviction() // 2 + fig.startup // 2))
    # a time limit of 0: 16 keys a call, and the command still runs
    assert run_inproc(server, c, "SET", "x", "y") == b"+OK\r\n"
    assert server.evictor.evicted_keys == 16


def test_replicas_ignore_maxmemory_unless_told_not_to():
    server, c = _server("allkeys-random")
    _fill(server, c, 300)
    _limit_here(server, c, 0)
    db = server.keyspace.dbs[0]
    for i in range(10):  # over the limit, as a master's writes would take it
        db.set(b"more%d" % i, b"%0200d" % i)
    evictor = evictor_of(server)
    server.replica_of = ("127.0.0.1", 1)  # following a master (no link needed here)
    try:
        assert evictor.perform() == EVICT_OK
        assert evictor.evicted_keys == 0
        run_inproc(server, c, "CONFIG", "SET", "replica-ignore-maxmemory", "no")
        assert evictor.perform() == EVICT_OK
        assert evictor.evicted_keys > 0
    finally:
        server.replica_of = None


# -- side by side with redis-server ------------------------------------------------------
def test_oom_error_and_object_freq_as_redis(oracle_server):
    ours = start_rill()
    try:
        for port in (ours.port, oracle_server.port):
            cl = RawClient(port)
            cl.call("FLUSHALL")
            cl.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
            cl.call("SET", "k", "v")
            assert cl.call("OBJECT", "FREQ", "k").startswith(
                b"-ERR An LFU maxmemory policy is not selected, access frequency not tracked.")
            cl.call("CONFIG", "SET", "maxmemory", "1")
            assert cl.call("SET", "x", "y") == OOM
            assert cl.call("GET", "k") == b"$1\r\nv\r\n"
            cl.call("CONFIG", "SET", "maxmemory", "0")
            cl.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
            cl.call("SET", "f", "v")
            assert cl.call("OBJECT", "FREQ", "f") == b":5\r\n"  # LFU_INIT_VAL for a new key
            for _ in range(100):
                cl.call("GET", "f")
            assert int(cl.call("OBJECT", "FREQ", "f")[1:]) > 5
            assert cl.call("OBJECT", "IDLETIME", "f").startswith(b"-ERR An LFU maxmemory policy is selected")
            cl.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
            cl.close()
    finally:
        ours.stop()


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


# The flood: 64 MB of maxmemory, writes of 1 KB values well past it. used_memory counts
# the data, not the interpreter (about 35 MB resident before any data, which Redis does
# not have), so RSS sits above maxmemory by that much plus what pymalloc and the dict
# tables keep. Measured on this machine class: RSS ends 45 MB above maxmemory under
# noeviction and 55-58 MB above under the evicting policies; the margin allows 80 MB.
FLOOD_MARGIN = 80 << 20


@pytest.mark.parametrize("policy", POLICIES)
def test_a_write_flood_stays_within_maxmemory(policy):
    srv = start_rill("--maxmemory", "64mb", "--maxmemory-policy", policy)
    try:
        c = RawClient(srv.port, timeout=60)
        value = "v" * 1000
        oom = 0
        for batch in range(100):  # 100 x 1000 x ~1.1 KB: well past 64 MB
            c.send_raw(b"".join(encode_command(["SET", f"key:{batch}:{i}", value, "EX", "100000"])
                                for i in range(1000)))
            for _ in range(1000):
                if c.read_reply() == OOM:
                    oom += 1
        info = c.call("INFO", "stats").decode()
        evicted = int(info.split("evicted_keys:")[1].split("\r\n")[0])
        rss = _rss_kb(srv.proc.pid) * 1024
        assert rss <= (64 << 20) + FLOOD_MARGIN, rss
        if policy == "noeviction":
            assert evicted == 0 and oom > 0
        else:
            assert evicted > 0 and oom == 0
        c.close()
    finally:
        srv.stop()


def test_used_memory_settles_under_maxmemory():
    """Eviction runs before each command, so after a flood the figure is at the limit."""
    srv = start_rill("--maxmemory", "12mb", "--maxmemory-policy", "allkeys-lru")
    try:
        c = RawClient(srv.port, timeout=60)
        for batch in range(20):
            c.send_raw(b"".join(encode_command(["SET", f"k{batch}:{i}", "x" * 2000]) for i in range(500)))
            for _ in range(500):
                assert c.read_reply() == b"+OK\r\n"
        used = int(c.call("INFO", "memory").split(b"used_memory:")[1].split(b"\r\n")[0])
        assert used <= (12 << 20) * 1.02
        assert int(c.call("DBSIZE")[1:]) < 6_000
        c.close()
    finally:
        srv.stop()


def test_the_pool_orders_ties_as_redis_does():
    """evictionPoolPopulate: a full pool skips a sample no better than its worst; a
    sample goes ahead of the entries scoring the same; the worst goes when one enters."""
    from rill.server.evict import POOL_SIZE, _pool_insert

    pool: list = []
    for i in range(POOL_SIZE):
        _pool_insert(pool, i // 2, 0, b"k%d" % i)
    assert [e[0] for e in pool] == sorted(e[0] for e in pool) and len(pool) == POOL_SIZE
    assert [e[2] for e in pool[:2]] == [b"k1", b"k0"]  # the later one ahead of its equal
    before = list(pool)
    _pool_insert(pool, 0, 0, b"tie")  # no better than the worst: skipped
    assert pool == before
    _pool_insert(pool, 7, 0, b"best")  # ties the best two: goes ahead of them, k1 drops
    assert len(pool) == POOL_SIZE and pool[0][2] == b"k0"
    assert [e[2] for e in pool[-3:]] == [b"best", b"k15", b"k14"]


def _over_the_limit_by_new_keys(server: Server, c, n: int, prefix: str) -> None:
    """SETs of new keys through execute_all (a connection's path) while at the limit,
    then a PING: eviction runs before each command, so after it the figure is under."""
    for i in range(n):
        c.out.clear()
        server.execute_all(c, [[b"SET", f"{prefix}{i}".encode(), b"%0200d" % i]])
        assert b"".join(c.out) == b"+OK\r\n"
    server.execute_all(c, [[b"PING"]])


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu"])
def test_the_cache_policies_sample_new_keys_and_survive_a_flush(policy):
    """_evict_pooled samples a snapshot of the keys: keys written since it are sampled
    once it is renewed, and a snapshot of keys all gone (FLUSHALL) is replaced."""
    server, c = _server(policy)
    _fill(server, c, 2000)
    _limit_here(server, c, 0)
    fig = memory_of(server)
    db = server.keyspace.dbs[0]
    _over_the_limit_by_new_keys(server, c, 3000, "a")
    assert server.evictor.evicted_keys >= 2500
    assert fig.for_eviction() <= server.maxmemory
    # most of the first keys went, and keys written during the run went too
    assert sum(f"k{i}".encode() in db.data for i in range(2000)) < 500
    assert sum(f"a{i}".encode() not in db.data for i in range(2000)) > 0
    run_inproc(server, c, "FLUSHALL")
    evicted = server.evictor.evicted_keys
    _over_the_limit_by_new_keys(server, c, 3000, "b")
    assert server.evictor.evicted_keys - evicted >= 500
    assert fig.for_eviction() <= server.maxmemory


def test_allkeys_lru_evicts_keys_without_a_stamp_as_loaded():
    """After a load no key has an access stamp (they count from the base): the pooled
    path scores them rather than taking them for deleted slots."""
    server, c = _server("allkeys-lru")
    _fill(server, c, 2000)
    db = server.keyspace.dbs[0]
    db.access.clear()
    db.access_base = db.clock - 100  # loaded a while ago
    _limit_here(server, c, 0)
    _over_the_limit_by_new_keys(server, c, 500, "new")
    assert server.evictor.evicted_keys >= 400
    # the loaded keys (idle 100 s) went, not the new ones
    assert all(f"new{i}".encode() in db.data for i in range(500))


def test_maxmemory_alone_evicts_on_execute_alls_fast_path():
    """With maxmemory the only special state, a plain client's command is evicted for
    in execute_all itself; a wrong arity is refused first and evicts nothing (Redis
    checks arity before memory), and noeviction's refusal still goes out."""
    server, c = _server("allkeys-lru")
    _fill(server, c, 1000)
    _limit_here(server, c, 0)
    _fill(server, c, 10, prefix="over")  # now over: the next command evicts
    evicted = server.evictor.evicted_keys
    c.out.clear()
    server.execute_all(c, [[b"SET", b"x"]])
    assert b"".join(c.out) == b"-ERR wrong number of arguments for 'set' command\r\n"
    assert server.evictor.evicted_keys == evicted
    assert server._gated and not server._gated_beyond_memory
    _over_the_limit_by_new_keys(server, c, 50, "more")
    assert server.evictor.evicted_keys > evicted
    assert memory_of(server).for_eviction() <= server.maxmemory
    run_inproc(server, c, "CONFIG", "SET", "maxmemory-policy", "noeviction")
    _fill(server, c, 50, prefix="past")
    c.out.clear()
    server.execute_all(c, [[b"SET", b"y", b"z"], [b"GET", b"k999"]])
    assert b"".join(c.out).startswith(OOM + b"$")


@pytest.mark.parametrize("policy", ["volatile-lfu", "volatile-lru"])
def test_volatile_policies_keep_the_limit_while_keys_come_and_go(policy):
    """Redis's unit/maxmemory 'policy volatile-lfu should only remove volatile keys',
    in-process: half the keys volatile up to the limit, then as many volatile keys more.
    Keys coming and going once made CPython rebuild the key dict at twice its table, and
    the figure jumped 37 KB past the limit (dict_table counts tables by key count)."""
    server, c = _server(policy)
    run_inproc(server, c, "SELECT", "9")
    fig = memory_of(server)

    def used() -> int:
        return int(run_inproc(server, c, "INFO", "memory").split(b"used_memory:")[1].split(b"\r\n")[0])

    limit = used() + 100 * 1024
    run_inproc(server, c, "CONFIG", "SET", "maxmemory", str(limit))
    n = 0
    while used() + 4096 <= limit:
        run_inproc(server, c, *(["SETEX", f"key:{n}", "10000", "x"] if n % 2 else ["SET", f"key:{n}", "x"]))
        n += 1
    for j in range(n):
        run_inproc(server, c, "SETEX", f"foo:{j}", "10000", "x")
        assert fig.for_eviction() < limit + 4096
    assert used() < limit + 4096
    db = server.keyspace.dbs[9]
    assert all(f"key:{j}".encode() in db.data for j in range(0, n, 2))


def test_dict_table_follows_the_key_count_within_a_third_of_real_tables():
    """dict_table: the figure's table bytes for n keys, against dicts built by insertion."""
    import sys

    from rill.server.memory import dict_table

    for n in (100, 1000, 5000, 30000, 100000):
        real = sys.getsizeof(dict.fromkeys(range(n)))
        assert 0.66 <= dict_table(n) / real <= 1.5, (n, dict_table(n), real)


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-random"])
def test_evictions_are_latency_events_as_in_redis(oracle_server, policy):
    """With latency-monitor-threshold set, evicting a key whose deletion takes longer (a
    set of 300k members) records eviction-del and eviction-cycle, on both servers; with
    the monitor off, nothing is recorded."""
    ours = start_rill()
    try:
        for port in (ours.port, oracle_server.port):
            r = redis.Redis(port=port)
            r.flushall()
            r.latency_reset()
            r.config_set("maxmemory-policy", policy)
            for threshold in (0, 1):
                r.config_set("latency-monitor-threshold", threshold)
                with r.pipeline(transaction=False) as p:
                    for i in range(300):
                        p.sadd("big", *range(i * 1000, (i + 1) * 1000))
                    p.execute()
                r.config_set("maxmemory", 1)  # every key goes, at once
                wait_until(lambda r=r: r.dbsize() == 0)
                r.config_set("maxmemory", 0)
                events = {e[0] for e in r.execute_command("LATENCY", "LATEST")}
                if threshold:
                    assert {b"eviction-del", b"eviction-cycle"} <= events
                else:
                    assert not events
            r.config_set("maxmemory-policy", "noeviction")
            r.config_set("latency-monitor-threshold", 0)
            r.close()
    finally:
        ours.stop()


class _NoWalk(dict):
    """A keyspace dict that fails any pass over its keys (list(), iteration)."""

    def __iter__(self):
        raise AssertionError("the keyspace was walked")


def test_no_snapshot_of_the_keys_is_taken_while_a_fork_child_shares_the_pages():
    """A new snapshot writes a reference count on every key (and dropping the old one
    another), so while a child shares the parent's pages it copies each page holding
    keys. The one due for renewal is kept until the child is gone, and eviction goes on
    from it; the cron does not drop it either."""
    server, c = _server("allkeys-lru")
    _fill(server, c, 2000)
    _limit_here(server, c, 0)
    db = server.keyspace.dbs[0]
    ev = server.evictor
    _over_the_limit_by_new_keys(server, c, 50, "a")  # evicting: a snapshot is taken
    snap = ev.snaps[0]
    assert snap is not None
    db.data = _NoWalk(db.data)
    server.persistence.child_pid = 1 << 22  # a child runs (no process: nothing reaps it)
    try:
        evicted = ev.evicted_keys
        _over_the_limit_by_new_keys(server, c, 1000, "b")  # past the eighth that renews it
        assert ev.evicted_keys - evicted >= 900
        assert ev.snaps[0] is snap
        assert memory_of(server).for_eviction() <= server.maxmemory
        for hook in server.cron_hooks:
            if hook in (ev._cron, memory_of(server).refresh):
                hook()  # (a refresh may re-size the keys: the figure is judged above)
        assert ev.snaps[0] is snap
    finally:
        server.persistence.child_pid = None
    db.data = dict(db.data)
    _over_the_limit_by_new_keys(server, c, 1100, "c")  # RENEW_RECHECK evictions on
    assert ev.snaps[0] is not snap  # renewed once the child is gone
    assert any(k.startswith(b"b") for k in ev.snaps[0])


def test_the_snapshots_are_out_of_the_cyclic_collectors_sight_when_compiled():
    """Compiled, a snapshot of the keys and its stamps are untracked by the cyclic
    collector, which would otherwise visit every key object in each pass over their
    generation; they hold only bytes and ints, so they can take part in no cycle, and a
    collection leaves them intact. Interpreted there is no way to untrack a list: they
    stay tracked."""
    server, c = _server("allkeys-lru")
    _fill(server, c, 2000)
    _limit_here(server, c, 0)
    ev = server.evictor
    _over_the_limit_by_new_keys(server, c, 50, "a")  # evicting: a snapshot is taken
    snap, stamps = ev.snaps[0], ev.snap_stamps[0]
    assert snap is not None and stamps is not None
    assert len(snap) == len(stamps)
    compiled = type(evict._probe).__name__ != "function"
    assert gc.is_tracked(snap) is not compiled
    assert gc.is_tracked(stamps) is not compiled
    assert all(type(k) is bytes for k in snap) and all(type(t) is int for t in stamps)
    before = list(snap)
    gc.collect()
    assert snap == before
    evicted = ev.evicted_keys
    _over_the_limit_by_new_keys(server, c, 100, "b")  # eviction goes on from it
    assert ev.evicted_keys > evicted


def test_the_evictors_copies_of_the_gating_states_follow_every_change():
    """perform reads its own copies of maxmemory and of the states that suspend eviction
    (loading, a pause, following a master that says to ignore maxmemory); each change
    must reach them, or a CONFIG SET maxmemory or a CLIENT PAUSE would go unseen."""
    server, c = _server("allkeys-lru")
    evictor = evictor_of(server)

    def copies() -> tuple:
        return evictor.suspended, evictor.maxmemory, evictor.tracking

    def fresh() -> tuple:
        evictor.gates_changed()
        return copies()

    for args in (["CONFIG", "SET", "maxmemory", "10mb"], ["CLIENT", "PAUSE", "100000", "ALL"],
                 ["CLIENT", "UNPAUSE"], ["CONFIG", "SET", "maxmemory", "20mb"],
                 ["CLIENT", "TRACKING", "ON"], ["CONFIG", "SET", "maxmemory", "0"]):
        run_inproc(server, c, *args)
        seen = copies()
        assert seen == fresh(), args
    server.loading = True
    seen = copies()
    assert seen == fresh() and seen[0]


def test_the_evictors_copy_of_the_figures_base_follows_every_change():
    """perform starts its figure from the evictor's copy of evict_base + clients_normal
    (MemoryFigure._base_changed keeps it): a client's buffers weighed, a client gone, the
    cron's refresh and the buffers' sum each change one of the two, and the copy must
    follow, or the figure eviction compares with maxmemory would be off."""
    server, c = _server("allkeys-lru")
    run_inproc(server, c, "CONFIG", "SET", "maxmemory", "100mb")
    evictor = evictor_of(server)
    fig = memory_of(server)

    def check(what: str) -> None:
        assert evictor.base_f == float(fig.evict_base + fig.clients_normal), what

    check("made")
    other = server.new_client()
    other.querybuf_len = 50_000  # a big command coming in: weighed at once
    fig.track(other)
    assert fig.clients_normal >= 50_000
    check("track")
    fig.forget(other)
    check("forget")
    _fill(server, c, 100)
    fig.refresh()
    check("refresh")
    other.querybuf_len = 70_000
    fig.buffers()
    check("buffers")
    assert fig.for_eviction() < server.maxmemory
    assert evictor.perform(server.keyspace.dbs[0]) == EVICT_OK


def test_the_dispatchers_copy_of_the_refusal_is_evicts():
    """fastpath takes EVICT_FAIL as a constant of its own (importing evict there would be
    an import cycle: evict.pxd cimports fastpath's ServerCore)."""
    from rill.server import fastpath

    assert fastpath.EVICT_FAIL == evict.EVICT_FAIL
