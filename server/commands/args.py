"""What every command family shares: argument parsing with Redis's error texts, and the
reply to a container command's HELP."""

from __future__ import annotations

# One string2ll for the whole server (re-exported here for the command modules).
from rill.protocol.numbers import INT64_MAX as INT64_MAX
from rill.protocol.numbers import INT64_MIN as INT64_MIN
from rill.protocol.numbers import string2ll as string2ll
from rill.protocol.reply import ReplyError, Status

SYNTAX_ERR = ReplyError("ERR syntax error")
NUMKEYS_ERR = ReplyError("ERR numkeys should be greater than 0")
COUNT_ERR = ReplyError("ERR count should be greater than 0")
WRONGTYPE = ReplyError("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INT = ReplyError("ERR value is not an integer or out of range")
NOT_FLOAT = ReplyError("ERR value is not a valid float")
OVERFLOW = ReplyError("ERR increment or decrement would overflow")
NO_SUCH_KEY = ReplyError("ERR no such key")
DB_RANGE = ReplyError("ERR DB index is out of range")
REDACTED = b"(redacted)"


def redact(argv: list[bytes], *positions: int) -> None:
    """Keep secrets out of SLOWLOG and MONITOR (Redis's redactClientCommandArgument).

    Both read the command's argv after its handler has run, so the handler, once it
    holds the secret, overwrites it in place. The commands that do this (AUTH, HELLO,
    CONFIG SET, ACL SETUSER, MIGRATE) are never propagated as sent, so nothing else
    reads it later.
    """
    for i in positions:
        argv[i] = REDACTED

def get_int(arg: bytes, err: ReplyError | str | None = None) -> int:
    """An int64 argument, or the given error (Redis's default: not an integer)."""
    v = string2ll(arg)
    if v is None:
        if err is None:
            raise NOT_INT
        raise err if isinstance(err, ReplyError) else ReplyError("ERR " + err)
    return v


MUST_BE_POSITIVE = ReplyError("ERR value is out of range, must be positive")


def get_positive(arg: bytes, err: ReplyError = MUST_BE_POSITIVE) -> int:
    """Redis's getPositiveLongFromObjectOrReply: one error for non-numbers and negatives."""
    v = string2ll(arg)
    if v is None or v < 0:
        raise err
    return v


def eq(arg: bytes, word: bytes) -> bool:
    """Case-insensitive option match (``word`` given in lower case)."""
    return len(arg) == len(word) and arg.lower() == word


def parse_mpop(argv: list[bytes], numkeys_idx: int, ends: tuple[bytes, bytes]) -> tuple[list[bytes], bool, int]:
    """``numkeys key [key ...] <end> [COUNT count]`` of LMPOP/ZMPOP and their blocking forms:
    (keys, whether ``<end>`` is ``ends[0]``, count). ``ends`` are lower case."""
    numkeys = string2ll(argv[numkeys_idx])
    if numkeys is None or numkeys < 1:
        raise NUMKEYS_ERR
    where_idx = numkeys_idx + numkeys + 1
    if where_idx >= len(argv):
        raise SYNTAX_ERR
    where = argv[where_idx].lower()
    if where not in ends:
        raise SYNTAX_ERR
    count = -1
    j = where_idx + 1
    n = len(argv)
    while j < n:
        if count == -1 and argv[j].lower() == b"count" and j < n - 1:
            j += 1
            v = string2ll(argv[j])
            if v is None or v < 1:
                raise COUNT_ERR
            count = v
        else:
            raise SYNTAX_ERR
        j += 1
    return argv[numkeys_idx + 1 : where_idx], where == ends[0], 1 if count == -1 else count


def help_reply(lines: list[str]) -> list:
    """Redis's addReplyHelp: the lines as simple strings, then the HELP entry."""
    return [Status(line.encode()) for line in (*lines, "HELP", "    Prints this help.")]
