"""The registry of benchmark workloads: the one place later issues add theirs.

Each entry says what to run and the target its issue sets; bench/harness.py runs it on
redis-server and on rill and prints the ratio. Helpers cover the two common shapes:
``rb_test`` (a named redis-benchmark test, ``-t set``) and ``rb_command`` (a custom
command line for redis-benchmark, e.g. XADD). Anything else is a function taking
(ctx, server) and returning {row label: value}; see the consumer loop below.

Targets (rill / redis-server): the open issue 24 (a typed, compiled hot core) sets them for
the command rows issues 2, 3, 4 and 6 first measured: every unpipelined row >= 1.0x, SET, GET,
INCR, MSET and PING_MBULK with -P 16 >= 0.85x, XADD -P 16 >= 0.75x, the consumer loop >= 0.8x,
LRANGE_100, XRANGE COUNT 100 and ZRANGE 0 99 WITHSCORES >= 1.0x, memory per entry <= 1.0x.
Issue 4's wake p99 <= 10 ms stays; issue 25 (bench/tls.py): GET and XADD over TLS >= 0.7x
unpipelined.
"""

from __future__ import annotations

from collections.abc import Callable

from . import aio
from .harness import (
    AT_LEAST,
    AT_MOST,
    Arg,
    BenchError,
    Ctx,
    Row,
    Server,
    Target,
    Workload,
    redis_benchmark,
)

WORKLOADS: list[Workload] = []

# Request counts for a full run (BENCH_QUICK=1 takes a tenth). Chosen so a full
# `make bench` stays within a few minutes on two cores.
N_UNPIPELINED = 100_000
N_PIPELINED = 500_000
N_HEAVY = 20_000  # replies of 100 elements: LRANGE_100, XRANGE COUNT 100, XREAD COUNT 100
PIPELINE = 16


def register(w: Workload) -> Workload:
    if any(x.name == w.name for x in WORKLOADS):
        raise ValueError(f"duplicate workload {w.name}")
    WORKLOADS.append(w)
    return w


def rb_test(name: str, test: str, *, group: str, issue: int, target: Target | None, pipeline: int = 1,
            requests: int | None = None, probe: list[list[Arg]] | None = None,
            setup: Callable[[Ctx, Server], None] | None = None) -> Workload:
    """A named redis-benchmark test (``-t test``) as one row."""
    n = requests or (N_PIPELINED if pipeline > 1 else N_UNPIPELINED)

    def measure(ctx: Ctx, server: Server) -> dict[str, float]:
        rps = redis_benchmark(server.port, requests=ctx.n(n), clients=ctx.clients, pipeline=pipeline, test=test)
        return {name: rps}

    return register(Workload(name, group, issue, [Row(name, "rps", target)], measure,
                             probe=probe or [], setup=setup))


def rb_command(name: str, command: list[str], *, group: str, issue: int, target: Target | None,
               pipeline: int = 1, requests: int | None = None, probe: list[list[Arg]] | None = None,
               setup: Callable[[Ctx, Server], None] | None = None) -> Workload:
    """A custom command line for redis-benchmark (``redis-benchmark ... XADD s * f v``) as one row."""
    n = requests or (N_PIPELINED if pipeline > 1 else N_UNPIPELINED)

    def measure(ctx: Ctx, server: Server) -> dict[str, float]:
        rps = redis_benchmark(server.port, requests=ctx.n(n), clients=ctx.clients, pipeline=pipeline,
                              command=command)
        return {name: rps}

    return register(Workload(name, group, issue, [Row(name, "rps", target)], measure,
                             probe=probe or [command], setup=setup))


def prefill_stream(key: str, entries: int) -> Callable[[Ctx, Server], None]:
    """Setup: a stream of ``entries`` two-field entries, pipelined."""

    def setup(ctx: Ctx, server: Server) -> None:
        with server.client() as c:
            c.call("DEL", key)
            errors = c.pipeline(["XADD", key, "*", "f1", i % 1000, "f2", i % 100] for i in range(entries))
            if errors:
                raise BenchError(f"prefill of {key}: {errors} error replies")

    return setup


def prefill_list(key: str, items: int) -> Callable[[Ctx, Server], None]:
    """Setup: a list of ``items`` three-byte items (what redis-benchmark pushes)."""

    def setup(ctx: Ctx, server: Server) -> None:
        n = ctx.n(items)
        with server.client() as c:
            c.call("DEL", key)
            errors = c.pipeline(["RPUSH", key, *(["xxx"] * 1000)] for _ in range(0, n, 1000))
            if errors:
                raise BenchError(f"prefill of {key}: {errors} error replies")

    return setup


# -- issue 2: the core server (targets: issue 24) ------------------------------------------

HOT_CORE = 24  # the issue whose targets these command rows are judged against now
UNPIPELINED, PIPELINED, LARGE_REPLY = AT_LEAST(1.0), AT_LEAST(0.85), AT_LEAST(1.0)

for _test, _probe in [("ping_mbulk", ["PING"]), ("set", ["SET", "bench:probe", "x"]),
                      ("get", ["GET", "bench:probe"]), ("incr", ["INCR", "bench:probe:n"]),
                      ("mset", ["MSET", "bench:probe", "x"])]:
    rb_test(_test.upper(), _test, group="core", issue=HOT_CORE, target=UNPIPELINED, probe=[_probe])
    rb_test(f"{_test.upper()} -P{PIPELINE}", _test, group="core", issue=HOT_CORE, target=PIPELINED,
            pipeline=PIPELINE, probe=[_probe])

# -- issue 3: streams (targets: issue 24) -----------------------------------------------------

XADD_CMD = ["XADD", "bench:xadd", "*", "f1", "v1", "f2", "v2"]
XR = "bench:xr"
rb_command("XADD", XADD_CMD, group="streams", issue=HOT_CORE, target=UNPIPELINED)
rb_command(f"XADD -P{PIPELINE}", XADD_CMD, group="streams", issue=HOT_CORE, target=AT_LEAST(0.75),
           pipeline=PIPELINE)
rb_command("XRANGE COUNT 10", ["XRANGE", XR, "-", "+", "COUNT", "10"], group="streams", issue=HOT_CORE,
           target=UNPIPELINED, setup=prefill_stream(XR, 10_000))
rb_command("XRANGE COUNT 100", ["XRANGE", XR, "-", "+", "COUNT", "100"], group="streams", issue=HOT_CORE,
           target=LARGE_REPLY, requests=N_HEAVY, setup=prefill_stream(XR, 10_000))
rb_command("XREAD COUNT 100", ["XREAD", "COUNT", "100", "STREAMS", XR, "0-0"], group="streams",
           issue=HOT_CORE, target=LARGE_REPLY, requests=N_HEAVY, setup=prefill_stream(XR, 10_000))
rb_command("XLEN", ["XLEN", XR], group="streams", issue=HOT_CORE, target=UNPIPELINED,
           setup=prefill_stream(XR, 10_000))

CG_KEY, CG_GROUP, CG_ENTRIES = "bench:cg", "g", 100_000


def _consumer_setup(ctx: Ctx, server: Server) -> None:
    prefill_stream(CG_KEY, ctx.n(CG_ENTRIES))(ctx, server)
    with server.client() as c:
        reply = c.call("XGROUP", "CREATE", CG_KEY, CG_GROUP, "0")
        if reply != b"OK":
            raise BenchError(f"XGROUP CREATE: {reply!r}")


def _consumer_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    expected = ctx.n(CG_ENTRIES)
    done, secs = aio.run(aio.consumer_loop(server.port, CG_KEY, CG_GROUP, ctx.clients))
    if done != expected:
        raise BenchError(f"consumer loop acknowledged {done} of {expected} entries")
    return {"XREADGROUP COUNT 10 + XACK": done / secs}


register(Workload(
    "XREADGROUP COUNT 10 + XACK", "streams", HOT_CORE,
    [Row("XREADGROUP COUNT 10 + XACK", "entries/s", AT_LEAST(0.8))],
    _consumer_measure,
    probe=[["XADD", "bench:probe:cg", "*", "f", "v"], ["XGROUP", "CREATE", "bench:probe:cg", "g", "0"],
           ["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "bench:probe:cg", ">"],
           ["XACK", "bench:probe:cg", "g", "0-1"]],
    setup=_consumer_setup,
))

MEM_KEY, MEM_ENTRIES = "bench:mem", 1_000_000


MEM_LABEL = "stream memory/entry (two small fields)"


def _memory_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    """Bytes per entry over 1M entries: Redis's used_memory delta; rill's process RSS delta.

    RSS is all rill costs (interpreter overhead included); it is measured on a freshly
    started process so freed memory from earlier workloads cannot hide the growth.
    """
    n = ctx.n(MEM_ENTRIES)
    is_redis = server.is_redis
    with server.client() as c:
        before = int(c.info("memory")["used_memory"]) if is_redis else server.rss_bytes()
        prefill_stream(MEM_KEY, n)(ctx, server)
        length = c.call("XLEN", MEM_KEY)
        if length != n:
            raise BenchError(f"XLEN after filling is {length!r}, expected {n}")
        after = int(c.info("memory")["used_memory"]) if is_redis else server.rss_bytes()
    return {MEM_LABEL: (after - before) / n}


register(Workload(
    MEM_LABEL, "streams", HOT_CORE,
    [Row(MEM_LABEL, "B/entry", AT_MOST(1.0))],
    _memory_measure,
    probe=[["XADD", "bench:probe:mem", "*", "f", "v"], ["XLEN", "bench:probe:mem"]],
    fresh=True,
))

# -- issue 4: lists and the blocking layer -------------------------------------------------

rb_test("LPUSH", "lpush", group="lists", issue=HOT_CORE, target=UNPIPELINED, probe=[["LPUSH", "bench:probe:l", "x"]])
rb_test("RPUSH", "rpush", group="lists", issue=HOT_CORE, target=UNPIPELINED, probe=[["RPUSH", "bench:probe:l", "x"]])
# redis-benchmark pops from "mylist"; fill it first so every pop finds an item.
rb_test("LPOP", "lpop", group="lists", issue=HOT_CORE, target=UNPIPELINED, probe=[["LPOP", "bench:probe:l"]],
        setup=prefill_list("mylist", N_UNPIPELINED))
rb_test("RPOP", "rpop", group="lists", issue=HOT_CORE, target=UNPIPELINED, probe=[["RPOP", "bench:probe:l"]],
        setup=prefill_list("mylist", N_UNPIPELINED))
rb_test("LRANGE_100", "lrange_100", group="lists", issue=HOT_CORE, target=LARGE_REPLY, requests=N_HEAVY,
        probe=[["LPUSH", "bench:probe:l", "x"], ["LRANGE", "bench:probe:l", "0", "99"]])

WAKE_WAITERS = 1000


def _wake_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    rounds = 1 if ctx.quick else 3
    lat = aio.run(aio.wake_latency(server.port, "bench:wake", WAKE_WAITERS, rounds))
    return {"BLPOP wake p50 (1000 blocked)": aio.percentile(lat, 50),
            "BLPOP wake p99 (1000 blocked)": aio.percentile(lat, 99)}


register(Workload(
    "BLPOP wake latency", "lists", 4,
    [Row("BLPOP wake p50 (1000 blocked)", "ms", None),
     Row("BLPOP wake p99 (1000 blocked)", "ms", Target("abs<=", 10.0))],
    _wake_measure,
    probe=[["RPUSH", "bench:probe:w", "x"], ["BLPOP", "bench:probe:w", "0.01"]],
))

# -- issue 5: persistence ------------------------------------------------------------------
# SAVE and start-up load of a big stream and of a mixed keyspace, and XADD with an AOF.
# Times are in ms (lower is better). "start-up" is from process launch to the first PONG,
# so it includes rill's interpreter start (~0.3 s) as users see it. The dataset reaches
# both servers the same way: an RDB file written by rill's codec is dropped into the
# server's dir before a restart (filling 5M entries command by command would take rill
# over a minute); the dump is removed afterwards so later restarts start empty.

SAVE_STREAM_ENTRIES, SAVE_MIXED_KEYS = 5_000_000, 1_000_000


def _install_dump(server: Server, image: bytes) -> None:
    import os

    server.stop()
    with open(os.path.join(server.workdir, "dump.rdb"), "wb") as f:
        f.write(image)
    server.start(timeout=120.0)


def _stream_dump(entries: int) -> bytes:
    """An RDB holding one stream of ``entries`` two-field entries in nodes of 100.

    Node listpacks are delta-encoded against their master ID, so one node built by the
    storage layer is stored under successive master IDs, 100 ms apart.
    """
    from rill.persistence import rdb
    from rill.persistence.crc64 import crc64
    from rill.storage.stream import Stream, make_id

    base = 1_700_000_000_000
    node = Stream()
    for j in range(100):
        node.add([b"f1", b"%d" % (j % 1000), b"f2", b"%d" % (j % 100)], make_id(base + j, 0))
    (_, lp), = node.nodes()
    nodes = entries // 100
    out = bytearray(b"REDIS0010")
    out += b"\xfe\x00\xfb\x01\x00\x13" + rdb.encode_string(b"bench:save") + rdb.encode_len(nodes)
    blob = rdb.encode_string(lp, compress=True)
    for i in range(nodes):
        out += b"\x10" + make_id(base + 100 * i, 0).to_bytes(16, "big") + blob
    last = base + 100 * (nodes - 1) + 99
    ln = rdb.encode_len
    out += ln(nodes * 100) + ln(last) + ln(0) + ln(base) + ln(0) + ln(0) + ln(0) + ln(nodes * 100) + ln(0)
    out += b"\xff"
    return bytes(out + crc64(out).to_bytes(8, "little"))


def _mixed_dump(keys: int) -> bytes:
    """70% strings, 20% five-item lists, 10% one-entry streams; every fifth key with a TTL."""
    import io

    from rill.persistence import rdb
    from rill.storage.list import ListValue
    from rill.storage.stream import Stream, make_id

    data: dict[bytes, object] = {}
    expires: dict[bytes, int] = {}
    for i in range(keys):
        r = i % 10
        key = b"mix:%d" % i
        if r < 7:
            data[key] = b"value-%d" % i if r else b"%d" % i
        elif r < 9:
            data[key] = ListValue([b"a", b"b", b"c", b"d", b"e"])
        else:
            s = Stream()
            s.add([b"f", b"v"], make_id(1, 1))
            data[key] = s
        if i % 5 == 0:
            expires[key] = 4102444800000
    buf = io.BytesIO()
    rdb.save_file(buf, [(0, data, expires)])
    return buf.getvalue()


def _dump_setup(make: Callable[[int], bytes], full: int) -> Callable[[Ctx, Server], None]:
    cache: dict[int, bytes] = {}

    def setup(ctx: Ctx, server: Server) -> None:
        n = ctx.n(full)
        if n not in cache:
            cache[n] = make(n)
        _install_dump(server, cache[n])

    return setup


def _save_and_load(label: str) -> Callable[[Ctx, Server], dict[str, float]]:
    def measure(ctx: Ctx, server: Server) -> dict[str, float]:
        import os
        import time

        with server.client() as c:
            t = time.perf_counter()
            reply = c.call("SAVE")
            save_ms = (time.perf_counter() - t) * 1000
            if reply != b"OK":
                raise BenchError(f"SAVE: {reply!r}")
            size = c.call("DBSIZE")
        server.stop()
        t = time.perf_counter()
        server.start(timeout=120.0)
        load_ms = (time.perf_counter() - t) * 1000
        with server.client() as c:
            if c.call("DBSIZE") != size:
                raise BenchError("the restarted server does not hold what was saved")
            c.call("FLUSHALL")
        try:
            os.unlink(os.path.join(server.workdir, "dump.rdb"))
        except OSError:
            pass
        return {f"SAVE {label}": save_ms, f"start-up load {label}": load_ms}

    return measure


for _label, _setup, _load_target in [
    ("5M stream entries", _dump_setup(_stream_dump, SAVE_STREAM_ENTRIES), Target("abs<=", 1000.0)),
    ("1M mixed keys", _dump_setup(_mixed_dump, SAVE_MIXED_KEYS), None),
]:
    register(Workload(
        f"SAVE + load {_label}", "persistence", 5,
        [Row(f"SAVE {_label}", "ms", AT_MOST(2.0)), Row(f"start-up load {_label}", "ms", _load_target)],
        _save_and_load(_label),
        probe=[["SAVE"]],
        setup=_setup,
    ))


def _xadd_with_aof(policy: str) -> Callable[[Ctx, Server], dict[str, float]]:
    label = f"XADD appendfsync {policy}"

    def measure(ctx: Ctx, server: Server) -> dict[str, float]:
        import time

        with server.client() as c:
            c.call("CONFIG", "SET", "appendfsync", policy)
            c.call("CONFIG", "SET", "appendonly", "yes")
            deadline = time.monotonic() + 60
            while c.info("persistence").get("aof_rewrite_in_progress") != "0" and time.monotonic() < deadline:
                time.sleep(0.05)
            try:
                rps = redis_benchmark(server.port, requests=ctx.n(N_UNPIPELINED), clients=ctx.clients,
                                      command=XADD_CMD)
            finally:
                c.call("CONFIG", "SET", "appendonly", "no")
        return {label: rps}

    return measure


for _policy, _target in [("everysec", AT_LEAST(0.6)), ("always", None)]:
    register(Workload(
        f"XADD appendfsync {_policy}", "persistence", 5,
        [Row(f"XADD appendfsync {_policy}", "rps", _target)],
        _xadd_with_aof(_policy),
        probe=[["CONFIG", "SET", "appendfsync", _policy]],
    ))

# -- issue 6: hashes, sets and sorted sets -------------------------------------------------


def prefill_zset(key: str, members: int) -> Callable[[Ctx, Server], None]:
    """Setup: a sorted set of ``members`` members with distinct integer scores."""

    def setup(ctx: Ctx, server: Server) -> None:
        with server.client() as c:
            c.call("DEL", key)
            errors = c.pipeline(
                ["ZADD", key, *(x for i in range(j, min(j + 1000, members)) for x in (i, f"m:{i}"))]
                for j in range(0, members, 1000)
            )
            if errors:
                raise BenchError(f"prefill of {key}: {errors} error replies")

    return setup


rb_test("HSET", "hset", group="collections", issue=HOT_CORE, target=UNPIPELINED,
        probe=[["HSET", "bench:probe:h", "f", "v"]])
rb_test("SADD", "sadd", group="collections", issue=HOT_CORE, target=UNPIPELINED,
        probe=[["SADD", "bench:probe:s", "m"]])
rb_test("ZADD", "zadd", group="collections", issue=HOT_CORE, target=UNPIPELINED,
        probe=[["ZADD", "bench:probe:z", "1", "m"]])
# redis-benchmark pops from "myzset"; fill it first so every pop finds a member.
rb_test("ZPOPMIN", "zpopmin", group="collections", issue=HOT_CORE, target=UNPIPELINED,
        probe=[["ZPOPMIN", "bench:probe:z"]], setup=prefill_zset("myzset", N_UNPIPELINED))
rb_command("ZRANGE 0 99 WITHSCORES", ["ZRANGE", "bench:zr", "0", "99", "WITHSCORES"], group="collections",
           issue=HOT_CORE, target=LARGE_REPLY, requests=N_HEAVY, setup=prefill_zset("bench:zr", 1000))

# -- issue 26: SET while allkeys-lru evicts a key per write --------------------------------------
EVICT_ROOM = 32 << 20  # maxmemory: what the server uses at start plus this much data
EVICT_KEYSPACE = 10_000_000


def _evict_setup(ctx: Ctx, server: Server) -> None:
    """maxmemory at the server's start-up figure plus 32 MB, allkeys-lru, and SETs of
    redis-benchmark's key pattern until keys are being evicted."""
    with server.client() as c:
        base = int(c.info("memory")["used_memory"])
        c.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        c.call("CONFIG", "SET", "maxmemory", base + EVICT_ROOM)
        n = 0
        while int(c.info("stats")["evicted_keys"]) == 0:
            errors = c.pipeline(["SET", f"key:{i:012d}", "x" * 3] for i in range(n, n + 20_000))
            if errors:
                raise BenchError(f"prefill for eviction: {errors} error replies")
            n += 20_000
            if n > 5_000_000:
                raise BenchError("no key was evicted after 5M SETs")


def _evict_measure(ctx: Ctx, server: Server) -> dict[str, float]:
    try:
        rps = redis_benchmark(server.port, requests=ctx.n(N_UNPIPELINED), clients=ctx.clients,
                              test="set", extra=["-r", str(EVICT_KEYSPACE)])
    finally:
        with server.client() as c:
            c.call("CONFIG", "SET", "maxmemory", "0")
            c.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
            c.call("FLUSHALL")
    return {"SET at maxmemory (allkeys-lru)": rps}


register(Workload(
    "SET at maxmemory (allkeys-lru)", "memory", 26,
    [Row("SET at maxmemory (allkeys-lru)", "rps", AT_LEAST(0.7))],
    _evict_measure, probe=[["CONFIG", "GET", "maxmemory-policy"]], setup=_evict_setup, fresh=True,
))

# -- issues 7, 8, 22 and 25: their modules register their own workloads ----------------------
# issue 7: Spark reads with rill vs redis-server as the store; issue 8: memory after deleting
# most of a stream; issue 22: Active-Active against its own baselines; issue 25: TLS.
from . import active_active, active_active_types, fullsync, spark, streams8, tls  # noqa: E402,F401
