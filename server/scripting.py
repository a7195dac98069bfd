"""Lua scripting as Redis 7.0 does it: one Lua 5.1 interpreter (lupa), a SHA1-keyed
script cache, the ``redis`` API, the Lua <-> RESP conversions and the sandbox.

Nothing here knows sockets or the event loop. A script's ``redis.call`` runs the
command through the server's one dispatcher (``Server.call``) on an internal client
of kind "lua" whose output is read back and turned into Lua values, exactly the way
Redis feeds its fake Lua client's reply buffer to ``redisProtocolToLuaType``.

Redis locks its globals with a patched Lua (read-only tables). Stock Lua 5.1 has no
such thing, so the sandbox gives scripts read-only *proxies* instead: empty tables
whose metatables read through to the real table and refuse writes, with the few
raw-access builtins (rawset, rawget, next, pairs, ipairs, setmetatable, getfenv,
loadstring, load) wrapped so a proxy behaves as its table and stays read-only.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Callable
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import lupa.lua51 as lua51
from rill.protocol.parser import split_args
from rill.protocol.reply import Double, Raw, ReplyError, encode
from rill.storage.keyspace import freeze_expiry_clock, release_expiry_clock

from . import REDIS_VERSION, acl, lua_libs
from .client import Client
from .commands.table import DENYOOM, MAY_REPLICATE, NOSCRIPT, STALE, WRITE, Command
from .memory import memory_of
from .outcomes import MASTERDOWN_ERR, AofOnly, ReplicasOnly

if TYPE_CHECKING:
    from .server import Server

log = logging.getLogger("rill")

# Shebang flags (Redis's scripts_flags_def), plus the mark of a script without a
# shebang, which keeps EVAL's pre-7.0 behaviour.
FLAG_NO_WRITES = 1 << 0
FLAG_ALLOW_OOM = 1 << 1
FLAG_ALLOW_STALE = 1 << 2
FLAG_NO_CLUSTER = 1 << 3
FLAG_ALLOW_CROSS_SLOT = 1 << 4
FLAG_EVAL_COMPAT = 1 << 5
_SHEBANG_FLAGS = {
    b"no-writes": FLAG_NO_WRITES,
    b"allow-oom": FLAG_ALLOW_OOM,
    b"allow-stale": FLAG_ALLOW_STALE,
    b"no-cluster": FLAG_NO_CLUSTER,
    b"allow-cross-slot-keys": FLAG_ALLOW_CROSS_SLOT,
}

# disk.py's MISCONF_AOF_PREFIX, restated (scripting does not import the persistence side).
_MISCONF_AOF = b"MISCONF Errors writing to the AOF file: "

# redis.set_repl targets (Redis's PROPAGATE_AOF / PROPAGATE_REPL bits).
REPL_AOF = 1
REPL_REPLICA = 2
REPL_ALL = REPL_AOF | REPL_REPLICA

# Lua's C stack limit (LUAI_MAXCSTACK) is what stops Redis converting a nested
# (or self-referencing) table; it gets this many levels deep before giving up.
_MAX_REPLY_DEPTH = 7995

_MAJOR, _MINOR, _PATCH = (int(x) for x in REDIS_VERSION.split("."))
REDIS_VERSION_NUM = (_MAJOR << 16) | (_MINOR << 8) | _PATCH

NOSCRIPT_ERR = ReplyError("NOSCRIPT No matching script. Please use EVAL.")
OOM_ERR_TEXT = b"-OOM command not allowed when used memory > 'maxmemory'."


def sha1hex(data: bytes) -> bytes:
    return hashlib.sha1(data).hexdigest().encode()


def parse_shebang(body: bytes) -> tuple[int, int]:
    """The script's flags and the length of its ``#!`` line (evalExtractShebangFlags).

    Raises ReplyError for a shebang Redis would refuse.
    """
    if not body.startswith(b"#!"):
        return FLAG_EVAL_COMPAT, 0
    end = body.find(b"\n")
    if end < 0:
        raise ReplyError("ERR Invalid script shebang")
    parts = split_args(body[:end])
    if not parts:
        raise ReplyError("ERR Invalid engine in script shebang")
    if parts[0] != b"#!lua":
        raise ReplyError(b"ERR Unexpected engine in script shebang: " + parts[0])
    flags = 0
    for part in parts[1:]:
        if not part.startswith(b"flags="):
            raise ReplyError(b"ERR Unknown lua shebang option: " + part)
        names = part[6:]
        for name in names.split(b",") if names else ():
            bit = _SHEBANG_FLAGS.get(name)
            if bit is None:
                raise ReplyError(b"ERR Unexpected flag in script shebang: " + name)
            flags |= bit
    return flags, end


BUSY_EVAL_ERR = ReplyError("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.")
BUSY_FUNCTION_ERR = ReplyError(
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
)


def running(server: Server) -> RunContext | None:
    """The script or function running now, in either interpreter (at most one runs)."""
    for vm in server.lua_vms:
        if vm.ctx is not None:
            return vm.ctx
    return None


def busy_error(ctx: RunContext | None) -> ReplyError:
    """The BUSY reply while ``ctx`` runs: it names the KILL that can stop it."""
    return BUSY_FUNCTION_ERR if ctx is not None and not ctx.eval_mode else BUSY_EVAL_ERR


def kill_running(server: Server, is_eval: bool) -> None:
    """SCRIPT KILL / FUNCTION KILL (scriptKill): raises the reply's error if refused."""
    for vm in server.lua_vms:
        if vm.ctx is not None:
            vm.kill(is_eval=is_eval)
            return
    raise ReplyError("NOTBUSY No scripts in execution right now.")


def script_cmd_flags(cmd_flags: int, script_flags: int) -> int:
    """scriptFlagsToCmdFlags: a command's flags as a script with ``script_flags`` makes
    them (writes and deny-oom unless the flags say otherwise; never may-replicate)."""
    if script_flags & FLAG_EVAL_COMPAT:
        return cmd_flags
    cmd_flags &= ~(STALE | DENYOOM | WRITE | MAY_REPLICATE)
    if not script_flags & (FLAG_ALLOW_OOM | FLAG_NO_WRITES):
        cmd_flags |= DENYOOM
    if not script_flags & FLAG_NO_WRITES:
        cmd_flags |= WRITE
    if script_flags & FLAG_ALLOW_STALE:
        cmd_flags |= STALE
    return cmd_flags


def eval_cmd_flags(client: Client, argv: list[bytes]) -> int:
    """evalGetCommandFlags: EVAL* / EVALSHA* flags from the script's shebang."""
    cmd = client.server.table.lookup(argv)
    assert cmd is not None
    engine = client.server.scripting
    if cmd.fullname.startswith("evalsha"):
        script = engine.scripts.get(argv[1].lower()) if len(argv[1]) == 40 else None
        return cmd.flags if script is None else script_cmd_flags(cmd.flags, script.flags)
    script = engine.scripts.get(sha1hex(argv[1]))
    if script is not None:
        return script_cmd_flags(cmd.flags, script.flags)
    try:
        flags, _ = parse_shebang(argv[1])
    except ReplyError:
        return cmd.flags
    return script_cmd_flags(cmd.flags, flags)


def error_text(buf: bytes) -> bytes:
    """The ``err`` field Redis builds from an error (luaPushErrorBuff): a leading '-'
    means "CODE message", anything else is an ERR message; newlines are trimmed."""
    if buf.startswith(b"-"):
        space = buf.find(b" ")
        code, msg = (b"ERR", buf[1:]) if space < 0 else (buf[1:space], buf[space + 1 :])
    else:
        code, msg = b"ERR", buf
    return code + b" " + msg.strip(b"\r\n")


class Script:
    """One cached script: its body (for SCRIPT EXISTS memory), flags and compiled chunk."""

    __slots__ = ("sha", "body", "flags", "fn")

    def __init__(self, sha: bytes, body: bytes, flags: int, fn: Any) -> None:
        self.sha = sha
        self.body = body
        self.flags = flags
        self.fn = fn


class RunContext:
    """One script run (Redis's scriptRunCtx): whom it runs for and what it may do."""

    __slots__ = (
        "server", "client", "caller", "read_only", "allow_oom", "oom", "write_dirty", "repl", "resp",
        "start", "timed_out", "killed", "shutdown", "eval_mode", "name",
    )

    def __init__(self, server: Server, client: Client, caller: Client, read_only: bool, allow_oom: bool, oom: bool) -> None:
        self.server = server
        self.client = client
        self.caller = caller
        self.read_only = read_only
        self.allow_oom = allow_oom
        self.oom = oom  # Redis's pre_command_oom_state: over maxmemory when the script began
        self.write_dirty = False
        self.repl = REPL_ALL
        self.resp = 2
        self.start = time.monotonic()
        self.timed_out = False  # past busy-reply-threshold: others are answered BUSY
        self.killed = False  # SCRIPT KILL (or SHUTDOWN NOSAVE) asked it to stop
        self.shutdown = False  # SHUTDOWN NOSAVE: its effects must not be propagated
        self.eval_mode = True  # EVAL's script, or (False) FCALL's function
        self.name = b""  # the script's SHA1 or the function's name, for errors and the log

    def call(self, argv: list[bytes]) -> tuple[bool, bytes]:
        """Run one command for the script (Redis's scriptCall).

        Returns (True, the RESP reply) or, when the script may not run it, (False,
        the error in luaPushErrorBuff's input form).
        """
        server = self.server
        cmd = server.table.lookup(argv)
        if cmd is None:
            return self._reject(None, b"Unknown Redis command called from script")
        if not cmd.min_argc <= len(argv) <= cmd.max_argc:
            return self._reject(cmd, b"Wrong number of args calling Redis command from script")
        flags = cmd.flags
        if flags & NOSCRIPT and not server.__dict__.get("script_disable_deny_script"):
            return self._reject(cmd, b"This Redis command is not allowed from script")
        if not flags & STALE and server.stale():
            return self._reject(cmd, b"Can not execute the command on a stale replica")
        if not self.caller.authenticated:  # a restricted caller: its ACL user's rules apply
            denied = server.acl.script_denied(self.caller, cmd, argv)
            if denied is not None:
                return self._reject(cmd, denied)
        if self.read_only and flags & (WRITE | MAY_REPLICATE):
            return self._reject(cmd, b"Write commands are not allowed from read-only scripts.")
        if flags & WRITE and not self.write_dirty:
            # scriptVerifyWriteCommandAllow; once the script has written it must be
            # allowed to finish its writes.
            # A script that came from our master or from the AOF being loaded is obeyed
            # (Redis's mustObeyClient): it writes even on a read-only replica.
            obeyed = self.caller.kind == "master" or self.caller.id < 0
            if (server.replica_of is not None and not obeyed
                    and server.config.bool("replica-read-only")):
                return self._reject(cmd, b"-READONLY You can't write against a read only replica.")
            if server.write_denied is not None:
                err = server.write_denied()
                if err is not None:
                    return self._reject(cmd, b"-" + err.message)
            if not server.good_replicas_ok():
                return self._reject(cmd, b"-NOREPLICAS Not enough good replicas to write.")
        if flags & DENYOOM and self.oom and not self.allow_oom and not self.write_dirty:
            return self._reject(cmd, OOM_ERR_TEXT)
        if flags & WRITE:
            self.write_dirty = True
        client = self.client
        client.resp3 = self.resp == 3
        out: list[bytes] = []
        client.out = out
        repl = self.repl
        if not repl:
            server.prevent_propagation()  # redis.set_repl(redis.REPL_NONE)
        elif repl != REPL_ALL and server._exec_ops is not None:
            # REPL_AOF or REPL_REPLICA: the effects this command adds to the script's
            # unit are marked for that one feed (the other leaves them out).
            unit = server._exec_ops
            mark = len(unit)
            server.call(client, cmd, argv)
            only = AofOnly if repl == REPL_AOF else ReplicasOnly
            unit[mark:] = [(db, only(effect)) for db, effect in unit[mark:]]
            return True, b"".join(out)
        server.call(client, cmd, argv)
        return True, b"".join(out)

    def _reject(self, cmd: Command | None, err: bytes) -> tuple[bool, bytes]:
        if cmd is not None:
            self.server.cmdstats.of(cmd).rejected_calls += 1
        self.server.count_error(ReplyError(error_text(err)))
        return False, err


# The sandbox (lua/sandbox.lua), run once per interpreter with the Python bridges as
# arguments. Its chunk name marks its frames so the error handler can look past them to
# the line of the user's script, as Redis's handler looks past its C functions.
_SANDBOX = files(__package__).joinpath("lua/sandbox.lua").read_bytes()


class LuaEngine:
    """One interpreter and the run in progress in it (at most one).

    EVAL's engine also keeps the script cache. Given ``register_function`` it is
    the functions engine's interpreter instead, a separate VM as in Redis: its
    library loads see only the library API (see ``load_library``) and its
    functions get KEYS and ARGV as arguments.
    """

    def __init__(self, server: Server, register_function: Callable[..., None] | None = None) -> None:
        self.server = server
        self.client = Client(server, -1)
        self.client.kind = "lua"
        self.ctx: RunContext | None = None
        self._register_function = register_function
        # Set by the functions engine while a library loads: past it, the load stops.
        self.load_deadline = 0.0
        # redisLrand48's state, shared by both interpreters and kept by SCRIPT
        # FLUSH (Redis's is process-wide).
        vms = server.lua_vms
        self._rand48_box: list[int] = vms[0]._rand48_box if vms else [0x1234ABCD330E]
        server.lua_vms.append(self)
        self._reset()

    def _reset(self) -> None:
        self.scripts: dict[bytes, Script] = {}
        self.scripts_mem = 0
        rt = lua51.LuaRuntime(
            encoding=None, register_eval=False, register_builtins=False, unpack_returned_tuples=True
        )
        self.lua = rt
        redis = rt.table_from(
            {
                b"call": self._call,
                b"acl_check_cmd": self._acl_check_cmd,
                b"pcall": self._pcall,
                b"sha1hex": self._sha1hex,
                b"log": self._log,
                b"setresp": self._setresp,
                b"set_repl": self._set_repl,
                # Outside the debugger (which rill has not) these answer as Redis's do.
                b"breakpoint": lambda *args: False,
                b"debug": lambda *args: None,
                b"replicate_commands": lambda *args: True,
                b"LOG_DEBUG": 0,
                b"LOG_VERBOSE": 1,
                b"LOG_NOTICE": 2,
                b"LOG_WARNING": 3,
                b"REPL_NONE": 0,
                b"REPL_AOF": REPL_AOF,
                b"REPL_SLAVE": REPL_REPLICA,
                b"REPL_REPLICA": REPL_REPLICA,
                b"REPL_ALL": REPL_ALL,
                b"REDIS_VERSION": REDIS_VERSION.encode(),
                b"REDIS_VERSION_NUM": REDIS_VERSION_NUM,
            }
        )
        lua_libs.install(rt, lambda message: ScriptError(message, True))
        libapi = None
        if self._register_function is not None:
            libapi = rt.table_from({
                b"register_function": self._register_function,
                b"log": self._log,
                b"LOG_DEBUG": 0,
                b"LOG_VERBOSE": 1,
                b"LOG_NOTICE": 2,
                b"LOG_WARNING": 3,
                b"REDIS_VERSION": REDIS_VERSION.encode(),
                b"REDIS_VERSION_NUM": REDIS_VERSION_NUM,
            })
        sandbox = rt.globals().loadstring(_SANDBOX, b"=rill")
        self._compile, self._run, self._rawget, self.load_library = sandbox(
            redis, self._random, self._randomseed, _unwrap, self._busy, libapi, self._load_timed_out
        )
        self._count = rt.globals().collectgarbage
        self._runs = 0
        # Setting up left garbage that nothing would collect until scripts run (a VM only
        # FUNCTION uses never runs one): INFO shows the live heap from the start.
        self._count(b"collect")

    def flush(self) -> None:
        """SCRIPT FLUSH: a fresh interpreter and an empty cache."""
        self._reset()

    def memory(self) -> int:
        """INFO used_memory_lua: the interpreter's heap, as Lua counts it."""
        return int(self._count(b"count")) * 1024

    # -- the cache -----------------------------------------------------------
    def load(self, body: bytes) -> Script:
        """Compile and cache ``body`` (luaCreateFunction); a cached body is not reparsed."""
        sha = sha1hex(body)
        script = self.scripts.get(sha)
        if script is not None:
            return script
        flags, shebang_len = parse_shebang(body)
        # The shebang line is dropped but its newline kept, so line numbers still match.
        fn, err = self._compile(body[shebang_len:], b"@user_script")
        if fn is None:
            raise ReplyError(b"ERR Error compiling script (new function): " + err)
        script = self.scripts[sha] = Script(sha, body, flags, fn)
        self.scripts_mem += 40 + len(body)
        return script

    # -- running ---------------------------------------------------------------
    def compile(self, body: bytes, chunkname: bytes) -> tuple[Any, bytes | None]:
        """The sandboxed Lua function of ``body``, or (None, Lua's error message)."""
        return self._compile(body, chunkname)

    def run(self, caller: Client, script: Script, keys: list[bytes], args: list[bytes], ro: bool) -> Any:
        """Run a cached script for ``caller``: see :meth:`execute`."""
        return self.execute(caller, script.fn, keys, args, script.flags, ro, script.sha, True)

    def execute(
        self, caller: Client, fn: Any, keys: list[bytes], args: list[bytes], flags: int, ro: bool,
        name: bytes, eval_mode: bool,
    ) -> Any:
        """Run ``fn`` for ``caller`` (scriptPrepareForRun + luaCallFunction); ``name``
        (the SHA1 or the function's name) is what errors and the log call it.

        Returns the reply for the caller: Raw RESP, or a ReplyError to be counted.
        The writes it makes propagate as their own commands, wrapped in MULTI/EXEC
        when there are several (effects replication); the script itself never does.
        """
        server = self.server
        compat = flags & FLAG_EVAL_COMPAT
        oom = bool(server.maxmemory) and _over_maxmemory(server)
        if server.replica_of is not None and server.stale():
            # scriptPrepareForRun's own stale check: a script without a shebang never
            # runs on a stale replica (EVAL is flagged stale for the ones that declare
            # allow-stale); one with a shebang only with that flag.
            if compat:
                return MASTERDOWN_ERR
            if not flags & FLAG_ALLOW_STALE:
                return ReplyError(
                    "MASTERDOWN Link with MASTER is down, replica-serve-stale-data is set to 'no' "
                    "and 'allow-stale' flag is not set on the script."
                )
        if not compat and not flags & FLAG_NO_WRITES:
            if server.write_denied is not None:
                err = server.write_denied()
                if err is not None:
                    if err.message.startswith(_MISCONF_AOF):  # scriptPrepareForRun words it apart
                        return ReplyError(
                            b"MISCONF Redis is configured to persist data to AOF, but it's currently unable "
                            b"to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read "
                            b"only scripts. AOF error: " + err.message[len(_MISCONF_AOF):]
                        )
                    return ReplyError(
                        err.message.split(b".")[0]
                        + b". Writable scripts are blocked. Use 'no-writes' flag for read only scripts."
                    )
            if ro:
                return ReplyError("ERR Can not execute a script with write flag using *_ro command.")
            if oom and not flags & FLAG_ALLOW_OOM:
                return ReplyError(
                    "OOM allow-oom flag is not set on the script, "
                    "can not run it when used memory > 'maxmemory'"
                )
        read_only = ro or (not compat and bool(flags & FLAG_NO_WRITES))
        allow_oom = not compat and bool(flags & FLAG_ALLOW_OOM)
        client = self.client
        client.db = caller.db
        ctx = self.ctx = RunContext(server, client, caller, read_only, allow_oom, oom)
        ctx.eval_mode = eval_mode
        ctx.name = name
        rt = self.lua
        opened = server.begin_exec_propagation()
        clock = freeze_expiry_clock()
        try:
            ok, result = self._run(fn, rt.table_from(keys), rt.table_from(args), eval_mode)
        finally:
            release_expiry_clock(clock)
            self.ctx = None
            if ctx.timed_out:
                server.blocking.held = False
                log.warning("Slow script finished after %d milliseconds.", (time.monotonic() - ctx.start) * 1000)
            if ctx.shutdown and server._exec_ops is not None:
                server._exec_ops.clear()  # the server stops without what the script half did
            if opened:
                server.end_exec_propagation()
        # As Redis does: 50 collector steps every 50 runs, so garbage never piles up to
        # the size at which Lua would run a whole (slow) cycle inside some script.
        self._runs += 1
        if self._runs == 50:
            self._runs = 0
            self._count(b"step", 50)
        if ok:
            return self.to_reply(result, caller.resp3, ctx.resp)
        if lua51.lua_type(result) != "table":
            msg = result if isinstance(result, bytes) else b"execution failure"
            return ReplyError(b"ERR Error running script %s, %s" % (name, msg[:100]))
        rawget = self._rawget
        msg = _stringish(rawget(result, b"err")) or b""
        source, line = _stringish(rawget(result, b"source")), _stringish(rawget(result, b"line"))
        if source is not None and line is not None:
            msg += b" script: %s, on %s:%s." % (name, source, line)
        if rawget(result, b"ignore_error_stats_update") is True:
            return AlreadyCounted(msg)
        return ReplyError(msg)

    def _busy(self) -> bool:
        """The count hook (scriptInterrupt): whether the running script must stop."""
        ctx = self.ctx
        if ctx is None:
            return False
        if not ctx.timed_out:
            elapsed = (time.monotonic() - ctx.start) * 1000
            if elapsed < self.server.config.int("busy-reply-threshold"):
                return False
            log.warning(
                "Slow script detected: still in execution after %d milliseconds. You can try "
                "killing the script using the %s command. Script name is: %s.", elapsed,
                "SCRIPT KILL" if ctx.eval_mode else "FUNCTION KILL", ctx.name.decode(errors="replace"),
            )
            ctx.timed_out = True
            self.server.blocking.held = True
        serve = self.server.serve_while_busy
        if serve is not None:
            serve(ctx.caller)
        if ctx.killed:
            log.warning("Lua script killed by user with SCRIPT KILL.")
        return ctx.killed

    def kill(self, shutdown: bool = False, is_eval: bool = True) -> None:
        """SCRIPT KILL (``is_eval``) or FUNCTION KILL: stop the busy script unless it
        already wrote (UNKILLABLE) or is of the other kind (BUSY, naming the right
        KILL); SHUTDOWN NOSAVE stops it in any case and drops its effects."""
        ctx = self.ctx
        if ctx is None:
            raise ReplyError("NOTBUSY No scripts in execution right now.")
        if shutdown:
            ctx.shutdown = ctx.killed = True
            return
        if ctx.write_dirty:
            raise ReplyError(
                "UNKILLABLE Sorry the script already executed write commands against the dataset. "
                "You can either wait the script termination or kill the server in a hard way using "
                "the SHUTDOWN NOSAVE command."
            )
        if is_eval != ctx.eval_mode:
            raise busy_error(ctx)
        ctx.killed = True

    def busy(self) -> bool:
        """Whether a script is running past busy-reply-threshold."""
        return self.ctx is not None and self.ctx.timed_out

    def _load_timed_out(self) -> bool:
        """FUNCTION LOAD's count hook: whether the library has run past its deadline."""
        return bool(self.load_deadline) and time.monotonic() > self.load_deadline

    # -- Lua -> RESP -------------------------------------------------------------
    def to_reply(self, value: Any, resp3: bool, script_resp: int) -> Any:
        """The script's return value as a reply (luaReplyToRedisReply).

        Encoded here rather than built from reply values: a table may nest (or
        refer to itself) thousands of levels deep, which only an explicit stack
        walks safely. A top-level error table becomes a ReplyError to be counted.
        """
        rawget = self._rawget
        if lua51.lua_type(value) == "table":
            err = rawget(value, b"err")
            if type(err) is bytes:
                if rawget(value, b"ignore_error_stats_update") is True:
                    return AlreadyCounted(err)
                return ReplyError(err)
        null = b"_\r\n" if resp3 else b"$-1\r\n"
        out: list[bytes] = []
        stack = [(value, 0)]
        while stack:
            v, depth = stack.pop()
            t = type(v)
            if t is bytes:
                out.append(b"$%d\r\n%b\r\n" % (len(v), v))
            elif t is bool:
                if script_resp == 2:
                    out.append(b":1\r\n" if v else null)
                elif resp3:
                    out.append(b"#t\r\n" if v else b"#f\r\n")
                else:
                    out.append(b":1\r\n" if v else b":0\r\n")
            elif t is int or t is float:
                out.append(b":%d\r\n" % _to_long_long(v))
            elif lua51.lua_type(v) == "table":
                if depth >= _MAX_REPLY_DEPTH:
                    out.append(b"-ERR reached lua stack limit\r\n")
                    continue
                self._table_reply(v, depth + 1, resp3, out, stack)
            else:
                out.append(null)
        return Raw(b"".join(out))

    def _table_reply(self, v: Any, depth: int, resp3: bool, out: list[bytes], stack: list) -> None:
        rawget = self._rawget
        field = rawget(v, b"err")
        if type(field) is bytes:
            out.append(encode(ReplyError(field)))
            return
        field = rawget(v, b"ok")
        if type(field) is bytes:
            out.append(b"+%b\r\n" % _one_line(field.split(b"\0", 1)[0]))
            return
        field = rawget(v, b"double")
        if type(field) in (int, float):
            out.append(encode(Double(field), resp3))
            return
        field = rawget(v, b"big_number")
        if type(field) is bytes:
            field = _one_line(field)
            out.append(b"(%b\r\n" % field if resp3 else b"$%d\r\n%b\r\n" % (len(field), field))
            return
        field = rawget(v, b"verbatim_string")
        if lua51.lua_type(field) == "table":
            fmt, text = rawget(field, b"format"), rawget(field, b"string")
            if type(fmt) is bytes and type(text) is bytes:
                if resp3:
                    out.append(b"=%d\r\n%b:%b\r\n" % (len(text) + 4, (fmt + b"\0\0\0")[:3], text))
                else:
                    out.append(b"$%d\r\n%b\r\n" % (len(text), text))
                return
        field = rawget(v, b"map")
        if lua51.lua_type(field) == "table":
            items = list(field.items())
            out.append(b"%%%d\r\n" % len(items) if resp3 else b"*%d\r\n" % (2 * len(items)))
            for key, value in reversed(items):
                stack.append((value, depth))
                stack.append((key, depth))
            return
        field = rawget(v, b"set")
        if lua51.lua_type(field) == "table":
            members = list(field.keys())
            out.append(b"~%d\r\n" % len(members) if resp3 else b"*%d\r\n" % len(members))
            stack.extend((m, depth) for m in reversed(members))
            return
        items = []
        i = 1
        while True:
            item = rawget(v, i)
            if item is None:
                break
            items.append(item)
            i += 1
        out.append(b"*%d\r\n" % len(items))
        stack.extend((item, depth) for item in reversed(items))

    # -- RESP -> Lua -------------------------------------------------------------
    def _to_lua(self, buf: bytes, pos: int) -> tuple[Any, int]:
        """One reply from ``buf`` at ``pos`` as a Lua value (redisProtocolToLuaType)."""
        kind = buf[pos]
        end = buf.index(b"\r\n", pos)
        line = buf[pos + 1 : end]
        pos = end + 2
        rt = self.lua
        if kind == 36:  # $ bulk
            n = int(line)
            if n < 0:
                return False, pos
            return buf[pos : pos + n], pos + n + 2
        if kind == 58:  # : integer
            return int(line), pos
        if kind == 43:  # + status
            return rt.table_from({b"ok": line}), pos
        if kind == 45:  # - error
            return self.error_table(b"-" + line, True), pos
        if kind == 42 or kind == 62:  # * array, > push
            n = int(line)
            if n < 0:
                return False, pos
            items = []
            for _ in range(n):
                item, pos = self._to_lua(buf, pos)
                items.append(item)
            return rt.table_from(items), pos
        if kind == 37:  # % map
            table = rt.table()
            for _ in range(int(line)):
                key, pos = self._to_lua(buf, pos)
                value, pos = self._to_lua(buf, pos)
                if key is not None:
                    table[key] = value
            return rt.table_from({b"map": table}), pos
        if kind == 126:  # ~ set
            table = rt.table()
            for _ in range(int(line)):
                member, pos = self._to_lua(buf, pos)
                if member is not None:
                    table[member] = True
            return rt.table_from({b"set": table}), pos
        if kind == 95:  # _ null
            return None, pos
        if kind == 35:  # # boolean
            return line == b"t", pos
        if kind == 44:  # , double
            return rt.table_from({b"double": float(line)}), pos
        if kind == 40:  # ( big number
            return rt.table_from({b"big_number": line}), pos
        if kind == 61:  # = verbatim
            n = int(line)
            data = buf[pos : pos + n]
            verbatim = rt.table_from({b"string": data[4:], b"format": data[:3]})
            return rt.table_from({b"verbatim_string": verbatim}), pos + n + 2
        if kind == 124:  # | attribute: not shown to scripts, the reply follows it
            for _ in range(2 * int(line)):
                _, pos = self._to_lua(buf, pos)
            return self._to_lua(buf, pos)
        raise ValueError(f"unexpected reply type {chr(kind)!r}")

    def error_table(self, buf: bytes, already_counted: bool) -> Any:
        """Redis's Lua error value ``{err="CODE msg"}``; ``already_counted`` marks an
        error whose stats were counted when it happened, so the script's reply is not."""
        table = self.lua.table_from({b"err": error_text(buf)})
        if already_counted:
            table[b"ignore_error_stats_update"] = True
        return table

    # -- bridges called from Lua -----------------------------------------------
    # Python callables are C functions to Lua: a tail call to one (`return
    # redis.call(...)`) keeps the script's frame, so errors name the script's line.
    def _lua_argv(self, args: tuple) -> list[bytes] | Any:
        """A command's arguments from Lua values (luaArgsToRedisArgv), or an error table."""
        if not args:
            return self.error_table(b"Please specify at least one argument for this redis lib call", False)
        argv = []
        for a in args:
            t = type(a)
            if t is bytes:
                argv.append(a)
            elif t is int or t is float:
                argv.append(b"%.17g" % a)  # Lua's own rendering would lose precision
            else:
                return self.error_table(b"Lua redis lib command arguments must be strings or integers", False)
        return argv

    def _redis_command(self, args: tuple) -> tuple[bool, Any]:
        """redis.call / redis.pcall: (True, reply) or (False, error table)."""
        argv = self._lua_argv(args)
        if type(argv) is not list:
            return False, argv
        ctx = self.ctx
        assert ctx is not None  # the sandbox offers redis.call to running scripts only
        ran, reply = ctx.call(argv)
        if not ran:
            return False, self.error_table(reply, True)
        value, _ = self._to_lua(reply, 0)
        return not reply.startswith(b"-"), value

    def _call(self, *args: Any) -> Any:
        ok, value = self._redis_command(args)
        if not ok:
            raise ScriptError(value)
        return value

    def _pcall(self, *args: Any) -> Any:
        return self._redis_command(args)[1]

    def _acl_check_cmd(self, *args: Any) -> bool:
        """redis.acl_check_cmd: may the script's caller run this command on these keys?"""
        ctx = self.ctx
        if ctx is None:
            raise self._fail(b"redis.acl_check_cmd can only be called inside a script invocation")
        argv = self._lua_argv(args)
        if type(argv) is not list:
            raise ScriptError(argv)
        cmd = self.server.table.lookup(argv)
        if cmd is None:
            raise self._fail(b"Invalid command passed to redis.acl_check_cmd()")
        return ctx.caller.user.check(cmd, argv)[0] == acl.OK

    def _fail(self, message: bytes) -> ScriptError:
        """A Lua error like Redis's luaPushError + lua_error: {err="ERR message"}."""
        return ScriptError(self.error_table(message, False))

    def _sha1hex(self, *args: Any) -> bytes:
        if len(args) != 1:
            raise self._fail(b"wrong number of arguments")
        return sha1hex(_stringish(args[0]) or b"")

    def _log(self, *args: Any) -> None:
        if len(args) < 2:
            raise self._fail(b"redis.log() requires two arguments or more.")
        level = _lua_number(args[0])
        if level is None:
            raise self._fail(b"First argument must be a number (log level).")
        level = _to_long_long(level)
        if not 0 <= level <= 3:
            raise self._fail(b"Invalid debug level.")
        parts = [p for p in map(_stringish, args[1:]) if p is not None]
        log.log(_LOG_LEVELS[level], "%s", b" ".join(parts).decode("utf-8", "replace"))

    def _setresp(self, *args: Any) -> None:
        if len(args) != 1:
            raise self._fail(b"redis.setresp() requires one argument.")
        resp = _to_long_long(_lua_number(args[0]) or 0)
        if resp not in (2, 3):
            raise self._fail(b"RESP version must be 2 or 3.")
        assert self.ctx is not None
        self.ctx.resp = resp

    def _set_repl(self, *args: Any) -> None:
        if len(args) != 1:
            raise self._fail(b"redis.set_repl() requires two arguments.")
        flags = _to_long_long(_lua_number(args[0]) or 0)
        if flags & ~REPL_ALL:
            raise self._fail(b"Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
        assert self.ctx is not None
        self.ctx.repl = flags

    def _random(self, *args: Any) -> float:
        """math.random on redisLrand48 (the classic 48-bit lrand48), so a seeded
        script draws the same numbers as on Redis."""
        box = self._rand48_box
        box[0] = state = (0x5DEECE66D * box[0] + 0xB) & 0xFFFFFFFFFFFF
        r = ((state >> 17) % 0x7FFFFFFF) / 0x7FFFFFFF
        if not args:
            return r
        if len(args) == 1:
            u = _check_int(args, 0, b"random")
            if u < 1:
                raise ScriptError(b"bad argument #1 to 'random' (interval is empty)", True)
            return math.floor(r * u) + 1
        if len(args) == 2:
            low, u = _check_int(args, 0, b"random"), _check_int(args, 1, b"random")
            if low > u:
                raise ScriptError(b"bad argument #2 to 'random' (interval is empty)", True)
            return math.floor(r * (u - low + 1)) + low
        raise ScriptError(b"wrong number of arguments", True)

    def _randomseed(self, *args: Any) -> None:
        seed = _check_int(args, 0, b"randomseed") & 0xFFFFFFFF
        self._rand48_box[0] = (seed << 16) | 0x330E


class ScriptError(Exception):
    """Raised by a bridge to raise ``value`` (an error table or message) in Lua.

    ``where`` asks for the caller's "user_script:LINE: " in front of the message, as
    luaL_error puts it (the error handler adds it: only it can see the line).
    """

    def __init__(self, value: Any, where: bool = False) -> None:
        super().__init__(value)
        self.value = value
        self.where = where


def _unwrap(e: Any) -> tuple[Any, bool]:
    """The Lua error value of an exception a bridge raised (it reaches Lua as userdata),
    and whether it wants the caller's position."""
    if isinstance(e, ScriptError):
        return e.value, e.where
    if isinstance(e, BaseException):
        log.error("script bridge failed: %r", e)
        return b"internal error: " + repr(e).encode(), False
    return e, False


def _lua_number(v: Any) -> float | None:
    """lua_tonumber's view: numbers, and strings that read as numbers."""
    t = type(v)
    if t is int or t is float:
        return v
    if t is bytes:
        try:
            return float(v.strip()) if not v.strip().lower().startswith(b"0x") else int(v.strip(), 16)
        except ValueError:
            return None
    return None


def _check_int(args: tuple, i: int, fname: bytes) -> int:
    """luaL_checkint: argument ``i`` as an int, or Lua's "bad argument" error."""
    v = _lua_number(args[i]) if i < len(args) else None
    if v is None:
        got = b"no value" if i >= len(args) else _lua_type_name(args[i])
        raise ScriptError(b"bad argument #%d to '%s' (number expected, got %s)" % (i + 1, fname, got), True)
    return _to_long_long(v)


def _lua_type_name(v: Any) -> bytes:
    if v is None:
        return b"nil"
    if type(v) is bool:
        return b"boolean"
    if type(v) is bytes:
        return b"string"
    return (lua51.lua_type(v) or "userdata").encode()


class AlreadyCounted(ReplyError):
    """An error reply whose error stats were counted when the script's command failed:
    only the script command's failed_calls still counts it (ERR_REPLY_FLAG_NO_STATS_UPDATE)."""

    __slots__ = ()


# redis.LOG_DEBUG .. LOG_WARNING onto rill's logger levels (NOTICE is 25).
_LOG_LEVELS = (logging.DEBUG, logging.INFO, 25, logging.WARNING)


def _over_maxmemory(server: Server) -> bool:
    return memory_of(server).for_eviction() > server.maxmemory


def _to_long_long(x: float) -> int:
    """C's (long long) cast of a Lua number (out of range: what x86-64 gives)."""
    if isinstance(x, int):
        return x
    if math.isnan(x) or math.isinf(x) or not -(2.0**63) <= x < 2.0**63:
        return -(2**63)
    return int(x)


def _stringish(v: Any) -> bytes | None:
    """lua_isstring's view of a field: strings, and numbers rendered as Lua does."""
    if type(v) is bytes:
        return v
    if type(v) is int:
        return b"%d" % v
    if type(v) is float:
        return b"%.14g" % v
    return None


def _one_line(s: bytes) -> bytes:
    return s.replace(b"\r", b" ").replace(b"\n", b" ")
