"""Functions: FUNCTION LOAD/DELETE/FLUSH/LIST/DUMP/RESTORE/STATS/KILL/HELP, FCALL, FCALL_RO.

The libraries and their interpreter live in ``rill.server.functions``; these
handlers parse arguments. LOAD, DELETE, FLUSH and RESTORE count as a change
(server.dirty), so the one propagation path hands them to the AOF and replicas
as they were sent; FCALL's writes propagate as effects, like EVAL's.
"""

from __future__ import annotations

from rill.protocol.reply import OK, ReplyError

from ..client import Client
from ..functions import LOAD_TIMEOUT_MS
from ..scripting import AlreadyCounted, busy_error, kill_running, running, script_cmd_flags
from .args import help_reply
from .table import MAY_REPLICATE, command


def _fcall_cmd_flags(client: Client, argv: list[bytes]) -> int:
    """fcallGetCommandFlags: the function's flags decide write and deny-oom."""
    cmd = client.server.table.lookup(argv)
    flags = client.server.functions.flags_of(argv[1])
    return cmd.flags if flags is None else script_cmd_flags(cmd.flags, flags)


def _subcommand_syntax_error(argv: list[bytes]) -> ReplyError:
    """addReplySubcommandSyntaxError."""
    return ReplyError(
        b"ERR unknown subcommand or wrong number of arguments for '%s'. Try %s HELP."
        % (argv[1][:128], argv[0].upper())
    )


def _fcall(c: Client, argv: list[bytes], ro: bool):
    server = c.server
    # Fed to MONITOR before the commands the function runs, as EVAL is.
    if server.monitors:
        server.feed_monitors(c, argv)
    reply = server.functions.fcall(c, argv, ro)
    cmd = c.cur_cmd
    if type(reply) is AlreadyCounted and cmd is not None:
        server.cmdstats.of(cmd).failed_calls += 1
    return reply


# MAY_REPLICATE as Redis 7.0 flags FCALL, hidden from COMMAND INFO.
@command("fcall", hidden_flags=MAY_REPLICATE, flags_for=_fcall_cmd_flags)
def fcall(c: Client, argv: list[bytes]):
    return _fcall(c, argv, False)


@command("fcall_ro", flags_for=_fcall_cmd_flags)
def fcall_ro(c: Client, argv: list[bytes]):
    return _fcall(c, argv, True)


@command("function|load")
def function_load(c: Client, argv: list[bytes]):
    replace = False
    i = 2
    while i < len(argv) - 1:
        if argv[i].lower() != b"replace":
            raise ReplyError(b"ERR Unknown option given: " + argv[i])
        replace = True
        i += 1
    # Loads replayed from the AOF (internal clients) are never timed out.
    name = c.server.functions.load(argv[i], replace, 0 if c.id < 0 else LOAD_TIMEOUT_MS)
    c.server.dirty += 1
    return name


@command("function|delete")
def function_delete(c: Client, argv: list[bytes]):
    c.server.functions.delete(argv[2])
    c.server.dirty += 1
    return OK


@command("function|flush")
def function_flush(c: Client, argv: list[bytes]):
    if len(argv) > 3:
        raise _subcommand_syntax_error(argv)
    if len(argv) == 3 and argv[2].lower() not in (b"async", b"sync"):
        raise ReplyError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    # ASYNC and SYNC end the same way: the libraries are simply dropped.
    c.server.functions.flush()
    c.server.dirty += 1
    return OK


@command("function|list")
def function_list(c: Client, argv: list[bytes]):
    with_code = False
    pattern = None
    i = 2
    while i < len(argv):
        arg = argv[i].lower()
        if not with_code and arg == b"withcode":
            with_code = True
        elif pattern is None and arg == b"libraryname":
            if i >= len(argv) - 1:
                raise ReplyError("ERR library name argument was not given")
            i += 1
            pattern = argv[i]
        else:
            raise ReplyError(b"ERR Unknown argument " + argv[i])
        i += 1
    return c.server.functions.list_reply(pattern, with_code)


@command("function|dump")
def function_dump(c: Client, argv: list[bytes]):
    return c.server.functions.dump()


@command("function|restore")
def function_restore(c: Client, argv: list[bytes]):
    if len(argv) > 4:
        raise _subcommand_syntax_error(argv)
    policy = b"append"
    if len(argv) == 4:
        policy = argv[3].lower()
        if policy not in (b"append", b"replace", b"flush"):
            raise ReplyError("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.")
    c.server.functions.restore(argv[2], policy)
    c.server.dirty += 1
    return OK


@command("function|stats")
def function_stats(c: Client, argv: list[bytes]):
    ctx = running(c.server)
    if ctx is not None and ctx.eval_mode:
        raise busy_error(ctx)
    return c.server.functions.stats_reply()


@command("function|kill")
def function_kill(c: Client, argv: list[bytes]):
    # Reached only while a script is past busy-reply-threshold (other clients are
    # read then), or when none runs.
    kill_running(c.server, is_eval=False)
    return OK


_FUNCTION_HELP = [
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
]


@command("function|help")
def function_help(c: Client, argv: list[bytes]):
    return help_reply(_FUNCTION_HELP)
