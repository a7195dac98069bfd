"""Redis 7.0 functions side by side with redis-server 7.0.15 (RESP2 and RESP3):
FUNCTION LOAD/DELETE/FLUSH/LIST/DUMP/RESTORE/STATS/KILL/HELP, FCALL, FCALL_RO,
busy functions, propagation, and libraries moving through RDB files, DUMP
payloads and AOFs in both directions.

Redis lists a library's functions (and libraries) in hash order under a random
seed, so the byte-for-byte LIST checks keep to one library with one function;
larger sets are compared as parsed, order-free structures.
"""

from __future__ import annotations

import os
import re
import time

import pytest
import redis as redis_py

from tests.server.persistence_helpers import redis_in, rill_in, wait_rewrite
from tests.support import (
    RawClient,
    effects_as_aof,
    encode_command,
    redis_aof_commands,
    require_tool,
    start_redis,
    start_rill,
    wait_until,
)
from tests.support import run_inproc as _run


@pytest.fixture(params=["resp2", "resp3"])
def oracle(request):
    """The side-by-side checker, once per protocol version, on servers with no
    libraries and no cached scripts."""
    s = request.getfixturevalue("sbs" if request.param == "resp2" else "sbs3")
    s.check("FUNCTION", "FLUSH")
    s.check("SCRIPT", "FLUSH")
    return s


def lib(name: str, *bodies: str) -> str:
    """A library's code: the shebang, then ``bodies`` as lines."""
    return "\n".join([f"#!lua name={name}", *bodies])


def fn(name: str, body: str) -> str:
    """A positional registration of a function (keys, args) -> body."""
    return f"redis.register_function('{name}', function(keys, args) {body} end)"


# -- FUNCTION LOAD --------------------------------------------------------------------------------


def test_load_and_metadata_errors(oracle):
    oracle.run([
        ("FUNCTION", "LOAD", lib("test", fn("test", "return 'hello'"))),
        ("FCALL", "test", "0"),
        ("FCALL", "TEST", "0"),  # function names ignore case
        ("FUNCTION", "LOAD", lib("test", fn("other", "return 1"))),
        ("FUNCTION", "LOAD", lib("TEST", fn("test", "return 1"))),  # ... library names do not
        ("FUNCTION", "LOAD", lib("l3", fn("Test", "return 1"))),
        ("FUNCTION", "LOAD", "REPLACE", lib("test", fn("test", "return 'hello1'"))),
        ("FCALL", "test", "0"),
        ("FUNCTION", "LOAD", "replace", lib("test", "bad script")),
        ("FCALL", "test", "0"),  # a failed REPLACE keeps the old library
        ("FUNCTION", "LOAD", "foo", "bar", lib("x", fn("x", "return 1"))),
        ("FUNCTION", "LOAD", "REPLACE"),
        ("FUNCTION", "LOAD", "REPLACE", "REPLACE", "x"),
        ("FUNCTION", "LOAD", "no shebang"),
        ("FUNCTION", "LOAD", "#!lua"),
        ("FUNCTION", "LOAD", "#!lua name=x"),
        ("FUNCTION", "LOAD", "#!lua\nreturn 1"),
        ("FUNCTION", "LOAD", "#!\nreturn 1"),
        ("FUNCTION", "LOAD", "#! name=test\nreturn 1"),
        ("FUNCTION", "LOAD", "#!bad_engine name=t\nreturn 1"),
        ("FUNCTION", "LOAD", "#!lua name=x y\nreturn 1"),
        ("FUNCTION", "LOAD", "#!lua name=foo name=bar\nreturn 1"),
        ("FUNCTION", "LOAD", "#!lua name=test foo=bar\nreturn 1"),
        ("FUNCTION", "LOAD", "#!lua \"name=x\nreturn 1"),
        ("FUNCTION", "LOAD", "#!lua name=\nreturn 1"),
        ("FUNCTION", "LOAD", "#!lua name=a-b\nreturn 1"),
        ("FUNCTION", "LOAD", "#!lua name=bad\0format\nreturn 1"),
        ("FUNCTION", "LOAD", "#!LUA NAME=\"quoted\"\n" + fn("q", "return 2")),
        ("FCALL", "q", "0"),
        ("FUNCTION", "LOAD", lib("empty", "return 1")),
        ("FUNCTION", "LOAD", lib("syntax", "local = 1")),
    ])


def test_register_function_errors(oracle):
    named = "redis.register_function{{{}}}"
    cb = "callback=function() return 1 end"
    oracle.run([("FUNCTION", "LOAD", lib("lib2", body)) for body in [
        "redis.register_function()",
        "redis.register_function('f1')",
        "redis.register_function('f1', function() return 1 end, {}, 'description', 'extra arg')",
        "redis.register_function(nil, function() return 1 end)",
        "redis.register_function('f1', 'not a function')",
        "redis.register_function('test\\0test', function() return 1 end)",
        "redis.register_function('', function() return 1 end)",
        "redis.register_function('f1', function() end)\nredis.register_function('f1', function() end)",
        named.format(f"function_name=function() return 1 end, {cb}"),
        named.format("function_name='f1', callback='bad'"),
        named.format(f"function_name='f1', {cb}, description=function() return 1 end"),
        named.format(f"function_name='f1', {cb}, some_unknown='unknown'"),
        named.format(f"[1]=1, function_name='f1', {cb}"),
        named.format(cb),
        named.format("function_name='f1', description='desc'"),
        named.format(f"function_name='f1', {cb}, flags='bad flags type'"),
        named.format(f"function_name='f1', {cb}, flags={{function() return 1 end}}"),
        named.format(f"function_name='f1', {cb}, flags={{'unknown'}}"),
    ]])
    oracle.run([
        # numbers are strings to Lua; flags stop at the first nil and ignore case
        ("FUNCTION", "LOAD", lib("l1", "redis.register_function(1, function() return 'one' end)")),
        ("FCALL", "1", "0"),
        ("FUNCTION", "LOAD", lib("l2", named.format(
            f"function_name='f2', {cb}, flags={{'NO-WRITES', 'allow-oom', nil, 'bad'}}, description=42"))),
        ("FUNCTION", "LIST", "LIBRARYNAME", "l2"),
    ])


def test_load_time_sandbox(oracle):
    oracle.run([("FUNCTION", "LOAD", lib("lib2", body)) for body in [
        "return math.random()",
        "return redis.call('ping')",
        "return redis.setresp(3)",
        "return redis.set_repl(redis.REPL_NONE)",
        "redis.math.random()",
        "redis.redis.call('ping')",
        "a = 1",
        "mt = getmetatable(_G)",
        "local s = string",
        "error('boom')",
        "local x = nil + 1",
        "redis.log()",
        "redis.log('x', 'y')",
        "local a = 1\nwhile 1 do a = a + 1 end",  # FUNCTION LOAD timeout (500 ms)
    ]])
    oracle.run([
        ("FUNCTION", "LOAD", lib(
            "lib1",
            "local version = redis.REDIS_VERSION_NUM",
            "redis.log(redis.LOG_WARNING, 'loading lib1')",
            "local lib = redis",
            "lib.register_function('f1', function() lib.redis = redis end)",
            "lib.register_function('f2', function() lib.register_function('x', function() end) end)",
            "redis.register_function('f3', function() redis.register_function('y', function() end) end)",
            "redis.register_function('f4', function() return {version, redis.REDIS_VERSION} end)",
            "redis.register_function('f5', function() mt = getmetatable(_G) end)",
            "redis.register_function('f6', function() return KEYS end)",
            "local function ping() return redis.call('ping') end",
            "redis.register_function('f7', function() return ping() end)",
        )),
        *[("FCALL", f"f{i}", "0") for i in range(1, 8)],
    ])


# -- FCALL ----------------------------------------------------------------------------------------


def test_fcall_arguments_and_errors(oracle):
    oracle.run([
        ("FUNCTION", "LOAD", lib(
            "t",
            fn("echo", "return {keys, args, #keys, #args}"),
            fn("set", "return redis.call('set', keys[1], args[1])"),
            fn("err", "error('bad')"),
            fn("errt", "error({err='MYERR custom'})"),
            fn("nosuch", "return redis.call('nosuch')"),
            fn("pc", "return {pcall(function() error('x') end)}"),
            fn("reply", "return redis.error_reply('CODE msg')"),
            fn("resp3", "redis.setresp(3); return redis.call('hgetall', keys[1])"),
            fn("multi", "return 1, 2"),
        )),
        ("FCALL", "echo", "2", "k1", "k2", "a1"),
        ("FCALL", "echo", "0"),
        ("FCALL_RO", "echo", "1", "k"),
        ("FCALL", "set", "1", "key", "val"),
        ("GET", "key"),
        ("HSET", "h", "f", "v"),
        ("FCALL", "resp3", "1", "h"),
        ("FCALL", "err", "0"),
        ("FCALL", "errt", "0"),
        ("FCALL", "nosuch", "0"),
        ("FCALL", "pc", "0"),
        ("FCALL", "reply", "0"),
        ("FCALL", "multi", "0"),
        ("FCALL", "missing", "0"),
        ("FCALL", "echo", "bad_arg"),
        ("FCALL", "echo", "10", "key1"),
        ("FCALL", "echo", "-1", "key1"),
        ("FCALL", "missing", "bad_arg"),
        ("FCALL", "echo"),
        ("FCALL_RO", "echo"),
        ("COMMAND", "GETKEYS", "FCALL", "echo", "1", "x", "foo"),
        ("COMMAND", "GETKEYS", "FCALL_RO", "echo", "2", "x", "y", "foo"),
        ("COMMAND", "INFO", "FCALL", "FCALL_RO"),
        ("MULTI",),
        ("FCALL", "set", "1", "key", "in-multi"),
        ("FCALL", "echo", "0"),
        ("EXEC",),
    ])


def test_flags_and_read_only(oracle):
    oracle.run([
        ("FUNCTION", "LOAD", lib(
            "t",
            fn("w", "return redis.call('set', 'x', '1')"),
            "redis.register_function{function_name='nw', callback=function() return redis.call('set', 'x', 1) end,"
            " flags={'no-writes'}}",
            "redis.register_function{function_name='ro', callback=function() return redis.call('get', 'x') end,"
            " flags={'no-writes'}}",
            "redis.register_function{function_name='pub', callback=function() return redis.call('publish', 'c', 'm')"
            " end, flags={'no-writes'}}",
        )),
        ("FCALL_RO", "w", "0"),
        ("FCALL", "nw", "0"),
        ("FCALL_RO", "nw", "0"),
        ("FCALL", "w", "0"),
        ("FCALL", "ro", "0"),
        ("FCALL_RO", "ro", "0"),
        ("FCALL", "pub", "0"),
    ])


def test_oom_rules(oracle):
    try:
        oracle.run([
            ("FUNCTION", "LOAD", lib(
                "t",
                fn("w", "return redis.call('set', keys[1], '1')"),
                "redis.register_function{function_name='nw', callback=function() return 'hello' end,"
                " flags={'no-writes'}}",
                "redis.register_function{function_name='ao', callback=function(k) return redis.call('set', k[1], '1')"
                " end, flags={'allow-oom'}}",
            )),
            ("FUNCTION", "DUMP"),
            ("CONFIG", "SET", "maxmemory", "1"),
            ("FCALL", "w", "1", "k"),
            ("FCALL_RO", "w", "1", "k"),
            ("FCALL", "nw", "1", "k"),
            ("FCALL_RO", "nw", "1", "k"),
            ("FCALL", "ao", "1", "x"),
            ("GET", "x"),
            ("FCALL", "missing", "0"),
            ("EVAL", "#!lua\nreturn 1", "0"),
            ("EVAL", "#!lua flags=no-writes\nreturn 1", "0"),
            ("EVAL", "#!lua flags=allow-oom\nreturn redis.call('set', 'y', '2')", "0"),
            ("MULTI",),
            ("FCALL", "nw", "0"),
            ("EXEC",),
            ("MULTI",),
            ("FCALL", "w", "1", "k"),
            ("EXEC",),
            ("FUNCTION", "LOAD", lib("t2", fn("f2", "return 1"))),
            ("FUNCTION", "FLUSH"),
        ])
    finally:
        oracle.check("CONFIG", "SET", "maxmemory", "0")


# -- LIST / STATS / DELETE / FLUSH ------------------------------------------------------------------


def test_list_stats_delete_flush(oracle):
    oracle.run([
        ("FUNCTION", "LIST"),
        ("FUNCTION", "STATS"),
        ("FUNCTION", "LOAD", lib(
            "library1",
            "redis.register_function{function_name='f6', callback=function() return 7 end, description='desc',"
            " flags={'allow-stale', 'no-cluster', 'allow-cross-slot-keys', 'no-writes', 'allow-oom'}}",
        )),
        ("FUNCTION", "LIST"),
        ("FUNCTION", "LIST", "WITHCODE"),
        ("FUNCTION", "LIST", "LIBRARYNAME", "LIB*", "WITHCODE"),
        ("FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "nomatch"),
        ("FUNCTION", "LIST", "bad_argument"),
        ("FUNCTION", "LIST", "libraryname"),
        ("FUNCTION", "LIST", "withcode", "withcode"),
        ("FUNCTION", "LIST", "withcode", "libraryname", "foo", "libraryname", "foo"),
        ("FUNCTION", "LOAD", lib("test2", fn("f1", "return 1"), fn("f2", "return 2"))),
        ("FUNCTION", "STATS"),
        ("FUNCTION", "LOAD", lib("test2", fn("f3", "return 1"))),
        ("FUNCTION", "STATS"),
        ("FUNCTION", "DELETE", "library1"),
        ("FUNCTION", "DELETE", "library1"),
        ("FUNCTION", "DELETE", "TEST2"),
        ("FUNCTION", "STATS"),
        ("SET", "k", "v"),
        ("FLUSHALL",),
        ("FLUSHDB",),
        ("FUNCTION", "STATS"),  # FLUSHALL and FLUSHDB keep the libraries
        ("FUNCTION", "FLUSH", "bad_arg"),
        ("FUNCTION", "FLUSH", "sync", "extra_arg"),
        ("FUNCTION", "FLUSH", "ASYNC"),
        ("FUNCTION", "STATS"),
        ("FUNCTION", "LOAD", lib("test2", fn("f1", "return 1"))),
        ("FUNCTION", "FLUSH", "sync"),
        ("FUNCTION", "LIST"),
        ("FUNCTION", "KILL"),
        ("FUNCTION", "KILL", "x"),
        ("FUNCTION", "DUMP", "x"),
        ("FUNCTION", "DELETE"),
        ("FUNCTION", "bad_subcommand"),
        ("FUNCTION",),
        ("FUNCTION", "HELP"),
        ("FUNCTION", "HELP", "x"),
    ])
    # Redis lists a container's subcommands in hash order: compare them one by one.
    for sub in ("LOAD", "DELETE", "FLUSH", "LIST", "DUMP", "RESTORE", "STATS", "KILL", "HELP"):
        oracle.check("COMMAND", "INFO", f"FUNCTION|{sub}")
        oracle.check("COMMAND", "DOCS", f"FUNCTION|{sub}")


def _library_set(reply: list) -> dict:
    """FUNCTION LIST as {library: (engine, {function: (description, flags)}, code)}."""
    out = {}
    for entry in reply:
        entry = dict(entry) if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2], strict=True))
        funcs = {}
        for f in entry[b"functions"]:
            f = dict(f) if isinstance(f, dict) else dict(zip(f[::2], f[1::2], strict=True))
            funcs[f[b"name"]] = (f[b"description"], sorted(f[b"flags"]))
        out[entry[b"library_name"]] = (entry[b"engine"], funcs, entry.get(b"library_code"))
    return out


def test_larger_sets_match_as_sets(rill_server, oracle_server):
    libs = [
        lib("a1", fn("fa1", "return 1"), fn("fa2", "return 2"), fn("fa3", "return 3")),
        lib("b2", "redis.register_function{function_name='fb', callback=function() end, flags={'no-writes'}}",
            fn("FB2", "return 'x'")),
        lib("c3", fn("c5", "return 1"), fn("C5", "return 2")),  # same name but for case: both counted
    ]
    replies = []
    for port in (rill_server.port, oracle_server.port):
        r = redis_py.Redis(port=port)
        r.function_flush()
        for code in libs:
            r.function_load(code)
        replies.append((_library_set(r.function_list(withcode=True)), r.function_stats(), r.info("memory")))
        r.function_flush()
        r.close()
    (mine, my_stats, my_mem), (theirs, their_stats, their_mem) = replies
    assert mine == theirs
    assert my_stats == their_stats
    for field in ("number_of_functions", "number_of_libraries", "used_memory_functions"):
        assert my_mem[field] == their_mem[field], field


# -- DUMP / RESTORE ---------------------------------------------------------------------------------


def _bulk(reply: bytes) -> bytes:
    head, _, rest = reply.partition(b"\r\n")
    return rest[: int(head[1:])]


def test_dump_is_byte_identical_and_restore_matches(oracle):
    code = lib("test", fn("test", "return 'hello'"))
    oracle.check("FUNCTION", "DUMP")
    oracle.check("FUNCTION", "LOAD", code)
    payload = _bulk(oracle.check("FUNCTION", "DUMP"))
    long_code = lib("long", fn("long", "return '" + "x" * 300 + "'"))  # compressed as Redis does
    oracle.check("FUNCTION", "DELETE", "test")
    oracle.check("FUNCTION", "LOAD", long_code)
    oracle.check("FUNCTION", "DUMP")
    oracle.check("FUNCTION", "LOAD", code)
    # Two libraries: Redis dumps them in hash order, so both servers restore rill's payload.
    both = _bulk(oracle.rill.call("FUNCTION", "DUMP"))
    oracle.run([
        ("FUNCTION", "DELETE", "long"),
        ("FUNCTION", "RESTORE", payload),  # APPEND by default: the library exists
        ("FUNCTION", "RESTORE", payload, "APPEND"),
        ("FUNCTION", "RESTORE", payload, "REPLACE"),
        ("FUNCTION", "DELETE", "test"),
        ("FUNCTION", "LOAD", lib("other", fn("TEST", "return 'clash'"))),
        ("FUNCTION", "RESTORE", payload),
        ("FUNCTION", "RESTORE", payload, "replace"),
        ("FUNCTION", "RESTORE", payload, "FLUSH"),
        ("FCALL", "test", "0"),
        ("FUNCTION", "LIST"),
        ("FUNCTION", "RESTORE", both, "REPLACE"),
        ("FCALL", "long", "0"),
        ("FUNCTION", "RESTORE", payload, "bad"),
        ("FUNCTION", "RESTORE", payload, "FLUSH", "extra"),
        ("FUNCTION", "RESTORE", "bad_payload"),
        ("FUNCTION", "RESTORE", payload[:-1] + bytes([payload[-1] ^ 1])),
        ("FUNCTION", "RESTORE", payload[:-10] + b"\x7f\x00" + payload[-8:]),
        ("FUNCTION", "RESTORE"),
        ("FUNCTION", "FLUSH"),
        ("FUNCTION", "DUMP"),
    ])


def test_restore_payload_errors(oracle):
    """Payloads built by hand: a non-function record, a truncated one, a bad library,
    a duplicate library, and the 7.0-rc FUNCTION record (which Redis 7.0 still reads)."""
    from rill.persistence.crc64 import crc64

    def payload(body: bytes) -> bytes:
        body += b"\x0a\x00"
        return body + crc64(body).to_bytes(8, "little")

    good = lib("rec", fn("rec", "return 'rec'")).encode()
    oracle.run([
        ("FUNCTION", "RESTORE", payload(b"\x00\x01k\x01v")),
        ("FUNCTION", "RESTORE", payload(b"\xf5\x40")),
        ("FUNCTION", "RESTORE", payload(b"\xf5\x0bno shebang!")),
        ("FUNCTION", "RESTORE", payload(b"\xf5" + bytes([len(good)]) + good + b"\xf5" + bytes([len(good)]) + good)),
        ("FUNCTION", "RESTORE", payload(b"\xf6\x02rc\x03LUA\x01\x04desc\x28redis.register_function('rc', "
                                        b"function() end)")),
        ("FUNCTION", "LIST", "WITHCODE"),
        ("FUNCTION", "RESTORE", payload(b"")),
    ])


def test_dump_payloads_move_both_ways(rill_server, oracle_server):
    rill, redis = RawClient(rill_server.port), RawClient(oracle_server.port)
    try:
        for src, dst in ((rill, redis), (redis, rill)):
            for c in (src, dst):
                c.call("FUNCTION", "FLUSH")
            src.call("FUNCTION", "LOAD", lib("moved", fn("moved", "return {keys[1], args[1]}")))
            src.call("FUNCTION", "LOAD", lib("big", fn("big", "return '" + "y" * 500 + "'")))
            payload = _bulk(src.call("FUNCTION", "DUMP"))
            assert dst.call("FUNCTION", "RESTORE", payload) == b"+OK\r\n"
            assert dst.call("FCALL", "moved", "1", "k", "a") == src.call("FCALL", "moved", "1", "k", "a")
            assert dst.call("FCALL", "big", "0") == src.call("FCALL", "big", "0")
            assert _bulk(dst.call("FUNCTION", "DUMP")) != b""
    finally:
        for c in (rill, redis):
            c.call("FUNCTION", "FLUSH")
            c.close()


# -- errors, stats, MONITOR -------------------------------------------------------------------------


def test_error_stats(oracle):
    oracle.check("FUNCTION", "LOAD", lib(
        "t", fn("sel", "return redis.call('select', 99)"), fn("psel", "return redis.pcall('select', 99)"),
        fn("err", "error('x')"), fn("reply", "return redis.error_reply('MY_ERR x')"),
    ))
    for args in (("sel", "0"), ("psel", "0"), ("err", "0"), ("reply", "0"), ("missing", "0"), ("sel", "x")):
        oracle.check("CONFIG", "RESETSTAT")
        oracle.check("FCALL", *args)
        mine, theirs = (_stats(c) for c in (oracle.rill, oracle.oracle))
        assert mine == theirs, args


def _stats(client) -> dict:
    info = client.call("INFO", "ALL")
    if info.startswith(b"="):
        info = info.split(b":", 1)[1]
    out = {}
    for line in info.decode().split("\r\n"):
        if line.startswith(("errorstat_", "total_error_replies", "cmdstat_fcall", "cmdstat_select")):
            key, value = line.split(":", 1)
            out[key] = ",".join(p for p in value.split(",") if not p.startswith("usec"))
    return out


def test_monitor_sees_fcall_before_its_commands(rill_server, oracle_server):
    def watch(port: int) -> list[bytes]:
        c, m = RawClient(port), RawClient(port)
        c.call("FUNCTION", "LOAD", "REPLACE", lib("mon", fn("mon", "return redis.call('set', keys[1], 'v')")))
        m.call("MONITOR")
        c.call("FCALL", "mon", "1", "mk")
        lines = [m.read_reply().split(b" ", 3)[-1] for _ in range(2)]
        c.call("FUNCTION", "DELETE", "mon")
        c.close()
        m.close()
        return lines

    assert watch(rill_server.port) == watch(oracle_server.port)


# -- busy functions ---------------------------------------------------------------------------------

_SPIN = lib(
    "busy",
    fn("spin", "local a = 1 while true do a = a + 1 end"),
    fn("wspin", "redis.call('set', keys[1], '1') while true do end"),
)


def _until_busy(c: RawClient) -> None:
    """Until the script another client started is past busy-reply-threshold, which the
    server shows by answering ``c`` -BUSY (a PING read before the script's command gets
    +PONG, and is asked again); no fixed sleep has to outlast the threshold."""
    wait_until(lambda: c.call("PING").startswith(b"-BUSY"))


def _busy_transcript(port: int) -> list[bytes]:
    """A function past busy-reply-threshold: BUSY naming FUNCTION KILL, FUNCTION STATS
    showing it, SCRIPT KILL refused, FUNCTION KILL stopping it; then an EVAL that
    FUNCTION KILL may not stop; a function that wrote cannot be killed."""
    a, b = RawClient(port), RawClient(port)
    t = [b.call("CONFIG", "SET", "busy-reply-threshold", "100"), b.call("FUNCTION", "LOAD", "REPLACE", _SPIN)]
    a.send_raw(encode_command(["FCALL", "spin", "0"]))
    _until_busy(b)
    stats = re.sub(rb"duration_ms\r\n:\d+", b"duration_ms\r\n:N", b.call("FUNCTION", "STATS"))
    t += [b.call("PING"), stats, b.call("SCRIPT", "KILL"), b.call("SHUTDOWN"), b.call("MULTI"),
          b.call("GET", "k"), b.call("EXEC"), b.call("FUNCTION", "KILL"), a.read_reply(), b.call("PING"),
          b.call("FUNCTION", "KILL")]
    a.send_raw(encode_command(["EVAL", "while true do end", "0"]))
    _until_busy(b)
    t += [b.call("FUNCTION", "KILL"), b.call("FUNCTION", "STATS"), b.call("SCRIPT", "KILL"), a.read_reply()]
    a.send_raw(encode_command(["FCALL", "wspin", "1", "x"]))
    _until_busy(b)
    t += [b.call("FUNCTION", "KILL"), b.call("SCRIPT", "KILL"), b.call("GET", "x")]
    b.send_raw(b"SHUTDOWN NOSAVE\r\n")
    t.append(b.closed_by_peer(5))
    a.close()
    b.close()
    return t


def test_busy_function_side_by_side():
    require_tool("redis-server")
    mine, theirs = start_rill(), start_redis()
    try:
        assert _busy_transcript(mine.port) == _busy_transcript(theirs.port)
        assert mine.proc.wait(10) == 0 and theirs.proc.wait(10) == 0
        assert "using the FUNCTION KILL command. Script name is: spin." in mine.log()
    finally:
        mine.stop()
        theirs.stop()


# -- propagation ------------------------------------------------------------------------------------

AOF_SCRIPT = [
    ("FUNCTION", "LOAD", lib("prop", fn("w", "redis.call('set', keys[1], args[1]); redis.call('incr', 'n')"),
                             fn("r", "return redis.call('get', keys[1])"), fn("one", "redis.call('set', 'one', 1)"))),
    ("FCALL", "r", "1", "k"),
    ("FCALL", "w", "1", "k", "v"),
    ("FCALL", "one", "0"),
    ("FCALL_RO", "r", "1", "k"),
    ("FUNCTION", "LOAD", lib("prop", fn("x", "return 1"))),  # refused: nothing to propagate
    ("FUNCTION", "LOAD", "REPLACE", lib("prop", fn("w", "redis.call('select', 2); redis.call('set', 'd2', 1)"))),
    ("FCALL", "w", "0"),
    ("FUNCTION", "DELETE", "prop"),
    ("FUNCTION", "DELETE", "prop"),
    ("FUNCTION", "LOAD", lib("again", fn("again", "return 1"))),
    ("FUNCTION", "FLUSH", "ASYNC"),
    ("MULTI",),
    ("FUNCTION", "LOAD", lib("m", fn("m", "redis.call('incr', 'm')"))),
    ("FCALL", "m", "0"),
    ("EXEC",),
]


def test_propagation_matches_redis_aof(inproc, tmp_path):
    """redis-server with appendonly yes writes exactly what rill hands its propagation
    feeds: FUNCTION LOAD/DELETE/FLUSH as sent, FCALL's writes as effects."""

    require_tool("redis-server")
    dumped: list[bytes] = []

    def restore_own_dump(cli: RawClient) -> None:
        dumped.append(_bulk(cli.call("FUNCTION", "DUMP")))
        cli.call("FUNCTION", "RESTORE", dumped[0], "REPLACE")

    theirs = redis_aof_commands(str(tmp_path), AOF_SCRIPT, after=restore_own_dump)
    server, c, effects = inproc
    for args in AOF_SCRIPT:
        _run(server, c, *args)
    _run(server, c, "FUNCTION", "RESTORE", dumped[0], "REPLACE")
    assert theirs[0] == [b"SELECT", b"0"]
    assert effects_as_aof(effects) == theirs[1:]


# -- RDB, DEBUG RELOAD, AOF -------------------------------------------------------------------------

_PERSISTED = [
    lib("saved", fn("saved", "return {'saved', keys[1]}")),
    lib("flagged", "redis.register_function{function_name='ro', callback=function() return 'ro' end,"
                   " flags={'no-writes'}, description='read only'}"),
    lib("long", fn("long", "return '" + "z" * 400 + "'")),
]


def _function_state(c: RawClient) -> tuple:
    c.call("HELLO", "3")
    listing = c.call("FUNCTION", "LIST", "LIBRARYNAME", "flagged", "WITHCODE")
    calls = (c.call("FCALL", "saved", "1", "k"), c.call("FCALL_RO", "ro", "0"), c.call("FCALL", "long", "0"))
    stats = c.call("FUNCTION", "STATS")
    c.call("HELLO", "2")
    return listing, calls, stats


def _load_all(c: RawClient) -> None:
    for code in _PERSISTED:
        assert not c.call("FUNCTION", "LOAD", code).startswith(b"-")
    c.call("SET", "key", "value")


def test_rill_rdb_with_functions_loads_in_redis(tmp_path):
    require_tool("redis-server")
    workdir = str(tmp_path)
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        _load_all(c)
        mine = _function_state(c)
        assert c.call("SAVE") == b"+OK\r\n"
        c.close()
    with redis_in(workdir, "--dbfilename", "dump.rdb") as redis:
        r = RawClient(redis.port)
        assert _function_state(r) == mine
        assert r.call("GET", "key") == b"$5\r\nvalue\r\n"
        r.close()
    with rill_in(workdir) as srv:  # and back in rill at start-up
        c = RawClient(srv.port)
        assert _function_state(c) == mine
        c.close()


def test_redis_rdb_with_functions_loads_in_rill(tmp_path):
    require_tool("redis-server")
    workdir = str(tmp_path)
    with redis_in(workdir, "--dbfilename", "dump.rdb") as redis:
        r = RawClient(redis.port)
        _load_all(r)
        theirs = _function_state(r)
        assert r.call("SAVE") == b"+OK\r\n"
        r.close()
    with rill_in(workdir) as srv:
        c = RawClient(srv.port)
        assert _function_state(c) == theirs
        c.close()


def test_rill_refuses_an_rdb_whose_library_does_not_load(tmp_path):
    """rdbFunctionLoad failing stops the load (and start-up), as in Redis."""
    from rill.persistence import rdb

    path = os.path.join(str(tmp_path), "dump.rdb")
    with open(path, "wb") as f:
        rdb.save_file(f, iter(()), rdb.SaveOptions(functions=[lib("bad", "return 1").encode()]))
    with pytest.raises(RuntimeError, match="No functions registered"):
        start_rill(workdir=str(tmp_path))


def test_debug_reload_keeps_functions(oracle):
    oracle.run([
        ("FUNCTION", "LOAD", lib("test", fn("test", "return 'hello'"))),
        ("DEBUG", "RELOAD"),
        ("FCALL", "test", "0"),
        ("FUNCTION", "STATS"),
        ("DEBUG", "RELOAD", "NOFLUSH"),
        ("DEBUG", "RELOAD", "NOFLUSH", "MERGE"),
        ("FUNCTION", "LIST"),
        ("FUNCTION", "DELETE", "test"),
        ("SET", "x", "1"),
        ("FUNCTION", "LOAD", lib("test1", fn("test1", "return 'hello1'"))),
        ("DEBUG", "RELOAD"),
        ("FUNCTION", "LOAD", lib("test2", fn("test2", "return 'hello2'"))),
        ("DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"),
        ("FCALL", "test1", "0"),
        ("FCALL", "test2", "0"),
        ("GET", "x"),
    ])


@pytest.mark.parametrize("preamble", ["yes", "no"])
def test_aof_keeps_functions(tmp_path, preamble):
    """Loads and deletes reach the AOF as sent; a rewrite's base carries the libraries
    (FUNCTION LOAD commands without the RDB preamble); rill and redis-server replay
    each other's directories the same way."""
    require_tool("redis-server")
    states = []
    for make in (rill_in, redis_in):
        workdir = str(tmp_path / make.__name__)
        os.makedirs(workdir)
        with make(workdir, "--appendonly", "yes", "--aof-use-rdb-preamble", preamble) as srv:
            c = RawClient(srv.port)
            _load_all(c)
            c.call("FUNCTION", "LOAD", lib("gone", fn("gone", "return 1")))
            c.call("BGREWRITEAOF")
            wait_rewrite(c)
            c.call("FUNCTION", "DELETE", "gone")
            c.call("FUNCTION", "LOAD", lib("after", fn("after", "return 'after'")))
            state = _function_state(c)
            c.close()
        base = next(f for f in os.listdir(os.path.join(workdir, "appendonlydir")) if ".base." in f)
        with open(os.path.join(workdir, "appendonlydir", base), "rb") as f:
            head = f.read(64)
        assert head.startswith(b"REDIS" if preamble == "yes" else b"*3\r\n$8\r\nFUNCTION\r\n$4\r\nLOAD\r\n")
        states.append((workdir, state))
    for workdir, state in states:
        for make in (rill_in, redis_in):  # each directory replayed by both servers
            other = str(tmp_path / f"{make.__name__}-{os.path.basename(workdir)}")
            import shutil

            shutil.copytree(workdir, other)
            with make(other, "--appendonly", "yes") as srv:
                c = RawClient(srv.port)
                assert _function_state(c) == state
                assert c.call("FCALL", "after", "0") == b"$5\r\nafter\r\n"
                assert c.call("FCALL", "gone", "0").startswith(b"-ERR Function not found")
                c.close()


# -- INFO and redis-py ------------------------------------------------------------------------------


def test_info_memory_fields_match_redis(rill_server, oracle_server):
    fields = ("number_of_functions", "number_of_libraries", "used_memory_functions")
    infos = []
    for port in (rill_server.port, oracle_server.port):
        r = redis_py.Redis(port=port)
        r.function_flush()
        before = r.info("memory")
        r.function_load(lib("mem", fn("f1", "return 1"), "redis.register_function{function_name='f2',"
                            " callback=function() end, description='a description'}"))
        after = r.info("memory")
        r.function_flush()
        r.close()
        assert after["used_memory_vm_functions"] > 0
        assert after["used_memory_vm_total"] == after["used_memory_vm_eval"] + after["used_memory_vm_functions"]
        assert after["used_memory_scripts"] == after["used_memory_scripts_eval"] + after["used_memory_functions"]
        assert after["used_memory_lua"] == after["used_memory_vm_eval"]
        infos.append(([before[f] for f in fields], [after[f] for f in fields]))
    assert infos[0] == infos[1]


def test_redis_py_function_api(r):
    r.function_flush()
    code = lib("mylib", "redis.register_function('my_set', function(keys, args) "
               "return redis.call('SET', keys[1], args[1]) end)",
               "redis.register_function{function_name='my_get', callback=function(keys) "
               "return redis.call('GET', keys[1]) end, flags={'no-writes'}}")
    assert r.function_load(code) == b"mylib"
    assert r.fcall("my_set", 1, "k", "v") == b"OK"
    assert r.fcall_ro("my_get", 1, "k") == b"v"
    with pytest.raises(redis_py.ResponseError, match="Can not execute a script with write flag"):
        r.fcall_ro("my_set", 1, "k", "w")
    listing = r.function_list(library="my*", withcode=True)
    assert listing[0][1] == b"mylib" and listing[0][-1] == code.encode()
    payload = r.function_dump()
    assert r.function_delete("mylib")
    with pytest.raises(redis_py.ResponseError, match="Function not found"):
        r.fcall("my_get", 1, "k")
    assert r.function_restore(payload)
    assert r.function_load(code, replace=True) == b"mylib"
    assert r.function_stats()[b"engines"] == {b"LUA": {b"libraries_count": 1, b"functions_count": 2}}
    assert r.function_flush("SYNC")
    assert r.function_list() == []


def test_reply_batched_with_a_busy_call_still_leaves(rill_server):
    """A reply batched in the loop iteration where a function (or script) starts is
    written once it is busy, as Redis's beforeSleep would: its client can then ask
    for FUNCTION KILL instead of waiting for that reply forever."""
    r, rd = RawClient(rill_server.port, timeout=5), RawClient(rill_server.port, timeout=5)
    try:
        r.call("CONFIG", "SET", "busy-reply-threshold", "10")
        r.call("FUNCTION", "LOAD", "REPLACE", lib("spin", fn("spin", "while 1 do redis.call('ping') end")))
        for _ in range(10):
            # The two requests land together: PING's reply is batched, then FCALL spins.
            r.send_raw(encode_command(["PING"]))
            rd.send_raw(encode_command(["FCALL", "spin", "0"]))
            assert r.read_reply() in (b"+PONG\r\n", b"-BUSY Redis is busy running a script. You can only call "
                                      b"FUNCTION KILL or SHUTDOWN NOSAVE.\r\n")
            while not r.call("PING").startswith(b"-BUSY"):
                time.sleep(0.01)
            assert r.call("FUNCTION", "KILL") == b"+OK\r\n"
            assert rd.read_reply().startswith(b"-ERR Script killed by user")
    finally:
        r.call("CONFIG", "SET", "busy-reply-threshold", "5000")
        r.call("FUNCTION", "FLUSH")
        r.close()
        rd.close()


def test_debug_set_disable_deny_scripts(oracle):
    """Redis's own tests let scripts run noscript commands (DEBUG PROTOCOL) this way."""
    try:
        oracle.run([
            ("FUNCTION", "LOAD", lib("dbg", fn("bignum", "redis.setresp(3); return redis.call('debug', 'protocol', 'bignum')"),
                                     fn("attrib", "redis.setresp(3); return redis.call('debug', 'protocol', 'attrib')"))),
            ("FCALL", "bignum", "0"),
            ("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"),
            ("FCALL", "bignum", "0"),
            ("FCALL", "attrib", "0"),
            ("EVAL", "return redis.call('debug', 'protocol', 'double')", "0"),
        ])
    finally:
        oracle.check("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "0")


def test_debug_object_shows_a_key_past_its_expiry(raw):
    """DEBUG OBJECT finds the key as Redis's dictFind does, expired or not."""
    try:
        raw.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        raw.call("SET", "key", "value", "PX", "1")
        time.sleep(0.01)
        assert raw.call("DEBUG", "OBJECT", "key").startswith(b"+Value at:")
        assert raw.call("EXISTS", "key") == b":0\r\n"
        assert raw.call("DEBUG", "OBJECT", "key") == b"-ERR no such key\r\n"
    finally:
        raw.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_functions_on_a_stale_replica_side_by_side():
    """replica-serve-stale-data no with the master unreachable: FCALL of a function
    without allow-stale gets MASTERDOWN; one with it runs, but inside it only commands
    flagged stale do (a GET fails, INFO runs)."""
    from tests.support import free_port

    nowhere = str(free_port())
    code = lib(
        "stale",
        "redis.register_function{function_name='plain', callback=function() return 'hi' end, flags={'no-writes'}}",
        "redis.register_function{function_name='bare', callback=function() return 'hi' end,"
        " flags={'allow-stale', 'no-writes'}}",
        "redis.register_function{function_name='get', callback=function() return redis.call('get', 'x') end,"
        " flags={'allow-stale', 'no-writes'}}",
        "redis.register_function{function_name='pget', callback=function() return redis.pcall('get', 'x') end,"
        " flags={'allow-stale', 'no-writes'}}",
        "redis.register_function{function_name='info', callback=function()"
        " return string.sub(redis.call('info', 'server'), 1, 8) end, flags={'allow-stale', 'no-writes'}}",
    )
    with start_rill() as rill, start_redis() as twin:
        mine, theirs = RawClient(rill.port), RawClient(twin.port)
        for c in (mine, theirs):
            assert c.call("FUNCTION", "LOAD", code) == b"$5\r\nstale\r\n"
            c.call("CONFIG", "SET", "replica-serve-stale-data", "no")
            c.call("REPLICAOF", "127.0.0.1", nowhere)
        for args in [("FCALL", "plain", "0"), ("FCALL_RO", "plain", "0"), ("FCALL", "bare", "0"),
                     ("FCALL", "get", "0"), ("FCALL", "pget", "0"), ("FCALL", "info", "0"),
                     ("INFO", "errorstats"),
                     ("CONFIG", "SET", "replica-serve-stale-data", "yes"), ("FCALL", "plain", "0"),
                     ("FCALL", "get", "0")]:
            a, b = mine.call(*args), theirs.call(*args)
            assert a == b, f"{args}: rill {a!r} != redis {b!r}"
        for c in (mine, theirs):
            c.call("REPLICAOF", "NO", "ONE")
            c.close()
