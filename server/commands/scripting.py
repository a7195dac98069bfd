"""Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT (Redis 7.0, Lua 5.1).

The interpreter and the script-call context live in ``rill.server.scripting``;
these handlers parse arguments and hand the reply back to the dispatcher.
"""

from __future__ import annotations

from rill.protocol.numbers import string2ll
from rill.protocol.reply import OK, ReplyError

from ..client import Client
from ..scripting import NOSCRIPT_ERR, AlreadyCounted, LuaEngine, eval_cmd_flags, kill_running
from .args import help_reply
from .table import MAY_REPLICATE, command

_NOT_INTEGER = ReplyError("ERR value is not an integer or out of range")


def _eval(c: Client, argv: list[bytes], by_sha: bool, ro: bool):
    server = c.server
    engine: LuaEngine = server.scripting
    cmd = c.cur_cmd
    # EVAL skips the usual after-the-fact MONITOR feed so that it shows up before
    # the commands it runs.
    if server.monitors:
        server.feed_monitors(c, argv)
    if by_sha and len(argv[1]) != 40:
        raise NOSCRIPT_ERR
    numkeys = string2ll(argv[2])
    if numkeys is None:
        raise _NOT_INTEGER
    if numkeys > len(argv) - 3:
        raise ReplyError("ERR Number of keys can't be greater than number of args")
    if numkeys < 0:
        raise ReplyError("ERR Number of keys can't be negative")
    if by_sha:
        script = engine.scripts.get(argv[1].lower())
        if script is None:
            raise NOSCRIPT_ERR
    else:
        script = engine.load(argv[1])
    reply = engine.run(c, script, argv[3 : 3 + numkeys], argv[3 + numkeys :], ro)
    if type(reply) is AlreadyCounted and cmd is not None:
        server.cmdstats.of(cmd).failed_calls += 1
    return reply


# EVAL and EVALSHA: MAY_REPLICATE as Redis 7.0 flags them, hidden from COMMAND INFO.
@command("eval", hidden_flags=MAY_REPLICATE, flags_for=eval_cmd_flags)
def eval_(c: Client, argv: list[bytes]):
    return _eval(c, argv, False, False)


@command("evalsha", hidden_flags=MAY_REPLICATE, flags_for=eval_cmd_flags)
def evalsha(c: Client, argv: list[bytes]):
    return _eval(c, argv, True, False)


@command("eval_ro", flags_for=eval_cmd_flags)
def eval_ro(c: Client, argv: list[bytes]):
    return _eval(c, argv, False, True)


@command("evalsha_ro", flags_for=eval_cmd_flags)
def evalsha_ro(c: Client, argv: list[bytes]):
    return _eval(c, argv, True, True)


@command("script|load")
def script_load(c: Client, argv: list[bytes]):
    return c.server.scripting.load(argv[2]).sha


@command("script|exists")
def script_exists(c: Client, argv: list[bytes]):
    scripts = c.server.scripting.scripts
    return [int(sha.lower() in scripts) for sha in argv[2:]]


@command("script|flush")
def script_flush(c: Client, argv: list[bytes]):
    # ASYNC and SYNC end the same way here: the old interpreter is simply dropped.
    if len(argv) > 3 or (len(argv) == 3 and argv[2].lower() not in (b"async", b"sync")):
        raise ReplyError("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    c.server.scripting.flush()
    return OK


@command("script|kill")
def script_kill(c: Client, argv: list[bytes]):
    # Reached only while a script is past busy-reply-threshold (other clients are
    # read then), or when none runs.
    kill_running(c.server, is_eval=True)
    return OK


_SCRIPT_HELP = [
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
]


@command("script|help")
def script_help(c: Client, argv: list[bytes]):
    return help_reply(_SCRIPT_HELP)
