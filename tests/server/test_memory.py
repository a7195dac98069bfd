"""used_memory (server/memory.py) against what CPython really allocates, and the INFO memory
section, MEMORY STATS and MEMORY DOCTOR next to Redis's."""

from __future__ import annotations

import gc
import random
import time
import tracemalloc

import pytest
import rill.server.commands  # noqa: F401  (registers the command families)
from rill.server import memory
from rill.server.memory import SAMPLES, WALK_MAX, memory_of
from rill.server.server import Server

from tests.support import RawClient, encode_command, run_inproc, start_redis, start_rill, wait_until


def _pairs(n: int, fmt: bytes) -> list[bytes]:
    out: list[bytes] = []
    for j in range(n):
        out += [b"%d.5" % j, fmt % j]
    return out


_R = random.Random(7)

# name -> (how many times, the commands of step i): each workload a few MB, of one type
# and one encoding, every value its own object (as values read off a socket are).
WORKLOADS = {
    "string-int": (30000, lambda i: [[b"SET", b"k%d" % i, b"%d" % (i * 7919)]]),
    "string-embstr": (30000, lambda i: [[b"SET", b"k%d" % i, b"%020d" % i]]),
    "string-raw": (1000, lambda i: [[b"SET", b"k%d" % i, b"%05000d" % i]]),
    "string-ttl": (30000, lambda i: [[b"SET", b"k%d" % i, b"%020d" % i, b"EX", b"1000"]]),
    "list-listpack": (3000, lambda i: [[b"RPUSH", b"l%d" % i] + [b"e%d-%d" % (i, j) for j in range(10)]]),
    "list-quicklist": (10, lambda i: [[b"RPUSH", b"l%d" % i] + [b"element-%d-%d" % (i, j) for j in range(5000)]]),
    "hash-listpack": (3000, lambda i: [[b"HSET", b"h%d" % i]
                                       + [x for j in range(10) for x in (b"f%d" % j, b"v%d-%d" % (i, j))]]),
    "hash-hashtable": (10, lambda i: [[b"HSET", b"h%d" % i]
                                      + [x for j in range(2000) for x in (b"field-%d" % j, b"value-%d" % j)]]),
    "set-intset": (3000, lambda i: [[b"SADD", b"s%d" % i] + [b"%d" % (i * 1000 + j) for j in range(10)]]),
    "set-hashtable": (10, lambda i: [[b"SADD", b"s%d" % i] + [b"member-%d-%d" % (i, j) for j in range(5000)]]),
    "zset-listpack": (3000, lambda i: [[b"ZADD", b"z%d" % i] + _pairs(10, b"m%d")]),
    "zset-skiplist": (10, lambda i: [[b"ZADD", b"z%d" % i]
                                     + [x for j in range(3000) for x in (b"%r" % _R.random(), b"member-%d" % j)]]),
    "stream": (1, lambda i: [[b"XADD", b"x%d" % (j % 2), b"*", b"f", b"value-%d" % j, b"g", b"w"]
                             for j in range(30000)]),
    "stream-groups": (1, lambda i: [[b"XADD", b"x", b"*", b"f", b"value-%d" % j] for j in range(20000)]
                      + [[b"XGROUP", b"CREATE", b"x", b"g", b"0"],
                         [b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"10000", b"STREAMS", b"x", b">"]]),
}


def _figure_now(server: Server) -> int:
    """The figure with every database re-sampled (the cron would within a period)."""
    fig = memory_of(server)
    for sample in fig.samples:
        sample.at = 0.0
    fig.refresh()
    return fig.dataset() + sum(fig.db_overhead(db) for db in server.keyspace.dbs)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_the_figure_is_within_15_percent_of_what_tracemalloc_counts(name):
    times, step = WORKLOADS[name]
    server = Server()
    client = server.new_client()
    gc.collect()
    before = _figure_now(server)
    tracemalloc.start()
    try:
        start = tracemalloc.take_snapshot()
        for i in range(times):
            for argv in step(i):
                server.execute(client, argv)
            client.out.clear()
        gc.collect()
        end = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    true = sum(stat.size_diff for stat in end.compare_to(start, "filename"))
    figure = _figure_now(server) - before
    assert 0.85 <= figure / true <= 1.15, (name, figure, true)


def test_the_figure_falls_when_keys_go():
    server = Server()
    c = server.new_client()
    fig = memory_of(server)
    empty = fig.used()
    for i in range(5000):
        run_inproc(server, c, "SET", f"key:{i}", "v" * 100)
    full = fig.used()
    assert full - empty > 5000 * 100
    for i in range(2500):
        run_inproc(server, c, "DEL", f"key:{i}")
    half = fig.used()
    # the dict's table stays as large (as a Redis dict does until it resizes)
    assert full - half == pytest.approx(2500 * (full - empty) / 5000, rel=0.3)
    run_inproc(server, c, "FLUSHALL")
    fig.refresh()
    assert fig.used() - empty < 64 * 1024


def test_a_write_costs_the_figure_nothing_and_a_read_of_it_little():
    """No write path keeps a counter: the figure reads key counts, so it moves at once."""
    server = Server()
    c = server.new_client()
    fig = memory_of(server)
    run_inproc(server, c, "SET", "a", "x" * 50)
    fig.refresh()
    one = fig.used()
    run_inproc(server, c, "SET", "b", "y" * 50)
    assert fig.used() > one  # before any refresh


class _NoWalk(dict):
    """A keyspace dict that fails any walk over its keys."""

    def __iter__(self):
        raise AssertionError("the keyspace was walked")


def test_the_cron_walks_no_dict_while_a_fork_child_shares_the_pages():
    """A walk to a random offset takes a reference to every key it passes, so while a
    child shares the parent's pages it copies them: the full sync of a replica stalled
    every client for the copy. The cron keeps the means it has until the child is gone."""
    server = Server()
    c = server.new_client()
    fig = memory_of(server)
    for i in range(1000):
        run_inproc(server, c, "SET", f"key:{i}", "v" * 100)
    db = server.keyspace.dbs[0]
    sample = fig.samples[0]
    sample.at = 0.0
    fig.refresh()
    taken, mean = len(sample.sizes), fig.per_key[0]
    assert taken and mean
    db.data = _NoWalk(db.data)
    server.persistence.child_pid = 1 << 22  # a child runs (no process: the cron here reaps nothing)
    try:
        sample.at = 0.0
        fig.refresh()
        assert len(sample.sizes) == taken and fig.per_key[0] == mean
    finally:
        server.persistence.child_pid = None
    db.data = dict(db.data)
    sample.at = 0.0
    fig.refresh()
    assert len(sample.sizes) > taken  # sampled again once the child is gone


def test_a_refresh_walks_a_bounded_part_of_a_big_dict():
    """Sampling walked from the start of the keys to a random place, half the keyspace on
    average, inside one cron turn; now each walk passes under 2 * WALK_MAX keys and goes on
    where the last one stopped, so the whole of a dict is still sampled."""
    server = Server()
    fig = memory_of(server)
    counted: list[bytes] = []

    class Counting(dict):
        def __iter__(self):
            for k in dict.__iter__(self):
                counted.append(k)
                yield k

    n = 4 * WALK_MAX
    server.keyspace.dbs[0].data = Counting((b"key:%d" % i, b"v" * 10) for i in range(n))
    reached = 0
    for _ in range(40):
        before = len(counted)
        fig.samples[0].at = 0.0
        fig.refresh()
        # At most: the rest of a round the walk ran out in (fewer than its skip + SAMPLES
        # keys), then the same skip + SAMPLES into a new round; the skip is under WALK_MAX.
        assert 0 < len(counted) - before < 2 * (WALK_MAX + SAMPLES)
        reached = max(reached, int(counted[-1][4:]))
    assert reached > 2 * WALK_MAX  # later walks went on where earlier ones stopped
    assert fig.per_key[0] > 0


def _info(raw: bytes) -> dict[str, str]:
    text = raw.split(b"\r\n", 1)[1].decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def test_info_memory_has_redis_fields_and_real_values(oracle_server):
    ours = start_rill()
    try:
        c = RawClient(ours.port)
        r = RawClient(oracle_server.port)
        mine, theirs = _info(c.call("INFO", "memory")), _info(r.call("INFO", "memory"))
        assert set(theirs) - set(mine) == set()
        assert int(mine["used_memory_rss"]) != int(mine["used_memory"])
        assert int(mine["used_memory_startup"]) <= int(mine["used_memory"])
        c.send_raw(b"".join(encode_command(["SET", f"k{i}", "v" * 1000]) for i in range(2000)))
        for _ in range(2000):
            assert c.read_reply() == b"+OK\r\n"
        full = _info(c.call("INFO", "memory"))
        assert int(full["used_memory_dataset"]) > 2000 * 1000
        assert float(full["mem_fragmentation_ratio"]) == pytest.approx(
            int(full["used_memory_rss"]) / int(full["used_memory"]), abs=0.02)
        stats = c.call("MEMORY", "STATS")
        their_stats = r.call("MEMORY", "STATS")
        for field in (b"peak.allocated", b"startup.allocated", b"replication.backlog", b"overhead.total",
                      b"keys.bytes-per-key", b"dataset.percentage", b"fragmentation.bytes"):
            assert field in stats and field in their_stats
        assert b"$4\r\ndb.0\r\n" in stats
        c.close()
        r.close()
    finally:
        ours.stop()


def test_memory_doctor_on_an_empty_server_says_what_redis_says(oracle_server):
    ours = start_rill()
    try:
        c = RawClient(ours.port)
        r = RawClient(oracle_server.port)
        r.call("FLUSHALL")
        assert c.call("MEMORY", "DOCTOR") == r.call("MEMORY", "DOCTOR")
        c.close()
        r.close()
    finally:
        ours.stop()


def test_memory_doctor_reports_a_peak():
    server = Server()
    c = server.new_client()
    fig = memory_of(server)
    for i in range(40000):
        run_inproc(server, c, "SET", f"key:{i}", "v" * 500)
    assert b"Peak memory" not in run_inproc(server, c, "MEMORY", "DOCTOR")
    for i in range(28000):
        run_inproc(server, c, "DEL", f"key:{i}")
    fig.refresh()
    report = run_inproc(server, c, "MEMORY", "DOCTOR")
    assert b" * Peak memory: In the past this instance used more than 150%" in report
    assert report.endswith(b"I'm here to keep you safe, Sam. I want to help you.\n\r\n")


def test_mem_replication_backlog_counts_the_backlog():
    from rill.server.disk import persistence_of

    server = Server()
    c = server.new_client()
    assert _info(run_inproc(server, c, "INFO", "memory"))["mem_replication_backlog"] == "0"
    persistence_of(server).master.backlog = bytearray(b"x" * 100_000)  # as PSYNC makes it
    memory_of(server).refresh()
    info = _info(run_inproc(server, c, "INFO", "memory"))
    assert info["mem_replication_backlog"] == "100000"


def test_mem_replication_backlog_once_a_replica_syncs():
    # No diskless delay on the master: the full sync starts at once, not 5 s later.
    master, replica = start_rill("--repl-diskless-sync-delay", "0"), start_rill()
    try:
        m, r = RawClient(master.port), RawClient(replica.port)
        assert _info(m.call("INFO", "memory"))["mem_replication_backlog"] == "0"
        r.call("REPLICAOF", "127.0.0.1", str(master.port))
        wait_until(lambda: b"master_link_status:up" in r.call("INFO", "replication"))
        m.call("SET", "k", "v" * 1000)
        wait_until(lambda: int(_info(m.call("INFO", "memory"))["mem_replication_backlog"]) >= 1000)
        m.close()
        r.close()
    finally:
        replica.stop()
        master.stop()


# -- client eviction (maxmemory-clients) ------------------------------------------------------

def _stats(c: RawClient) -> dict[str, str]:
    return _info(c.call("INFO", "stats"))


def _names(c: RawClient) -> set[str]:
    reply = c.call("CLIENT", "LIST").decode()
    return {f.split("=", 1)[1] for line in reply.splitlines() for f in line.split(" ") if f.startswith("name=")}


def _named(port: int, name: str) -> RawClient:
    c = RawClient(port)
    assert c.call("CLIENT", "SETNAME", name) == b"+OK\r\n"
    return c


def _partial(c: RawClient, size: int) -> None:
    """An ECHO whose argument is ``size`` bytes, all sent but its last byte: it stays
    in the server's query buffer. A client the server evicts may be closed while it is
    still sending: that ends the send (the caller checks it is gone)."""
    try:
        c.send_raw(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % size + b"v" * (size - 1))
    except (ConnectionResetError, BrokenPipeError):
        pass


def _gone(c: RawClient) -> bool:
    try:
        c.sock.settimeout(5)
        return c.sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _start(which: str, *args: str):
    return start_rill(*args) if which == "rill" else start_redis(*args)


@pytest.mark.parametrize("which", ["rill", "redis"])
def test_a_client_past_maxmemory_clients_is_evicted_unless_no_evict(which):
    with _start(which, "--maxmemory-clients", "1mb") as server:
        admin = _named(server.port, "admin")
        assert admin.call("CLIENT", "NO-EVICT", "on") == b"+OK\r\n"
        big = _named(server.port, "big")
        _partial(big, 2_000_000)
        assert _gone(big)
        stats = _stats(admin)
        assert (stats["evicted_clients"], stats["evicted_keys"]) == ("1", "0")
        assert _names(admin) == {"admin"}
        # exempt: it stays, weighing more than the limit
        kept = _named(server.port, "kept")
        assert kept.call("CLIENT", "NO-EVICT", "on") == b"+OK\r\n"
        _partial(kept, 2_000_000)
        wait_until(lambda: "kept" in _names(admin) and b" flags=e " in admin.call("CLIENT", "LIST")
                   and _tot_mem(admin, "kept") > 2_000_000)
        assert _stats(admin)["evicted_clients"] == "1"
        # and evicted once it is no longer exempt
        kept.send_raw(b"v\r\n*3\r\n$6\r\nCLIENT\r\n$8\r\nNO-EVICT\r\n$3\r\noff\r\n")
        wait_until(lambda: "kept" not in _names(admin))
        assert _stats(admin)["evicted_clients"] == "2"
        assert admin.call("CONFIG", "RESETSTAT") == b"+OK\r\n"
        assert _stats(admin)["evicted_clients"] == "0"


def _tot_mem(admin: RawClient, name: str) -> int:
    for line in admin.call("CLIENT", "LIST").decode().splitlines():
        if f" name={name} " in line:
            return int(line.split(" tot-mem=")[1].split(" ")[0])
    return -1


@pytest.mark.parametrize("which", ["rill", "redis"])
def test_a_client_that_does_not_read_its_replies_is_evicted(which):
    with _start(which, "--maxmemory-clients", "2mb") as server:
        admin = _named(server.port, "admin")
        admin.call("CLIENT", "NO-EVICT", "on")
        admin.call("SETRANGE", "k", 200_000, "v")
        reader = _named(server.port, "reader")
        for _ in range(200):  # 40 MB of replies it never reads
            try:
                reader.send_raw(encode_command(["GET", "k"]))
            except OSError:
                break
            if "reader" not in _names(admin):
                break
        wait_until(lambda: "reader" not in _names(admin))
        assert _stats(admin)["evicted_clients"] == "1"
        assert admin.call("DBSIZE") == b":1\r\n"


@pytest.mark.parametrize("which", ["rill", "redis"])
def test_lowering_maxmemory_clients_evicts_the_biggest_first(which):
    with _start(which) as server:
        admin = _named(server.port, "admin")
        admin.call("CLIENT", "NO-EVICT", "on")
        sizes = {"small": 150_000, "medium": 600_000, "large": 2_400_000}
        clients = []
        for name, size in sizes.items():
            c = _named(server.port, name)
            _partial(c, size)
            clients.append(c)
            wait_until(lambda name=name, size=size: _tot_mem(admin, name) >= size - 1)
        # room for all but the largest
        assert admin.call("CONFIG", "SET", "maxmemory-clients", "1500000") == b"+OK\r\n"
        wait_until(lambda: "large" not in _names(admin))
        assert _names(admin) == {"admin", "small", "medium"}
        # a percentage is of maxmemory: 10% of 4 MB leaves room for the small one only
        assert admin.call("CONFIG", "SET", "maxmemory", "4mb") == b"+OK\r\n"
        assert admin.call("CONFIG", "SET", "maxmemory-clients", "10%") == b"+OK\r\n"
        wait_until(lambda: "medium" not in _names(admin))
        assert _names(admin) == {"admin", "small"}
        assert _stats(admin)["evicted_clients"] == "2"
        assert admin.call("CONFIG", "GET", "maxmemory-clients") == b"*2\r\n$17\r\nmaxmemory-clients\r\n$3\r\n10%\r\n"


@pytest.mark.parametrize("which", ["rill", "redis"])
@pytest.mark.parametrize("client_eviction", [False, True])
def test_dead_clients_query_buffers_evict_keys_or_clients(which, client_eviction):
    """Redis's maxmemory unit: 30 clients each leave a 250-argument command one argument
    short (250 KB each). They count in used_memory at once: keys are evicted to make
    room, or, under maxmemory-clients, the clients themselves and no key."""
    with _start(which, "--maxmemory", "11mb", "--maxmemory-policy", "allkeys-lru") as server:
        admin = RawClient(server.port)
        if client_eviction:
            admin.call("CONFIG", "SET", "maxmemory-clients", "3mb")
            admin.call("CLIENT", "NO-EVICT", "on")
        for j in range(50):
            admin.call("SETRANGE", j, 100_000, "x")
        dead = []
        for _ in range(30):
            c = RawClient(server.port)
            dead.append(c)
            try:
                c.send_raw(b"*250\r\n" + (b"$1000\r\n" + b"x" * 1000 + b"\r\n") * 249)
            except OSError:
                pass  # evicted while sending

        def evicted() -> tuple:
            stats = _stats(admin)
            return int(stats["evicted_clients"]), int(stats["evicted_keys"]), int(admin.call("DBSIZE")[1:-2])

        if client_eviction:
            wait_until(lambda: evicted()[0] > 0)
            assert evicted()[1:] == (0, 50)
        else:
            wait_until(lambda: evicted()[1] > 0)
            clients, _, dbsize = evicted()
            assert (clients, dbsize < 50) == (0, True)


@pytest.mark.parametrize("which", ["rill", "redis"])
def test_a_reply_past_the_output_limit_closes_its_client_rather_than_evicting_another(which):
    """Redis's client-eviction unit: the output buffer limit is enforced first, so a
    4 MB reply under a 3 MB limit closes its own client, and a client holding 6 MB of
    query buffer is not evicted to make room for it."""
    with _start(which, "--maxmemory-clients", "10mb", "--client-output-buffer-limit", "normal 3mb 0 0") as server:
        admin = _named(server.port, "admin")
        admin.call("CLIENT", "NO-EVICT", "on")
        admin.call("SETRANGE", "k", 4 << 20, "v")
        holder = _named(server.port, "holder")
        _partial(holder, 6 << 20)
        wait_until(lambda: _tot_mem(admin, "holder") >= 6 << 20)
        getter = _named(server.port, "getter")
        getter.send_raw(encode_command(["GET", "k"]))
        assert _gone(getter)
        assert _names(admin) == {"admin", "holder"}
        assert _stats(admin)["evicted_clients"] == "0"


@pytest.mark.parametrize("which", ["rill", "redis"])
def test_a_big_argument_under_way_weighs_its_whole_length(which):
    """Redis sizes the query buffer for a big argument (32 KB or more) as soon as its
    length is read, so a client whose 300 KB argument has only begun to arrive already
    weighs 300 KB (CLIENT LIST tot-mem, qbuf-free): the race of Redis's client-eviction
    'percentage of maxmemory' test, whose CLIENT LIST may run before the rest is read."""
    with _start(which) as server:
        admin = _named(server.port, "admin")
        big = _named(server.port, "big")
        big.send_raw(b"*2\r\n$4\r\nECHO\r\n$300000\r\n" + b"v" * 40_000)
        wait_until(lambda: _tot_mem(admin, "big") >= 300_000)
        line = next(ln for ln in admin.call("CLIENT", "LIST").decode().splitlines() if " name=big " in ln)
        assert int(line.split(" qbuf-free=")[1].split(" ")[0]) > 200_000
        big.send_raw(b"v" * 260_000 + b"\r\n")
        assert big.read_reply().startswith(b"$300000\r\n")
        wait_until(lambda: _tot_mem(admin, "big") < 100_000)


def _client_field(admin: RawClient, name: str, field: str) -> int:
    for line in admin.call("CLIENT", "LIST").decode().splitlines():
        if f" name={name} " in line:
            return int(line.split(f" {field}=")[1].split(" ")[0])
    return -1


@pytest.mark.parametrize("which", ["rill", "redis"])
def test_reply_buffers_resize_as_debug_replybuffer_says(which):
    """Redis's unit/replybufsize: an idle client's reply buffer shrinks to 1-2 KB once
    its peak restarts (DEBUG REPLYBUFFER PEAK-RESET-TIME 100), grows to 16 KB while it
    reads 32 KB replies (with the peak never restarting), and stays put while DEBUG
    REPLYBUFFER RESIZING is 0."""
    with _start(which, "--enable-debug-command", "yes") as server:
        admin = _named(server.port, "admin")
        tc = _named(server.port, "tc")
        assert admin.call("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100") == b"+OK\r\n"
        wait_until(lambda: 1024 <= _client_field(admin, "tc", "rbs") < 2046, timeout=5)
        assert admin.call("SET", "bigval", "x" * 32768) == b"+OK\r\n"
        assert admin.call("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "never") == b"+OK\r\n"

        def grown() -> bool:
            assert tc.call("GET", "bigval").startswith(b"$32768\r\n")
            return 16384 <= _client_field(admin, "tc", "rbs") < 32768

        wait_until(grown, timeout=5)
        assert admin.call("DEBUG", "REPLYBUFFER", "RESIZING", "0") == b"+OK\r\n"
        assert admin.call("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "reset") == b"+OK\r\n"
        fresh = _named(server.port, "fresh")
        time.sleep(0.5)
        assert _client_field(admin, "fresh", "rbs") == 16384  # a new client's, not resized
        assert admin.call("DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "x") == \
            b"-ERR value is not an integer or out of range\r\n"
        fresh.close()
        tc.close()


def test_output_that_fits_the_reply_buffer_weighs_the_buffer():
    """As in Redis, where a reply that fits a client's static buffer (rbs) adds nothing
    to tot-mem: a client's own CLIENT LIST reply must not get another client evicted
    (Redis's client-eviction 'evict clients only until below limit')."""
    server = Server()
    c = server.new_client()
    idle = c.memory_usage()
    c.out.append(b"x" * 3000)
    assert c.memory_usage() == idle
    c.out.append(b"x" * 20000)
    assert c.memory_usage() == idle - c.rbs + 23000


def _heap_rss_kb() -> int:
    """Resident KB of this process's glibc heap mapping ([heap] in smaps)."""
    kb, in_heap = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and not parts[0].endswith(":"):
                in_heap = parts[-1] == "[heap]"
            elif in_heap and parts[0] == "Rss:":
                kb += int(parts[1])
    return kb


@pytest.mark.skipif(memory._MALLOC_TRIM is None, reason="the C library has no malloc_trim (not glibc)")
def test_memory_purge_gives_the_heaps_free_pages_back():
    # 64 KB blocks come from the heap (below glibc's mmap threshold); keeping every tenth
    # one leaves free chunks in the middle of the heap, which only a trim hands back.
    blocks = [bytearray(64 * 1024) for _ in range(400)]
    for i in range(len(blocks)):
        if i % 10:
            blocks[i] = None  # type: ignore[call-overload]
    before = _heap_rss_kb()
    server = Server()
    assert run_inproc(server, server.new_client(), "MEMORY", "PURGE") == b"+OK\r\n"
    assert before - _heap_rss_kb() >= 20 * 1024  # most of the 22 MB freed: its pages are gone
    del blocks
