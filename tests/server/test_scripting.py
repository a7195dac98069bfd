"""Lua scripting side by side with redis-server 7.0.15 (RESP2 and RESP3)."""

from __future__ import annotations

import sys

import pytest

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
    """The side-by-side checker, once per protocol version."""
    return request.getfixturevalue("sbs" if request.param == "resp2" else "sbs3")


@pytest.fixture(autouse=True)
def _flush_scripts(request):
    """Every test starts with empty script caches on both servers."""
    for name in ("sbs", "sbs3"):
        if name in request.fixturenames:
            request.getfixturevalue(name).check("SCRIPT", "FLUSH")


def E(body: str, *args: str) -> tuple:
    """EVAL ``body`` with no keys and ``args`` as ARGV."""
    return ("EVAL", body, "0", *args)


# -- Lua -> RESP --------------------------------------------------------------------------------


def test_lua_to_resp_conversions(oracle):
    oracle.run([
        E("return 'hello'"),
        E("return 100.5"),
        E("return -3.99"),
        E("return 1e20"),
        E("return 0/0"),
        E("return true"),
        E("return false"),
        E("return nil"),
        E("return {1,2,3,'ciao',{1,2}}"),
        E("return {1,2,nil,4}"),
        E("return {}"),
        E("return {ok='fine'}"),
        E("return {ok='a\\r\\nb'}"),
        E("return {err='My Error'}"),
        E("return {err='x\\ny'}"),
        E("return {err=''}"),
        E("return {1, {err='nested'}, {ok='st'}, true, false}"),
        E("return redis.error_reply('MY_ERR_CODE custom msg')"),
        E("return redis.error_reply('')"),
        E("return redis.error_reply('-X\\n')"),
        E("return redis.error_reply('NOSPACE')"),
        E("return redis.error_reply(1)"),
        E("return redis.status_reply('MY_OK_CODE custom msg')"),
        E("return redis.status_reply()"),
        E("return {double=3.5}"),
        E("return {big_number='123456789012345678901234567890'}"),
        E("return {verbatim_string={format='txt', string='hello'}}"),
        E("return {map={a=1}}"),
        E("return {set={a=true}}"),
        E("return {x=1, 2}"),
        E("return function() end"),
        E("return _G"),
        E("local a = {}; setmetatable(a, {__index=function() return 1 end}); return a"),
    ])


def test_resp3_mode_booleans_and_types(oracle):
    oracle.run([
        E("redis.setresp(3); return true"),
        E("redis.setresp(3); return false"),
        E("redis.setresp(3); return {double=1.5}"),
        E("redis.setresp(3); return {double=1/0}"),
        E("redis.setresp(3); return {big_number='1234567890123456789'}"),
        E("redis.setresp(3); return {verbatim_string={format='mkd', string='# hi'}}"),
        E("redis.setresp(3); return {map={k='v'}}"),
        E("redis.setresp(3); return {set={m=true}}"),
    ])


def test_recursive_table_hits_the_stack_limit(oracle):
    # ~8000 nested arrays: deeper than the test client's recursive reader goes by default.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(40000)
    try:
        mine, theirs = oracle.both("EVAL", "local a = {}; local b = {a}; a[1] = b; return a", "0")
    finally:
        sys.setrecursionlimit(limit)
    assert mine == theirs
    assert mine.endswith(b"-ERR reached lua stack limit\r\n")
    oracle.check("PING")


# -- RESP -> Lua --------------------------------------------------------------------------------


def test_resp_to_lua_conversions(oracle):
    oracle.run([
        ("SET", "s", "str"),
        ("RPUSH", "l", "a", "b", "c"),
        ("HSET", "h", "f", "v"),
        ("SADD", "set", "m"),
        ("ZADD", "z", "1.5", "a"),
        E("local r = redis.call('incr', 'n'); return {type(r), r}"),
        E("local r = redis.call('get', 's'); return {type(r), r}"),
        E("local r = redis.call('get', 'missing'); return {type(r), tostring(r)}"),
        E("return redis.call('lrange', 'l', 0, -1)"),
        E("local r = redis.call('set', 'x', 'y'); return {type(r), r.ok}"),
        E("local r = redis.pcall('incr', 's'); return {type(r), r.err}"),
        E("return redis.pcall('incr', 's')"),
        E("return redis.call('hgetall', 'h')"),
        E("return redis.call('zscore', 'z', 'a')"),
        E("return redis.call('blpop', 'l', 0)"),
        E("return redis.call('lpop', 'nolist')"),
        E("return redis.call('xread', 'COUNT', 1, 'STREAMS', 'nostream', '0')"),
    ])


def test_resp3_replies_inside_scripts(oracle):
    oracle.run([
        ("HSET", "h", "f", "v"),
        ("SADD", "set", "m"),
        ("ZADD", "z", "1.5", "a"),
        E("redis.setresp(3); return redis.call('hgetall', 'h')"),
        E("redis.setresp(3); local r = redis.call('hgetall', 'h'); return {type(r.map), r.map.f}"),
        E("redis.setresp(3); local r = redis.call('smembers', 'set'); return r.set.m"),
        E("redis.setresp(3); return redis.call('smembers', 'set')"),
        E("redis.setresp(3); local r = redis.call('zscore', 'z', 'a'); return {type(r), tostring(r.double)}"),
        E("redis.setresp(3); return redis.call('zscore', 'z', 'a')"),
        E("redis.setresp(3); local r = redis.call('get', 'missing'); return type(r)"),
        E("redis.setresp(3); return redis.call('exists', 'h')"),
        E("redis.setresp(2); return redis.call('hgetall', 'h')"),
    ])


def test_number_and_argument_conversions(oracle):
    oracle.run([
        E("return redis.call('set', 'n', 3.14159265358979)"),
        ("GET", "n"),
        E("redis.call('set', 'n', 1e20); return redis.call('get', 'n')"),
        E("redis.call('set', 'n', 12345678901234567); return redis.call('get', 'n')"),
        E("redis.call('set', 'n', '12345678901234567'); return redis.call('get', 'n')"),
        E("return redis.call('ping', true)"),
        E("return redis.call('ping', {})"),
        E("return redis.pcall('ping', {})"),
        E("return redis.call()"),
        E("return redis.pcall()"),
        E("local a = {}; for i=1,7990 do a[i] = 1 end; return redis.call('lpush', 'big', unpack(a))"),
    ])


def test_keys_and_argv(oracle):
    oracle.run([
        ("EVAL", "return {KEYS[1],KEYS[2],ARGV[1],ARGV[2]}", "2", "a", "b", "c", "d"),
        ("EVAL", "return {#KEYS, #ARGV}", "0"),
        ("EVAL", "KEYS[1] = 'changed'; return KEYS[1]", "1", "k"),
        ("EVAL", "KEYS = {}", "0"),
    ])


# -- errors -------------------------------------------------------------------------------------


def test_script_errors(oracle):
    oracle.run([
        ("SET", "s", "x"),
        E("return x"),
        E("x = 1"),
        E("function f() end"),
        E("error('boom')"),
        E("error({err='MY boom'})"),
        E("error({err='MY boom'}, 2)"),
        E("local a = nil + 1"),
        E("\n\nlocal a = nil + 1"),
        E("return redis.call('nosuch')"),
        E("return redis.call('incr', 'a', 'b')"),
        E("return redis.call('get')"),
        E("return redis.call('config')"),
        E("return redis.call('script', 'nosuch')"),
        E("return redis.call('incr', 's')"),
        E("redis.call('incr', 's')"),
        E("return redis.call('eval', 'return 1', 0)"),
        E("return redis.call('multi')"),
        E("return redis.call('subscribe', 'ch')"),
        E("syntax error here"),
        E("return 'unterminated"),
        E("return redis.sha1hex()"),
        E("return redis.setresp(4)"),
        E("redis.setresp()"),
        E("return redis.set_repl(9)"),
        E("redis.set_repl()"),
        E("redis.log(99, 'x')"),
        E("redis.log(redis.LOG_WARNING)"),
        E("redis.log('x', 'y')"),
        E("return math.random(0)"),
        E("return math.random('x')"),
        E("return math.random(1, 2, 3)"),
        E("return math.random(5, 1)"),
        E("math.randomseed()"),
        E("local t = {pcall(redis.call, 'nosuch')}; return t"),
        E("local ok, e = pcall(redis.call, 'incr', 's'); return e"),
        E("local ok, e = pcall(function() return foo end); return e"),
        E("local ok, e = pcall(error, {err='tbl'}); return e"),
        E("return {pcall(error, 'x')}"),
        E("return xpcall(function() redis.call('nosuch') end, function(e) return e end)"),
        E("local t = redis.pcall('nosuch'); return t['err']"),
    ])


def test_numkeys_and_evalsha_errors(oracle):
    oracle.run([
        ("EVAL", "return 1", "-1"),
        ("EVAL", "return 1", "2", "a"),
        ("EVAL", "return 1", "x"),
        ("EVAL", "return 1", "01"),
        ("EVAL", "return 1", "99999999999999999999"),
        ("EVALSHA", "abc", "0"),
        ("EVALSHA", "abc", "x"),
        ("EVALSHA", "0123456789012345678901234567890123456789", "0"),
        ("EVALSHA", "0123456789012345678901234567890123456789", "-1"),
        ("EVAL",),
        ("EVALSHA", "x"),
    ])


def test_sandbox(oracle):
    oracle.run([
        E("return loadfile"),
        E("return dofile"),
        E("return print"),
        E("return os"),
        E("return io"),
        E("return require"),
        E("return debug"),
        E("return {type(string), type(math), type(table), type(coroutine), type(redis)}"),
        E("return {type(tonumber), type(unpack), type(pcall), type(select), type(loadstring)}"),
        E("return string.foo"),
        E("string.foo = 1"),
        E("redis.call = function() return 1 end"),
        E("redis = function() return 1 end"),
        E("_G = {}"),
        E("_G.x = 1"),
        E("rawset(_G, 'a', 1)"),
        E("setmetatable(_G, {})"),
        E("local g = getmetatable(_G); g.__index = {}"),
        E("return rawget(_G, 'nosuch')"),
        E("return type(rawget(_G, 'redis'))"),
        E("return loadstring(string.dump(function() return 1 end))()"),
        E("return loadstring('return 7')()"),
        E("loadstring('y = 1')()"),
        E("return getfenv"),
        E("return setfenv"),
        E("return newproxy"),
        E("local n = 0; for k in pairs(redis) do n = n + 1 end; return n > 10"),
        E("return ('abc'):upper()"),
        E("getmetatable('').__index = {}"),
        E("return string.format('%d %s', 3, 'x')"),
        E("return table.concat({1, 2, 3}, ',')"),
        E("return math.floor(3.7)"),
        E("return tonumber('0x10')"),
        E("local c = coroutine.wrap(function() coroutine.yield(1) end); return c()"),
        E("return _VERSION"),
    ])


def test_redis_api_details(oracle):
    oracle.run([
        E("return redis.sha1hex('')"),
        E("return redis.sha1hex('Pizza & Mandolino')"),
        E("return redis.sha1hex(12)"),
        E("return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}"),
        E("return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}"),
        E("return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}"),
        E("return redis.replicate_commands()"),
        E("return redis.breakpoint()"),
        E("return redis.debug('x')"),
        E("redis.log(redis.LOG_DEBUG, 'hello', 1, {}); return 1"),
        E("redis.set_repl(redis.REPL_ALL); return 1"),
        E("math.randomseed(10); return {tostring(math.random()), math.random(10), math.random(5, 8)}"),
        E("math.randomseed(ARGV[1]); return tostring(math.random())", "20"),
    ])


def test_select_inside_script_stays_inside(oracle):
    oracle.run([
        ("SELECT", "1"),
        ("SET", "k", "db1"),
        E("return redis.call('get', 'k')"),
        E("redis.call('select', 2); redis.call('set', 'k', 'db2'); return redis.call('get', 'k')"),
        ("GET", "k"),
        ("SELECT", "2"),
        ("GET", "k"),
        E("return redis.call('select', 99)"),
        ("FLUSHALL",),
        ("SELECT", "0"),
    ])


# -- flags and read-only scripts ----------------------------------------------------------------


def test_shebang_flags_and_ro(oracle):
    oracle.run([
        E("#!lua\nreturn redis.call('set', 'a', 1)"),
        E("#!lua flags=no-writes\nreturn redis.call('set', 'a', 1)"),
        E("#!lua flags=no-writes\nreturn redis.call('get', 'a')"),
        E("#!lua flags=no-writes,allow-oom\nreturn 1"),
        E("#!lua flags=\nreturn 1"),
        E("#!lua flags=foo\nreturn 1"),
        E("#!lua flags=no-writes,\nreturn 1"),
        E("#!lua"),
        E("#!py\nreturn 1"),
        E("#!lua foo=bar\nreturn 1"),
        E("#!lua \"flags=no-writes\"\nreturn 1"),
        E("#!lua\nreturn x"),
        ("EVAL_RO", "return redis.call('get', 'a')", "1", "a"),
        ("EVAL_RO", "return redis.call('set', 'a', 2)", "1", "a"),
        ("EVAL_RO", "return redis.pcall('set', 'a', 2)", "1", "a"),
        ("EVAL_RO", "return redis.call('publish', 'ch', 'm')", "0"),
        ("EVAL_RO", "#!lua\nreturn 1", "0"),
        ("EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"),
        ("SCRIPT", "LOAD", "return redis.call('get', KEYS[1])"),
        ("EVALSHA_RO", "a0c38691e6f1e4cf4ba8e5c7e7a3d6b5d9a6f1b3", "0"),
        ("GET", "a"),
    ])
    sha = oracle.check("SCRIPT", "LOAD", "return redis.call('get', KEYS[1])").split(b"\r\n")[1].decode()
    oracle.check("EVALSHA_RO", sha, "1", "a")
    oracle.check("EVALSHA", sha.upper(), "1", "a")


# -- SCRIPT -------------------------------------------------------------------------------------


def test_script_subcommands(oracle):
    oracle.run([
        ("SCRIPT", "LOAD", "return 'loaded'"),
        ("SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8", "B534286061D4B9E4026607613B95C06C06015AE8", "nope"),
        ("EVALSHA", "b534286061d4b9e4026607613b95c06c06015ae8", "0"),
        ("SCRIPT", "LOAD", "syntax error"),
        ("SCRIPT", "LOAD", "#!lua flags=bad\nreturn 1"),
        ("SCRIPT", "FLUSH"),
        ("SCRIPT", "EXISTS", "b534286061d4b9e4026607613b95c06c06015ae8"),
        ("EVAL", "return 1", "0"),
        ("SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"),
        ("SCRIPT", "FLUSH", "ASYNC"),
        ("SCRIPT", "FLUSH", "SYNC"),
        ("SCRIPT", "FLUSH", "bad"),
        ("SCRIPT", "FLUSH", "sync", "extra"),
        ("SCRIPT", "KILL"),
        ("SCRIPT", "HELP"),
        ("SCRIPT", "NOSUCH"),
        ("SCRIPT", "LOAD"),
        ("SCRIPT", "EXISTS"),
    ])


def test_eval_inside_multi(oracle):
    oracle.run([
        ("MULTI",),
        E("return redis.call('incr', 'c')"),
        E("return redis.call('incr', 'c')"),
        ("EXEC",),
        ("WATCH", "w"),
        E("return redis.call('set', 'w', 1)"),
        ("MULTI",),
        ("PING",),
        ("EXEC",),
    ])


def test_error_stats(oracle):
    """A failed redis.call counts once, where it failed; the script's reply is not counted again."""
    for body, args in [
        ("return redis.call('select', 99)", ()),
        ("local t = redis.pcall('select', 99); return 1", ()),
        ("return redis.pcall('select', 99)", ()),
        ("return redis.call('nosuch')", ()),
        ("return redis.error_reply('MY_ERR_CODE custom msg')", ()),
        ("error('x')", ()),
    ]:
        oracle.check("CONFIG", "RESETSTAT")
        oracle.check("EVAL", body, "0", *args)
        mine, theirs = (_stats(c) for c in (oracle.rill, oracle.oracle))
        assert mine == theirs, body


def _stats(client) -> dict:
    info = client.call("INFO", "ALL")
    if info.startswith(b"="):
        info = info.split(b":", 1)[1]
    out = {}
    for line in info.decode().split("\r\n"):
        if line.startswith(("errorstat_", "total_error_replies")) or (
            line.startswith("cmdstat_") and line.split(":")[0] in ("cmdstat_eval", "cmdstat_select")
        ):
            key, value = line.split(":", 1)
            out[key] = ",".join(p for p in value.split(",") if not p.startswith(("usec", "usec_per_call")))
    return out


# -- propagation (in-process) -------------------------------------------------------------------


def test_propagation_is_effects_wrapped_in_multi(inproc):

    server, c, effects = inproc
    _run(server, c, "EVAL", "return redis.call('get', 'x')", "0")
    assert effects == []
    _run(server, c, "EVAL", "redis.call('set', 'x', 1)", "0")
    assert effects == [(0, [b"set", b"x", b"1"])]
    effects.clear()
    _run(server, c, "EVAL", "redis.call('incr', 'x'); redis.call('select', 3); redis.call('incr', 'y')", "0")
    assert effects == [(0, [b"MULTI"]), (0, [b"incr", b"x"]), (3, [b"incr", b"y"]), (3, [b"EXEC"])]
    effects.clear()
    _run(server, c, "EVAL", "redis.set_repl(redis.REPL_NONE); redis.call('incr', 'x'); "
         "redis.set_repl(redis.REPL_ALL); redis.call('incr', 'z')", "0")
    assert effects == [(0, [b"incr", b"z"])]
    effects.clear()
    _run(server, c, "MULTI")
    _run(server, c, "SET", "a", "1")
    _run(server, c, "EVAL", "redis.call('incr', 'a'); redis.call('incr', 'a')", "0")
    _run(server, c, "EXEC")
    assert effects == [
        (0, [b"MULTI"]), (0, [b"SET", b"a", b"1"]), (0, [b"incr", b"a"]), (0, [b"incr", b"a"]), (0, [b"EXEC"]),
    ]


AOF_SCRIPT = [
    ("SET", "base", "1"),
    ("EVAL", "return redis.call('get', 'base')", "0"),
    ("EVAL", "redis.call('set', KEYS[1], ARGV[1])", "1", "k", "v"),
    ("EVAL", "redis.call('incr', 'n'); redis.call('incrbyfloat', 'f', '1.5'); return 1", "0"),
    ("EVAL", "redis.call('select', 2); redis.call('set', 'other', 'db'); return 1", "0"),
    ("EVAL", "redis.call('set', 'e', 'v', 'EX', 100); redis.call('rpush', 'l', 'a', 'b'); redis.call('lpop', 'l')", "0"),
    ("EVAL", "redis.call('set', 'p', 1); redis.call('nosuch')", "0"),
    ("EVAL", "redis.set_repl(redis.REPL_NONE); redis.call('set', 'hidden', 1)", "0"),
    ("SCRIPT", "LOAD", "return redis.call('incr', KEYS[1])"),
    ("EVALSHA", "be2ecda5e1c7bdf1d37a09ee38b9a80bb2a05b45", "1", "sha"),
    ("MULTI",),
    ("EVAL", "redis.call('incr', 'm'); redis.call('incr', 'm')", "0"),
    ("SET", "after", "1"),
    ("EXEC",),
]


def test_propagation_matches_redis_aof(inproc, tmp_path):
    """The same commands through redis-server with appendonly yes: its AOF holds exactly
    what rill hands to its propagation feeds (relative expiry times masked)."""

    require_tool("redis-server")
    theirs = redis_aof_commands(str(tmp_path), AOF_SCRIPT)
    server, c, effects = inproc
    for args in AOF_SCRIPT:
        _run(server, c, *args)
    mine = effects_as_aof(effects)

    def mask(cmds):
        return [[b"T" if a.isdigit() and len(a) >= 13 else a for a in argv] for argv in cmds]

    assert theirs[0] == [b"SELECT", b"0"]
    assert mask(mine) == mask(theirs[1:])


def test_info_memory_fields(r):
    r.script_flush()
    assert r.info("memory")["number_of_cached_scripts"] == 0
    r.script_load("return 1")
    r.eval("return 2", 0)
    info = r.info("memory")
    assert info["number_of_cached_scripts"] == 2
    assert info["used_memory_lua"] > 0
    assert info["used_memory_scripts"] > 0


def test_the_lua_heap_stays_small_across_many_scripts(r):
    """Redis's "EVAL does not leak in the Lua stack" (unit/scripting): after 10000 runs the
    interpreter's heap is under 100 KB. It holds because cjson compiles at its first use
    (it was a third of an idle heap) and the collector steps every 50 runs, as in Redis."""
    r.script_flush()
    r.set("x", 0)
    pipe = r.pipeline(transaction=False)
    for _ in range(10000):
        pipe.eval("return redis.call('incr', KEYS[1])", 1, "x")
    assert pipe.execute()[-1] == 10000
    assert r.info("memory")["used_memory_lua"] < 100 * 1024
    assert r.eval("return cjson.encode({1, {a=2}})", 0) == b'[1,{"a":2}]'


def test_the_eval_heap_is_its_live_size_while_only_functions_run(r):
    """The same unit's FUNCTION pass: 10000 loads and calls run no EVAL, so the scripting
    VM's collector never steps; what it shows is what setting it up left live."""
    r.script_flush()
    r.set("x", 0)
    lib = "#!lua name=leak\nredis.register_function('leak', function(KEYS) return redis.call('incr', KEYS[1]) end)"
    pipe = r.pipeline(transaction=False)
    for _ in range(2000):
        pipe.function_load(lib, replace=True)
        pipe.fcall("leak", 1, "x")
    assert pipe.execute()[-1] == 2000
    assert r.info("memory")["used_memory_lua"] < 100 * 1024
    r.function_delete("leak")


def test_cjson_names_are_the_lua_librarys():
    """install() names cjson's functions before compiling it; they must be the library's."""
    from lupa import lua51
    from rill.server import lua_libs

    rt = lua51.LuaRuntime(encoding=None, register_eval=False, register_builtins=False)
    impl, _ = rt.globals().loadstring(lua_libs._CJSON, b"=rill")(None)
    assert sorted(impl.keys()) == sorted(lua_libs.CJSON_FUNCTIONS)


def _until_busy(c: RawClient) -> None:
    """Until the script another client started is past busy-reply-threshold, which the
    server shows by answering ``c`` -BUSY (a PING read before the script's command gets
    +PONG, and is asked again); no fixed sleep has to outlast the threshold."""
    wait_until(lambda: c.call("PING").startswith(b"-BUSY"))


def _busy_transcript(port: int) -> list[bytes]:
    """A script past busy-reply-threshold, seen by another client: BUSY for what is not
    allowed, MULTI aborted by it, SCRIPT KILL (refused once the script wrote),
    SHUTDOWN only with NOSAVE."""
    a, b = RawClient(port), RawClient(port)
    t = [b.call("CONFIG", "SET", "busy-reply-threshold", "100"), b.call("SET", "k", "v")]
    a.send_raw(encode_command(["EVAL", "local n = 0 while true do n = n + 1 end", "0"]))
    _until_busy(b)
    t += [b.call("PING"), b.call("GET", "k"), b.call("MULTI"), b.call("GET", "k"), b.call("EXEC"),
          b.call("SHUTDOWN"), b.call("SCRIPT", "KILL"), a.read_reply(), b.call("PING"), b.call("SCRIPT", "KILL")]
    # pcall cannot swallow the kill
    a.send_raw(encode_command(["EVAL", "while true do pcall(function() while true do end end) end", "0"]))
    _until_busy(b)
    t += [b.call("SCRIPT", "KILL"), a.read_reply()]
    a.send_raw(encode_command(["EVAL", "redis.call('set', 'x', '1') while true do end", "0"]))
    _until_busy(b)
    t += [b.call("SCRIPT", "KILL"), b.call("GET", "x")]
    b.send_raw(b"SHUTDOWN NOSAVE\r\n")
    t.append(b.closed_by_peer(5))
    a.close()
    b.close()
    return t


def test_busy_script_side_by_side():
    require_tool("redis-server")
    mine, theirs = start_rill(), start_redis()
    try:
        assert _busy_transcript(mine.port) == _busy_transcript(theirs.port)
        assert mine.proc.wait(10) == 0 and theirs.proc.wait(10) == 0
        assert "Slow script detected" in mine.log()
    finally:
        mine.stop()
        theirs.stop()


@pytest.mark.parametrize("oracle", [False, True], ids=["rill", "redis"])
def test_a_slow_script_in_the_aof_being_loaded_answers_loading_not_busy(oracle):
    """integration/aof "EVAL timeout with slow verbatim Lua script from AOF": while DEBUG
    LOADAOF replays a script past busy-reply-threshold, other clients are answered
    LOADING (processCommand's loading check comes before its BUSY one)."""
    import os

    from tests.support import RawClient, encode_command, start_redis, wait_until

    start = start_redis if oracle else start_rill
    with start("--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--busy-reply-threshold", "1") as srv:
        c = RawClient(srv.port)
        wait_until(lambda: b"aof_rewrite_in_progress:0" in c.call("INFO", "persistence"))
        aofdir = os.path.join(srv.workdir, "appendonlydir")
        incr = next(n for n in os.listdir(aofdir) if n.endswith(".incr.aof"))
        script = "redis.call('set',KEYS[1],'y') for i=1,100000000 do end return 'ok'"
        with open(os.path.join(aofdir, incr), "ab") as f:
            f.write(encode_command([b"SELECT", b"9"]) + encode_command([b"EVAL", script, b"1", b"x"]))
        loader = RawClient(srv.port)
        loader.send_raw(encode_command([b"DEBUG", b"LOADAOF"]))
        first_error = wait_until(lambda: (r := c.call("PING")) != b"+PONG\r\n" and r)
        assert first_error.startswith(b"-LOADING ")
        assert loader.read_reply() == b"+OK\r\n"
        assert c.call("SELECT", 9) == b"+OK\r\n"
        assert c.call("GET", "x") == b"$1\r\ny\r\n"
        c.close()
        loader.close()


def test_scripts_on_a_stale_replica_side_by_side():
    """replica-serve-stale-data no with the master unreachable: a script's shebang
    flags decide whether EVAL runs (allow-stale) or gets MASTERDOWN; a script without
    a shebang runs (EVAL itself is flagged stale), and in any of them only commands
    flagged stale may be called."""
    from tests.support import stale_replicas

    with stale_replicas("x", "1") as (mine, theirs):
        for args in [("EVAL", "#!lua flags=no-writes\nreturn 1", "0"),
                     ("EVAL", "#!lua flags=allow-stale,no-writes\nreturn 2", "0"),
                     ("EVAL_RO", "#!lua flags=allow-stale,no-writes\nreturn redis.call('get', 'x')", "0"),
                     ("EVAL", "#!lua flags=allow-stale,no-writes\nreturn redis.pcall('get', 'x')", "0"),
                     ("EVAL", "#!lua flags=allow-stale\nreturn redis.call('ping')", "0"),
                     ("EVAL", "return redis.call('get', 'x')", "0"),
                     ("EVAL", "return 3", "0"),
                     ("INFO", "errorstats")]:
            a, b = mine.call(*args), theirs.call(*args)
            assert a == b, f"{args}: rill {a!r} != redis {b!r}"


_WAIT_FOR_ABORT = """
local clients
redis.call('lpush', KEYS[1], 'y')
while true do
    clients = redis.call('client', 'list')
    if string.find(clients, 'abortscript') ~= nil then break end
end
redis.call('lpush', KEYS[1], 'z')
return 'done'
"""


@pytest.mark.parametrize("server", ["rill", "redis"])
def test_a_command_run_during_a_busy_script_serves_no_blocked_client(server):
    """A command allowed while a script is busy (HELLO here) does not serve a BLPOP
    waiting on a key the script pushed to: the waiter is served after the script ends,
    and so pops the script's last push, not its first (Redis: no handleClientsBlockedOnKeys
    inside a yielding long command). The Tcl suite's "Timedout scripts and unblocked
    command" on both servers."""
    with (start_rill() if server == "rill" else start_redis()) as srv:
        r, waiter, runner, other = (RawClient(srv.port) for _ in range(4))
        assert r.call("DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1") == b"+OK\r\n"
        assert r.call("CONFIG", "SET", "busy-reply-threshold", "10") == b"+OK\r\n"
        waiter.send_raw(encode_command(["BLPOP", "x", "0"]))
        wait_until(lambda: b"blocked_clients:1\r\n" in r.call("INFO", "clients"))
        runner.send_raw(encode_command(["EVAL", _WAIT_FOR_ABORT, "1", "x"]))
        wait_until(lambda: r.call("PING").startswith(b"-BUSY"))
        assert other.call("HELLO", "2", "SETNAME", "abortscript").startswith(b"*14\r\n")
        assert runner.read_reply() == b"$4\r\ndone\r\n"
        assert waiter.read_reply() == b"*2\r\n$1\r\nx\r\n$1\r\nz\r\n"
        assert r.call("LRANGE", "x", "0", "-1") == b"*1\r\n$1\r\ny\r\n"
        for c in (r, waiter, runner, other):
            c.close()


_SELECTIVE = """
redis.call('set', 'a', '1')
redis.set_repl(redis.REPL_NONE)
redis.call('set', 'b', '2')
redis.set_repl(redis.REPL_AOF)
redis.call('set', 'c', '3')
redis.set_repl(redis.REPL_REPLICA)
redis.call('set', 'e', '5')
redis.set_repl(redis.REPL_ALL)
redis.call('set', 'd', '4')
"""


def test_set_repl_picks_the_aof_or_the_replicas_side_by_side(tmp_path):
    """redis.set_repl: a write made under REPL_AOF reaches the AOF and not the
    replicas, one under REPL_REPLICA the replicas and not the AOF (the Tcl suite's
    "Test selective replication of certain Redis commands from Lua"), on a rill pair
    and a redis-server pair alike."""
    seen = []
    for start in (start_rill, start_redis):
        d = tmp_path / start.__name__
        d.mkdir()
        with start("--appendonly", "yes", workdir=str(d)) as master, start() as replica:
            m, r = RawClient(master.port), RawClient(replica.port)
            assert r.call("REPLICAOF", "127.0.0.1", str(master.port)) == b"+OK\r\n"
            wait_until(lambda r=r: b"master_link_status:up" in r.call("INFO", "replication"))
            m.call("EVAL", _SELECTIVE, "0")
            assert m.call("WAIT", "1", "0") == b":1\r\n"
            got = [r.call("MGET", "a", "b", "c", "d", "e"), m.call("MGET", "a", "b", "c", "d", "e")]
            assert m.call("DEBUG", "LOADAOF") == b"+OK\r\n"
            got.append(m.call("MGET", "a", "b", "c", "d", "e"))
            seen.append(got)
            m.close()
            r.close()
    assert seen[0] == seen[1]
    assert seen[0][0] == b"*5\r\n$1\r\n1\r\n$-1\r\n$-1\r\n$1\r\n4\r\n$1\r\n5\r\n"
