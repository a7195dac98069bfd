"""LATENCY (the latency monitor and LATENCY HISTOGRAM) and INFO latencystats.

Side by side with redis-server where replies are deterministic; where timings make
the bytes differ, the same shapes (digits masked) and the invariants both servers
must satisfy. The rest runs on an in-process server with a fake clock.
"""

from __future__ import annotations

import itertools
import re
import threading
import time

import hiredis
import pytest
import redis

from tests.conftest import SideBySide
from tests.support import RawClient, encode_command, require_tool, start_redis, start_rill

# -- servers of our own: these tests change latency settings and reset statistics ---------


@pytest.fixture(scope="module")
def servers():
    require_tool("redis-server")
    rill, oracle = start_rill(), start_redis()
    yield rill, oracle
    rill.stop()
    oracle.stop()


def _defaults(port: int) -> None:
    c = RawClient(port)
    c.call("CONFIG", "SET", "latency-monitor-threshold", "0", "latency-tracking", "yes",
           "latency-tracking-info-percentiles", "50 99 99.9", "slowlog-log-slower-than", "10000")
    c.call("LATENCY", "RESET")
    c.call("CONFIG", "RESETSTAT")
    c.close()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def pair(request, servers):
    rill, oracle = servers
    for s in servers:
        _defaults(s.port)
    s = SideBySide(rill.port, oracle.port, resp3=request.param == 3)
    yield s
    s.close()


@pytest.fixture
def clients(servers):
    """redis-py clients (RESP2, decoded) on both servers, defaults restored."""
    out = []
    for s in servers:
        _defaults(s.port)
        out.append(redis.Redis(port=s.port, decode_responses=True))
    yield out
    for c in out:
        c.close()


def as_dict(flat: list) -> dict:
    """A RESP2 map (key, value, key, value, ...) as a dict."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def parse(reply: bytes):
    """A RESP2 reply as Python values."""
    reader = hiredis.Reader()
    reader.feed(reply)
    return reader.gets()


def raw2(pair: SideBySide) -> list[RawClient]:
    """The two connections of a side-by-side pair, answering in RESP2."""
    for c in (pair.rill, pair.oracle):
        c.call("HELLO", "2")
    return [pair.rill, pair.oracle]


def call2(c: redis.Redis, *args):
    """A command on ``c``'s server, its RESP2 reply as hiredis parses it (bytes, lists)."""
    raw = RawClient(c.connection_pool.connection_kwargs["port"])
    try:
        return parse(raw.call(*args))
    finally:
        raw.close()


def masked(reply: bytes) -> bytes:
    """A reply with every run of digits replaced: its shape without the timings."""
    return re.sub(rb"\d+", b"N", reply)


def text_of(reply: bytes) -> bytes:
    """The text of a bulk string (RESP2) or verbatim string (RESP3) reply."""
    head, _, rest = reply.partition(b"\r\n")
    assert head[:1] in (b"$", b"=") and rest.endswith(b"\r\n"), reply
    return rest[4:-2] if head[:1] == b"=" else rest[:-2]


def both_masked(pair: SideBySide, *args) -> tuple[bytes, bytes]:
    mine, theirs = pair.both(*args)
    assert masked(mine) == masked(theirs), f"{args!r}: rill {mine!r} != redis {theirs!r}"
    return mine, theirs


# -- replies side by side ------------------------------------------------------------------


def test_errors_and_empty_replies_side_by_side(pair):
    pair.run([
        ("LATENCY",),
        ("LATENCY", "NOSUCH"),
        ("LATENCY", "HELP"),
        ("LATENCY", "help", "xxx"),
        ("LATENCY", "LATEST"),
        ("LATENCY", "LATEST", "x"),
        ("LATENCY", "DOCTOR", "x"),
        ("LATENCY", "HISTORY"),
        ("LATENCY", "HISTORY", "a", "b"),
        ("LATENCY", "HISTORY", "command"),
        ("LATENCY", "HISTORY", "blabla"),
        ("LATENCY", "GRAPH"),
        ("LATENCY", "GRAPH", "a", "b"),
        ("LATENCY", "GRAPH", "command"),
        ("LATENCY", "GRAPH", "no\r\nsuch"),
        ("LATENCY", "RESET"),
        ("LATENCY", "RESET", "blabla", "command"),
        ("LATENCY", "HISTOGRAM", "blabla"),
        ("LATENCY", "HISTOGRAM", "blabla", "get|x", "a|b|c", "set|nosuch"),
        ("LATENCY", "HISTOGRAM", "set", "get"),  # no calls since RESETSTAT: nothing to show
    ])


def test_doctor_before_and_after_enabling_the_monitor(pair):
    pair.check("LATENCY", "DOCTOR")  # "I'm sorry, Dave": disabled, nothing ever recorded
    pair.check("CONFIG", "SET", "latency-monitor-threshold", "100")
    pair.check("LATENCY", "DOCTOR")  # enabled, no spike observed


def test_command_docs_and_info_side_by_side(pair):
    subs = ["latest", "history", "reset", "graph", "doctor", "histogram", "help"]
    for sub in subs:
        pair.check("COMMAND", "INFO", f"latency|{sub}")
        pair.check("COMMAND", "DOCS", f"latency|{sub}")
    pair.check("COMMAND", "INFO", "LATENCY|HISTOGRAM", "latency|nosuch")
    # The container lists its subcommands in hash order on Redis: compared as sets.
    mine, theirs = (parse(c.call("COMMAND", "INFO", "latency"))[0] for c in raw2(pair))
    assert mine[:9] == theirs[:9]
    assert sorted(mine[9]) == sorted(theirs[9]) and len(mine[9]) == 7
    mine, theirs = (as_dict(parse(c.call("COMMAND", "DOCS", "latency"))) for c in raw2(pair))
    doc_m, doc_t = (as_dict(d[b"latency"]) for d in (mine, theirs))
    subs_m, subs_t = doc_m.pop(b"subcommands"), doc_t.pop(b"subcommands")
    assert doc_m == doc_t
    assert as_dict(subs_m) == as_dict(subs_t)


def test_a_slow_command_is_an_event_on_both_servers(pair):
    """DEBUG SLEEP 0.2 with a 100 ms threshold: one ``command`` sample of >= 200 ms."""
    pair.check("CONFIG", "SET", "latency-monitor-threshold", "100")
    pair.check("DEBUG", "SLEEP", "0.2")
    now = int(time.time())
    latest = both_masked(pair, "LATENCY", "LATEST")
    history = both_masked(pair, "LATENCY", "HISTORY", "command")
    for reply in latest:
        # [event, time, latency, max]: the max is the sample, at least the sleep
        m = re.search(rb"\$7\r\ncommand\r\n:(\d+)\r\n:(\d+)\r\n:(\d+)\r\n$", reply)
        assert m, reply
        when, ms, worst = map(int, m.groups())
        assert abs(when - now) <= 2 and 200 <= ms < 1000 and worst == ms
    for reply in history:
        assert re.fullmatch(rb"\*1\r\n\*2\r\n:\d+\r\n:(2\d\d|[3-9]\d\d)\r\n", reply), reply
    for client in (pair.rill, pair.oracle):
        ms = int(re.search(rb":(\d+)\r\n$", client.call("LATENCY", "HISTORY", "command")).group(1))
        # One sample: the high, the low and the all time high are the same; a single
        # column on the lowest row, then its label ("0s" or "1s" ago).
        assert re.fullmatch(
            rb"command - high %d ms, low %d ms \(all time high %d ms\)\n-{80}\n \n \n \n_\n \n[01]\ns\n"
            % (ms, ms, ms), text_of(client.call("LATENCY", "GRAPH", "command")))
    both_masked(pair, "LATENCY", "GRAPH", "command")
    doctor = both_masked(pair, "LATENCY", "DOCTOR")[0]
    assert b"1. command: 1 latency spikes" in doctor
    assert b"Check your Slow Log" in doctor and b"Deleting, expiring or evicting" in doctor
    pair.check("LATENCY", "RESET", "COMMAND", "command")  # case-insensitive; each name counted
    pair.check("LATENCY", "LATEST")


def sparkline_bars(latencies: list[int]) -> list[bytes]:
    """The four bar rows LATENCY GRAPH draws for these samples, as the Redis docs describe
    them: each sample scaled from the lowest to the highest into 12 steps, three per row
    ("_", "o", "#"), a full cell below the top drawn as "|". Checked against redis-server's
    own graph in the same test, so it is the oracle's rule, not ours restated blindly."""
    low, high = min(latencies), max(latencies)
    span = (high - low) or 1
    heights = [min((v - low) * 12 // span, 11) for v in latencies]
    rows = []
    for row in range(4):
        base = (3 - row) * 3
        cells = []
        for h in heights:
            k = h - base
            cells.append("_o#"[k] if 0 <= k < 3 else "|" if k >= 3 else " ")
        rows.append("".join(cells).encode())
    return rows


def test_three_spikes_a_second_apart_draw_the_same_graph(servers):
    """Three spikes a second apart on both servers: each records the three, and each
    draws its own history as Redis's rule says, with the same header and labels.

    The spikes' lengths depend on the machine's load (a sleep only promises its
    minimum), so the bars are compared with what each server's own history gives,
    never with a fixed picture."""
    for s in servers:
        _defaults(s.port)
    conns = [RawClient(s.port) for s in servers]

    def spikes(c: RawClient) -> None:
        c.call("CONFIG", "SET", "latency-monitor-threshold", "100")
        for i, secs in enumerate(("0.2", "0.35", "0.6")):
            if i:
                time.sleep(1.1)
            c.call("DEBUG", "SLEEP", secs)

    threads = [threading.Thread(target=spikes, args=(c,)) for c in conns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in conns:
        history = [int(x) for x in re.findall(rb":(\d+)", c.call("LATENCY", "HISTORY", "command"))]
        times, lat = history[0::2], history[1::2]
        assert len(lat) == 3 and times == sorted(times) and len(set(times)) == 3
        assert lat[0] >= 200 and lat[1] >= 350 and lat[2] >= 600
        graph = text_of(c.call("LATENCY", "GRAPH", "command"))
        lines = graph.split(b"\n")
        assert lines[0] == (
            b"command - high %d ms, low %d ms (all time high %d ms)" % (max(lat), min(lat), max(lat)))
        assert lines[2:6] == sparkline_bars(lat), (lat, graph)
    graphs = [text_of(c.call("LATENCY", "GRAPH", "command")) for c in conns]
    # Below the bars: a blank row, then each sample's age written downwards ("1s", "2s"...).
    assert masked(graphs[0].split(b"\n", 6)[6]) == masked(graphs[1].split(b"\n", 6)[6])
    doctor = [c.call("LATENCY", "DOCTOR") for c in conns]
    assert masked(doctor[0]) == masked(doctor[1])
    assert b"1. command: 3 latency spikes" in doctor[0]
    for c in conns:
        c.close()


def test_histogram_shape_side_by_side(pair, clients):
    pair.check("CONFIG", "RESETSTAT")
    pair.check("SET", "a", "b")
    pair.check("GET", "a")
    # one call each, so one bucket each whatever the timings
    both_masked(pair, "LATENCY", "HISTOGRAM", "set", "get")
    both_masked(pair, "LATENCY", "HISTOGRAM", "set", "blabla", "set")  # asked twice, listed twice
    pair.check("CONFIG", "RESETSTAT")
    pair.both("CLIENT", "ID")
    both_masked(pair, "LATENCY", "HISTOGRAM", "client")  # a container: its subcommands with data
    both_masked(pair, "LATENCY", "HISTOGRAM", "CLIENT|ID")
    for c in clients:
        c.config_resetstat()
        c.set("a", "b")
        c.set("a", "c")
        histo = as_dict(call2(c, "LATENCY", "HISTOGRAM"))
        assert set(histo) == {b"config|resetstat", b"set"}
        calls, n, _, buckets = histo[b"set"]
        assert (calls, n) == (b"calls", 2)
        keys, cumulative = buckets[::2], buckets[1::2]
        # Redis's log steps: the highest value of the HDR counter of 1024 * 2^k ns, in us.
        assert set(keys) <= {1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227}
        assert keys == sorted(keys) and cumulative == sorted(cumulative) and cumulative[-1] == 2


def test_histogram_buckets_of_a_sleep_are_redis_buckets(pair):
    """45 ms is well inside the step that ends at 2^26 ns: the same bytes on both."""
    pair.check("DEBUG", "SLEEP", "0.045")
    reply = pair.check("LATENCY", "HISTOGRAM", "debug")
    assert b"histogram_usec" in reply and b":67633\r\n:1\r\n" in reply


def test_info_latencystats_side_by_side(pair, clients):
    pair.check("CONFIG", "GET", "latency-tracking-info-percentiles")
    for value in ("0 1e1 100.000 99.99999", "", "+5", ".5", "0x10", "-0", "50", "10 a", "10 101",
                  " 10", "50  99", "1e400", "1e-400", "nan", "inf", "50 99 99.9"):
        pair.check("CONFIG", "SET", "latency-tracking-info-percentiles", value)
        pair.check("CONFIG", "GET", "latency-tracking-info-percentiles")
    for c in clients:
        c.config_resetstat()
        c.set("a", "b")
        c.get("a")
        info = c.info("latencystats")
        assert set(info) == {"latency_percentiles_usec_config|resetstat", "latency_percentiles_usec_set",
                             "latency_percentiles_usec_get"}
        for cmd in ("config|resetstat", "set", "get"):
            values = [float(v) for v in re.fullmatch(r"p50=(\d+\.\d{3}),p99=(\d+\.\d{3}),p99\.9=(\d+\.\d{3})",
                                                    _raw_line(c, cmd)).groups()]
            assert values == sorted(values) and values[0] > 0
        c.config_set("latency-tracking-info-percentiles", "0.0 50.0 100.0")
        assert re.fullmatch(r"p0=\d+\.\d{3},p50=\d+\.\d{3},p100=\d+\.\d{3}", _raw_line(c, "get"))
        c.config_set("latency-tracking-info-percentiles", "")
        assert _raw_line(c, "get") == ""
        c.config_set("latency-tracking", "no")
        assert c.info("latencystats") == {}
        c.set("a", "b")  # not recorded while tracking is off
        c.config_set("latency-tracking", "yes")
        c.config_set("latency-tracking-info-percentiles", "50")
        histo = call2(c, "LATENCY", "HISTOGRAM", "set")
        assert histo[1][:2] == [b"calls", 1]
        assert c.info("commandstats")["cmdstat_set"]["calls"] == 2
        c.config_resetstat()
        assert list(c.info("latencystats")) == ["latency_percentiles_usec_config|resetstat"]
    # Only CONFIG RESETSTAT and this INFO since the reset, on both.
    lines = [set(masked(text_of(r)).split(b"\r\n")) for r in pair.both("INFO", "latencystats")]
    assert lines[0] == lines[1] and b"latency_percentiles_usec_info:pN=N.N" in lines[0]


def _raw_line(c: redis.Redis, cmd: str) -> str:
    """A command's INFO latencystats value as the server wrote it."""
    raw = RawClient(c.connection_pool.connection_kwargs["port"])
    text = text_of(raw.call("INFO", "latencystats")).decode()
    raw.close()
    m = re.search(rf"^latency_percentiles_usec_{re.escape(cmd)}:(.*?)\r$", text, re.M)
    assert m, text
    return m.group(1)


def test_latencystats_of_a_sleep(clients):
    for c in clients:
        c.config_set("latency-tracking-info-percentiles", "50")
        c.execute_command("DEBUG", "SLEEP", "0.05")
        c.set("k", "v")
        debug = float(_raw_line(c, "debug").removeprefix("p50="))
        # At least the sleep; the bound above only says the sample is of this sleep
        # (microseconds, not a unit off) without betting on how loaded the machine is.
        assert 50_000 <= debug < 1_000_000
        assert 0 < float(_raw_line(c, "set").removeprefix("p50=")) < debug


def _blocked(c: redis.Redis, n: int = 1) -> None:
    deadline = time.monotonic() + 5
    while c.info("clients")["blocked_clients"] != n:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_blocked_commands_are_sampled_when_served_not_when_timed_out(servers, clients):
    for server, c in zip(servers, clients, strict=True):
        c.delete("list")
        assert c.blpop("list", timeout=0.05) is None
        # a wait that timed out: a call, no sample (Redis samples when it serves one)
        assert c.info("commandstats")["cmdstat_blpop"]["calls"] == 1
        assert call2(c, "LATENCY", "HISTOGRAM", "blpop") == []
        waiter = RawClient(server.port)
        waiter.send_raw(encode_command(["BLPOP", "list", "0"]))
        _blocked(c)
        c.lpush("list", "x")
        assert waiter.read_reply() == b"*2\r\n$4\r\nlist\r\n$1\r\nx\r\n"
        # CLIENT UNBLOCK also leaves a sample
        waiter_id = int(waiter.call("CLIENT", "ID")[1:-2])
        waiter.send_raw(encode_command(["BLPOP", "list", "0"]))
        _blocked(c)
        assert c.client_unblock(waiter_id)
        assert waiter.read_reply() == b"*-1\r\n"
        waiter.close()
        histo = call2(c, "LATENCY", "HISTOGRAM", "blpop")
        assert histo[0] == b"blpop" and histo[1][:2] == [b"calls", 2]
        assert c.info("commandstats")["cmdstat_blpop"]["calls"] == 3
        assert re.fullmatch(r"p50=[\d.]+,p99=[\d.]+,p99\.9=[\d.]+", _raw_line(c, "blpop"))


def test_fork_statistics_and_event(clients):
    for c in clients:
        c.set("k", "v")
        before = c.info("stats")
        assert before["total_forks"] == 0 and before["latest_fork_usec"] == 0  # since RESETSTAT
        c.bgsave()
        stats = c.info("stats")
        assert stats["total_forks"] == 1 and stats["latest_fork_usec"] > 0
        deadline = time.monotonic() + 10
        while c.info("persistence")["rdb_bgsave_in_progress"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        c.config_resetstat()
        assert c.info("stats")["total_forks"] == 0


def test_expired_big_key_is_an_expire_cycle_event(clients):
    """Active expiry of a key whose deletion takes a while, as Redis's own test does."""
    rill = clients[0]
    rill.flushall()
    rill.config_set("latency-monitor-threshold", 1)
    for i in range(0, 300_000, 50_000):
        rill.sadd("big", *range(i, i + 50_000))
    # Not 1 ms: PEXPIRE reads the clock for its base and again to see whether the time
    # has already passed (as Redis does), so a millisecond boundary between the two
    # reads deleted the key inside PEXPIRE itself, a fast-command event (seen in CI).
    rill.pexpire("big", 100)
    deadline = time.monotonic() + 5
    while rill.dbsize():  # DBSIZE looks no key up: active expiry must delete it
        assert time.monotonic() < deadline
        time.sleep(0.05)
    events = {e[0]: e for e in call2(rill, "LATENCY", "LATEST")}
    assert b"expire-cycle" in events and events[b"expire-cycle"][3] >= 1, events


def test_help_of_every_subcommand_is_redis(pair):
    pair.check("LATENCY", "HELP")
    pair.check("latency", "help")


# -- in-process: the dispatcher, with a clock the test moves --------------------------------


@pytest.fixture
def clocked(monkeypatch):
    """An in-process server whose commands each take ``clock.step`` ns."""
    from rill.server import blocking as blocking_module
    from rill.server import fastpath
    from rill.server import server as server_module
    from rill.server.server import Server


    class Clock:
        now = 1_000_000_000
        step = 1_000

        def __call__(self) -> int:
            self.now += self.step
            return self.now

    clock = Clock()
    monkeypatch.setattr(server_module, "perf_counter_ns", clock)
    monkeypatch.setattr(blocking_module, "perf_counter_ns", clock)  # a served waiter's run
    monkeypatch.setattr(fastpath, "perf_counter_ns", clock)  # execute_all's loop
    server = Server()
    client = server.new_client("127.0.0.1:5000", "127.0.0.1:6379")
    return server, client, clock


def _run(server, client, *argvs, pipelined=True):
    commands = [[a if isinstance(a, bytes) else str(a).encode() for a in argv] for argv in argvs]
    if pipelined:
        server.execute_all(client, commands)
    else:
        for argv in commands:
            server.execute(client, argv)
    out = b"".join(client.out)
    client.out.clear()
    return out


def _latest(server) -> dict[str, tuple[int, int]]:
    return {event: (s.latest()[1], s.max) for event, s in server.latency.events.items()}


@pytest.mark.parametrize("pipelined", [True, False])
def test_threshold_is_inclusive_in_milliseconds(clocked, pipelined):
    server, client, clock = clocked
    server.config.set("latency-monitor-threshold", "1")
    clock.step = 999_999  # 0.999999 ms: 0 ms as Redis counts it
    _run(server, client, ("SET", "k", "v"), pipelined=pipelined)
    assert _latest(server) == {}
    clock.step = 1_000_000
    _run(server, client, ("SET", "k", "v"), pipelined=pipelined)
    assert _latest(server) == {"command": (1, 1)}
    clock.step = 3_700_000
    _run(server, client, ("GET", "k"), ("SET", "k", "v"), pipelined=pipelined)  # GET is a fast command
    assert _latest(server) == {"command": (3, 3), "fast-command": (3, 3)}
    server.config.set("latency-monitor-threshold", "0")  # off: nothing more is taken
    clock.step = 10**9
    _run(server, client, ("GET", "k"), pipelined=pipelined)
    assert _latest(server) == {"command": (3, 3), "fast-command": (3, 3)}


def test_slowlog_and_latency_thresholds_apply_each_on_its_own(clocked):
    server, client, clock = clocked
    server.config.set("latency-monitor-threshold", "5")
    server.config.set("slowlog-log-slower-than", "2000")  # 2 ms
    clock.step = 3_000_000
    _run(server, client, ("SET", "a", "1"))
    assert [e.argv for e in server.slowlog] == [[b"SET", b"a", b"1"]] and _latest(server) == {}
    clock.step = 6_000_000
    _run(server, client, ("SET", "b", "1"))
    assert len(server.slowlog) == 2 and _latest(server) == {"command": (6, 6)}
    server.config.set("slowlog-log-slower-than", "-1")
    _run(server, client, ("SET", "c", "1"))
    assert len(server.slowlog) == 2
    # EXEC is kept out of the slowlog, not out of the latency monitor (Redis's call());
    # MULTI is a fast command.
    server.config.set("slowlog-log-slower-than", "0")
    server.latency.reset()
    clock.step = 9_000_000
    _run(server, client, ("MULTI",), ("EXEC",), pipelined=False)
    assert [e.argv for e in server.slowlog][0] == [b"MULTI"]
    assert _latest(server) == {"fast-command": (9, 9), "command": (9, 9)}


def test_one_sample_per_second_the_worst_kept_and_160_seconds_of_history(clocked, monkeypatch):
    from rill.server import latency

    server, client, clock = clocked
    server.config.set("latency-monitor-threshold", "1")
    seconds = itertools.count(1_700_000_000)
    now = [next(seconds)]
    monkeypatch.setattr(latency.time, "time", lambda: now[0])
    for ms in (4, 9, 2):  # the same second: one sample, the worst
        clock.step = ms * 1_000_000
        _run(server, client, ("SET", "k", "v"))
    series = server.latency.events["command"]
    assert series.samples() == [(now[0], 9)] and series.max == 9
    for i in range(200):
        now[0] = next(seconds)
        clock.step = (i % 7 + 1) * 1_000_000
        _run(server, client, ("SET", "k", "v"))
    samples = series.samples()
    assert len(samples) == 160 and samples[-1][0] == now[0] and samples[0][0] == now[0] - 159
    assert series.max == 9  # the worst ever, even once its second left the history
    out = _run(server, client, ("LATENCY", "HISTORY", "command"), pipelined=False)
    assert out.startswith(b"*160\r\n*2\r\n:%d\r\n" % (now[0] - 159))


def test_calls_are_counted_whether_tracking_is_on_or_off(clocked):
    server, client, clock = clocked
    get = server.cmdstats.of(server.table.lookup_name(b"get"))
    _run(server, client, ("GET", "a"), ("GET", "a"))
    server.config.set("latency-tracking", "no")
    _run(server, client, ("GET", "a"), ("GET", "a"), ("GET", "a"))
    _run(server, client, ("GET", "a"), pipelined=False)
    assert get.calls == 6 and get.samples() == 2
    server.config.set("latency-tracking", "yes")
    clock.step = 70_000  # past the table of short durations: the other way in
    _run(server, client, ("GET", "a"), pipelined=False)
    _run(server, client, ("GET", "a"))
    assert get.calls == 8 and get.samples() == 4
    assert server.stats.total_commands_processed == 8
    get.calls = 0  # INFO commandstats' counter can be set (the latency samples stay)
    assert get.calls == 0 and get.samples() == 4
    _run(server, client, ("CONFIG", "RESETSTAT"), pipelined=False)
    assert get.calls == 0 and get.samples() == 0 and get.hist == ()


def test_blocked_command_sample_moves_to_when_it_is_served(clocked):
    server, client, clock = clocked
    other = server.new_client("127.0.0.1:5001", "127.0.0.1:6379")
    blpop = server.cmdstats.of(server.table.lookup_name(b"blpop"))
    clock.step = 5_000
    _run(server, client, ("BLPOP", "q", "0"))
    assert client.blocked is not None
    assert blpop.calls == 1 and blpop.samples() == 0
    clock.step = 2_000
    _run(server, other, ("RPUSH", "q", "x"))
    assert client.blocked is None
    assert blpop.calls == 1 and blpop.samples() == 1
    # the sample is the first run and the serving run together: 7 us
    from rill.server.latency import HDR_OF

    assert blpop.hist[HDR_OF[7_000]] == 1


def test_info_latencystats_values(clocked):
    server, client, clock = clocked
    server.config.set("latency-tracking-info-percentiles", "0 50 99 100")
    for step in (7_000, 8_000, 8_000, 2_113_000):
        clock.step = step
        _run(server, client, ("SET", "k", "v"))
    info = _run(server, client, ("INFO", "latencystats"), pipelined=False).decode()
    # HDR counters of 2 significant digits, as Redis reports them: the 0th percentile is
    # its counter's lowest value, the others their counter's highest value.
    assert "latency_percentiles_usec_set:p0=6.976,p50=8.031,p99=2113.535,p100=2113.535\r\n" in info


def test_long_durations_are_clamped_to_a_second(clocked):
    server, client, clock = clocked
    for step in (40_000, 300_000, 5_000_000_000):
        clock.step = step
        _run(server, client, ("SET", "k", "v"))
    out = _run(server, client, ("LATENCY", "HISTOGRAM", "set"), pipelined=False)
    assert out == (b"*2\r\n$3\r\nset\r\n*4\r\n$5\r\ncalls\r\n:3\r\n$14\r\nhistogram_usec\r\n"
                   b"*6\r\n:66\r\n:1\r\n:528\r\n:2\r\n:1073741\r\n:3\r\n")


def test_aof_write_and_fsync_events(clocked, tmp_path):
    from rill.persistence.aof import AofWriter

    server, client, clock = clocked
    seen = []
    w = AofWriter(str(tmp_path / "a.aof"), "always")
    w.on_latency = lambda what, ns: seen.append((what, ns >= 0))
    w.feed([(0, [b"SET", b"k", b"v"])])
    assert w.flush()
    w.close()
    assert seen == [("write", True), ("fsync-always", True)]

    from rill.server.disk import Persistence

    p = Persistence.__new__(Persistence)
    p.server, p.writer, p.child_pid = server, None, None
    server.config.set("latency-monitor-threshold", "2")
    p._aof_latency("write", 1_999_999)
    assert _latest(server) == {}
    p._aof_latency("write", 3_000_000)
    p.child_pid = 12345
    p._aof_latency("write", 4_000_000)
    p._aof_latency("fsync-always", 2_000_000)
    assert _latest(server) == {"aof-write-alone": (3, 3), "aof-write": (4, 4),
                               "aof-write-active-child": (4, 4), "aof-fsync-always": (2, 2)}


def test_expire_cycle_event_measures_the_cron_pass(clocked):
    server, client, clock = clocked
    server.config.set("latency-monitor-threshold", "1")
    clock.step = 2_500_000
    server.cron()
    assert _latest(server) == {"expire-cycle": (2, 2)}


def test_fork_is_an_event_and_a_statistic(clocked):
    from rill.server.disk import Persistence

    server, client, clock = clocked
    server.config.set("latency-monitor-threshold", "1")
    p = Persistence.__new__(Persistence)
    p.server = server
    p._forked(3_200_000)
    assert (server.total_forks, server.latest_fork_usec) == (1, 3_200)
    assert _latest(server) == {"fork": (3, 3)} and server.fork_rate > 0


# -- rendering ------------------------------------------------------------------------------


def test_sparkline_rows_and_labels():
    from rill.server.latency import sparkline

    # 10..40 in 12 steps: heights 0, 4, 8 and 11 ("_o#" per row, "|" below the line)
    assert sparkline([10, 20, 30, 40], ["3s", "2s", "1s", "0s"], 80, 4) == (
        "   #\n  #|\n o||\n_|||\n    \n3210\nssss\n")
    # more samples than columns continue in a second block, scaled alike
    out = sparkline([1] * 81 + [2], ["1m"] * 82, 80, 4)
    first, second = out.split("\n\n")
    assert first.splitlines()[3] == "_" * 80 and first.splitlines()[5:] == ["1" * 80, "m" * 80]
    assert second == " #\n |\n |\n_|\n  \n11\nmm\n"


def test_doctor_advice_follows_the_events(monkeypatch):
    from rill.server import latency
    from rill.server.latency import LatencyMonitor, doctor

    monkeypatch.setattr(latency, "anon_huge_pages", lambda: 0)

    m = LatencyMonitor()
    m.add("fork", 30)
    m.add("expire-cycle", 5)
    report = doctor(m, threshold_ms=10, slowlog_us=10_000, fork_rate=5.0, appendfsync="everysec", hz=10)
    assert "1. fork: 1 latency spikes (average 30ms, mean deviation 0ms, period 1.00 sec). Worst all " \
        "time event 30ms. Fork rate is 5.00 GB/sec (terrible).\n" in report
    assert "2. expire-cycle: 1 latency spikes" in report
    assert "- If you are using a virtual machine" in report and "'CONFIG SET hz 100'" in report
    assert report.index("virtual machine") < report.index("hz 100") < report.index("Deleting, expiring")
    # Advice that the configuration makes moot is counted but not printed, as in Redis.
    m = LatencyMonitor()
    m.add("aof-fsync-always", 3)
    report = doctor(m, threshold_ms=1, slowlog_us=-1, fork_rate=0.0, appendfsync="everysec", hz=10)
    assert report.endswith("\nI have a few advices for you:\n\n")
    report = doctor(m, threshold_ms=1, slowlog_us=-1, fork_rate=0.0, appendfsync="always", hz=10)
    assert "Your fsync policy is set to 'always'" in report
    m = LatencyMonitor()
    m.add("command", 3)
    report = doctor(m, threshold_ms=2, slowlog_us=-1, fork_rate=0.0, appendfsync="no", hz=10)
    assert "'CONFIG SET slowlog-log-slower-than 2000'. If the Slow log is disabled" in report
    assert doctor(LatencyMonitor(), threshold_ms=1, slowlog_us=0, fork_rate=0.0, appendfsync="no",
                  hz=10).startswith("Dave, no latency spike was observed")
    monkeypatch.setattr(latency, "anon_huge_pages", lambda: 2 << 20)
    report = doctor(LatencyMonitor(), threshold_ms=1, slowlog_us=0, fork_rate=0.0, appendfsync="no", hz=10)
    assert report.startswith("\nI have a few advices for you:\n\n- I detected a non zero amount of anon")


def test_reset_matches_names_without_regard_to_case():
    from rill.server.latency import LatencyMonitor

    m = LatencyMonitor()
    for event in ("command", "fast-command", "fork"):
        m.add(event, 1)
    assert m.reset([b"COMMAND", b"command", b"nope"]) == 1
    assert list(m.events) == ["fast-command", "fork"]
    assert m.reset() == 2 and m.events == {}


def test_hdr_layout_matches_what_redis_reports():
    from rill.server.latency import (
        HDR_OF,
        TABLE_NS,
        cumulative_usec,
        hdr_highest,
        hdr_index,
        hdr_lowest,
    )

    assert all(HDR_OF[v] == hdr_index(v) for v in range(0, TABLE_NS, 97))
    # the values behind Redis's own replies seen from redis-server 7.0.15
    assert hdr_highest(hdr_index(8_000)) == 8_031 and hdr_lowest(hdr_index(7_000)) == 6_976
    assert hdr_highest(hdr_index(2_113_000)) == 2_113_535
    assert (hdr_lowest(hdr_index(50_069_000)), hdr_highest(hdr_index(50_069_000))) == (49_807_360, 50_069_503)
    assert hdr_highest(hdr_index(255)) == 255 and hdr_highest(hdr_index(256)) == 257
    assert [k for k, _ in cumulative_usec([(hdr_index(v), 1) for v in (500, 2_113_000)])] == [1, 2113]
    keys = [k for k, _ in cumulative_usec([(hdr_index(1 << n), 1) for n in range(10, 30)])]
    assert keys[:8] == [1, 2, 4, 8, 16, 33, 66, 132]


def test_config_percentiles_parsing():
    from rill.server.config import Config, ConfigError

    c = Config()
    c.set("latency-tracking-info-percentiles", "0 1e1 100.000 99.99999")
    assert c["latency-tracking-info-percentiles"] == "0 10 100 99.99999"
    for bad in ("10 a", " 10", "50  99", "nan", "1e400", "1e-400"):
        with pytest.raises(ConfigError, match="^Invalid latency-tracking-info-percentiles parameters$"):
            c.set("latency-tracking-info-percentiles", bad)
    for bad in ("101", "-1", "inf"):
        with pytest.raises(ConfigError, match=r"should sit between \[0.0,100.0\]"):
            c.set("latency-tracking-info-percentiles", bad)


def test_hot_path_threshold_fold_keeps_every_command_fast(clocked):
    """With both monitors off, no duration reaches the one comparison the dispatcher makes."""
    server, client, clock = clocked
    server.config.set("slowlog-log-slower-than", "-1")
    assert server.slow_ns >= 1 << 62
    server.config.set("latency-monitor-threshold", "7")
    assert server.slow_ns == 7_000_000
    server.config.set("slowlog-log-slower-than", "3")
    assert server.slow_ns == 3_000


def test_latency_from_a_script_and_a_transaction(clocked):
    """Commands run by EVAL or EXEC are calls of their own: each has a sample."""
    server, client, clock = clocked
    _run(server, client, ("EVAL", "redis.call('set', 'a', '1') return redis.call('get', 'a')", "0"),
         pipelined=False)
    _run(server, client, ("MULTI",), ("INCR", "n"), ("EXEC",), pipelined=False)
    for name in (b"eval", b"set", b"get", b"incr", b"exec"):
        assert server.cmdstats.of(server.table.lookup_name(name)).samples() == 1, name
