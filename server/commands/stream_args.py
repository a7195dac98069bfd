"""Argument parsing shared by the stream commands (streams.py, stream_groups.py, xinfo.py):
IDs and intervals, XADD/XTRIM's trim options, XREAD/XREADGROUP's options, the IDS blocks of
Redis 8's deletion commands, and the errors they raise (Redis 7.0.15's texts).
"""

from __future__ import annotations

from rill.protocol.reply import ReplyError
from rill.storage.stream import (
    ID_MAX,
    MASK64,
    REF_ACKED,
    REF_DEL,
    REF_KEEP,
)

from ..blocking import parse_timeout
from ..client import Client
from .args import NOT_INT, SYNTAX_ERR, string2ll
from .stream_replies import Budget

INVALID_ID = ReplyError("ERR Invalid stream ID specified as stream command argument")
BAD_START = ReplyError("ERR invalid start ID for the interval")
BAD_END = ReplyError("ERR invalid end ID for the interval")
MAXLEN_NEG = ReplyError("ERR The MAXLEN argument must be >= 0.")
LIMIT_NEG = ReplyError("ERR The LIMIT argument must be >= 0.")
BOTH_STRATEGIES = ReplyError(
    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
)
LIMIT_NO_STRATEGY = ReplyError(
    "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
)
XTRIM_NO_STRATEGY = ReplyError("ERR syntax error, XTRIM must be called with a trimming strategy")
LIMIT_NO_TILDE = ReplyError("ERR syntax error, LIMIT cannot be used without the special ~ option")
UNBALANCED = ReplyError(
    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
)
# Redis 8.6 documents no text for this one; ours says what is wrong.
IDMP_EMPTY = ReplyError("ERR IDMP producer-id and idempotent-id must not be empty")

XREAD_BLOCKED_DEFAULT_COUNT = 1000


def must_obey(c: Client) -> bool:
    """Redis's mustObeyClient: the AOF loader (an internal client other than a script)
    replays trims without LIMIT and accepts LIMIT after a rewritten ``=``."""
    return c.id < 0 and c.kind != "lua"


def subcommand_error(argv: list[bytes]) -> ReplyError:
    """addReplySubcommandSyntaxError."""
    return ReplyError(
        b"ERR unknown subcommand or wrong number of arguments for '%b'. Try %b HELP."
        % (argv[1][:128], argv[0].upper())
    )


# -- IDs -------------------------------------------------------------------------------------

_SPACES = b" \t\n\v\f\r"


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython). Compiled, parse_id's common case is stream_args.pxd's ``_c_parse_id``, one C loop
# over the argument's bytes (the partition, two isdigit and two int() calls cost ~3.5k
# instructions an ID). The name exists only in the compiled module; ``_COMPILED`` guards it.
_COMPILED = type(_probe).__name__ != "function"


def _u64(s: bytes) -> int | None:
    """Redis's string2ull: string2ll when it parses (negatives rejected), else strtoull
    (leading spaces, one sign, leading zeros; a '-' wraps modulo 2**64)."""
    if s.isdigit():
        v = int(s)
        return v if v <= MASK64 else None
    if not s or string2ll(s) is not None:
        return None  # empty, or a plain negative number
    t = s.lstrip(_SPACES)
    neg = False
    if t[:1] == b"-" or t[:1] == b"+":
        neg = t[:1] == b"-"
        t = t[1:]
    if not t.isdigit():
        return None
    v = int(t)
    if v > MASK64:
        return None
    return (-v) & MASK64 if neg else v


def _parse_id_slow(arg: bytes, missing_seq: int, strict: bool, auto_seq: bool) -> tuple[int, bool]:
    """streamGenericParseIDOrReply: ``(id, seq_given)``; raises INVALID_ID."""
    if len(arg) > 127:
        raise INVALID_ID
    nul = arg.find(b"\0")
    if nul >= 0:
        arg = arg[:nul]  # C string semantics
    if arg == b"-" or arg == b"+":
        if strict:
            raise INVALID_ID
        return (0 if arg == b"-" else ID_MAX), True
    ms_s, dash, seq_s = arg.partition(b"-")
    ms = _u64(ms_s)
    if ms is None:
        raise INVALID_ID
    if not dash:
        return (ms << 64) | missing_seq, True
    if auto_seq and seq_s == b"*":
        return ms << 64, False
    seq = _u64(seq_s)
    if seq is None:
        raise INVALID_ID
    return (ms << 64) | seq, True


def parse_id(arg: bytes, missing_seq: int = 0, strict: bool = True) -> int:
    """A stream ID argument: ``ms-seq`` or ``ms`` (seq = ``missing_seq``); ``-`` and ``+``
    only when not ``strict``."""
    if _COMPILED and type(arg) is bytes:
        v = _c_parse_id(arg, missing_seq)  # noqa: F821 (see _COMPILED)
        if v is not None:
            return v
        return _parse_id_slow(arg, missing_seq, strict, False)[0]
    ms, dash, seq = arg.partition(b"-")
    if ms.isdigit() and len(arg) < 128:
        if dash:
            if seq.isdigit():
                m = int(ms)
                q = int(seq)
                if m <= MASK64 and q <= MASK64:
                    return (m << 64) | q
        else:
            m = int(ms)
            if m <= MASK64:
                return (m << 64) | missing_seq
    return _parse_id_slow(arg, missing_seq, strict, False)[0]


def parse_ids(args: list[bytes]) -> list[int]:
    """:func:`parse_id` of each argument, in order (XACK's IDs): compiled, the common case
    of each is read by the C loop with no call per ID."""
    if _COMPILED:
        out = []
        for a in args:
            v = _c_parse_id(a, 0) if type(a) is bytes else None  # noqa: F821 (see _COMPILED)
            out.append(parse_id(a) if v is None else v)
        return out
    return [parse_id(a) for a in args]


def parse_interval(arg: bytes, missing_seq: int) -> tuple[int, bool]:
    """streamParseIntervalIDOrReply: ``(id, exclusive)``; ``(`` makes it exclusive (and strict)."""
    if len(arg) > 1 and arg[0] == 40:
        return parse_id(arg[1:], missing_seq, True), True
    return parse_id(arg, missing_seq, False), False


def count_arg(a: bytes) -> int:
    """A COUNT value as Redis's string2ll reads it, else NOT_INT. A plain count (1-18
    digits, no leading zero: always within int64) is read here, compiled, without the
    call into the uncompiled string2ll, which takes everything else."""
    if 0 < len(a) < 19 and a[0] != 48 and a.isdigit():
        return int(a)
    v = string2ll(a)
    if v is None:
        raise NOT_INT
    return v


def parse_range(start_arg: bytes, end_arg: bytes) -> tuple[int, int]:
    """Start and end of an XRANGE-like interval, exclusive bounds applied, Redis's errors."""
    # ``-`` and ``+`` (the common bounds) are the smallest and greatest IDs whatever the
    # side; anything else takes the general parse.
    if start_arg == b"-":
        if end_arg == b"+":
            return 0, ID_MAX
        start = 0
    else:
        start, ex = parse_interval(start_arg, 0)
        if ex:
            if start >= ID_MAX:
                raise BAD_START
            start += 1
    if end_arg == b"+":
        return start, ID_MAX
    end, ex = parse_interval(end_arg, MASK64)
    if ex:
        if end <= 0:
            raise BAD_END
        end -= 1
    return start, end


# -- XADD / XTRIM options ----------------------------------------------------------------------

TRIM_NONE = 0
TRIM_MAXLEN = 1
TRIM_MINID = 2


class TrimArgs:
    """streamAddTrimArgs: the parsed options of XADD or XTRIM."""

    __slots__ = (
        "strategy", "arg_idx", "approx", "maxlen", "minid", "limit", "nomkstream",
        "id", "id_given", "seq_given", "id_pos", "policy", "pid", "iid", "idmp_pos",
        "acked_last",
    )

    def __init__(self) -> None:
        self.strategy = TRIM_NONE
        self.arg_idx = 0
        self.approx = False
        self.maxlen = 0
        self.minid = 0
        self.limit = 0
        self.nomkstream = False
        self.id = 0
        self.id_given = False
        self.seq_given = True
        self.id_pos = 0
        self.policy = REF_KEEP  # KEEPREF | DELREF | ACKED (Redis 8.2)
        self.pid: bytes | None = None  # IDMP / IDMPAUTO producer (Redis 8.6)
        self.iid: bytes | None = None  # None with IDMPAUTO: derived from the content
        self.idmp_pos = 0  # index of the IDMP/IDMPAUTO token
        self.acked_last = 0  # last entry an ACKED trim removed


def parse_trim_args(c: Client, argv: list[bytes], xadd: bool) -> TrimArgs:
    """streamParseAddOrTrimArgsOrReply: options in order, then the LIMIT rules."""
    a = TrimArgs()
    argc = len(argv)
    i = 2
    limit_given = False
    while i < argc:
        more = argc - 1 - i
        opt = argv[i]
        low = opt.lower()
        if xadd and opt == b"*":
            break
        if low == b"maxlen" and more:
            if a.strategy != TRIM_NONE:
                raise BOTH_STRATEGIES
            a.approx = False
            nxt = argv[i + 1]
            if more >= 2 and nxt == b"~":
                a.approx = True
                i += 1
            elif more >= 2 and nxt == b"=":
                i += 1
            v = string2ll(argv[i + 1])
            if v is None:
                raise NOT_INT
            if v < 0:
                raise MAXLEN_NEG
            a.maxlen = v
            i += 1
            a.strategy = TRIM_MAXLEN
            a.arg_idx = i
        elif low == b"minid" and more:
            if a.strategy != TRIM_NONE:
                raise BOTH_STRATEGIES
            a.approx = False
            nxt = argv[i + 1]
            if more >= 2 and nxt == b"~":
                a.approx = True
                i += 1
            elif more >= 2 and nxt == b"=":
                i += 1
            a.minid = parse_id(argv[i + 1])
            i += 1
            a.strategy = TRIM_MINID
            a.arg_idx = i
        elif low == b"limit" and more:
            v = string2ll(argv[i + 1])
            if v is None:
                raise NOT_INT
            if v < 0:
                raise LIMIT_NEG
            a.limit = v
            limit_given = True
            i += 1
        elif xadd and low == b"nomkstream":
            a.nomkstream = True
        elif low in _POLICIES:
            a.policy = _POLICIES[low]
        elif xadd and low == b"idmp" and more >= 2:
            if a.pid is not None:
                raise SYNTAX_ERR
            a.pid, a.iid, a.idmp_pos = argv[i + 1], argv[i + 2], i
            if not a.pid or not a.iid:
                raise IDMP_EMPTY
            i += 2
        elif xadd and low == b"idmpauto" and more:
            if a.pid is not None:
                raise SYNTAX_ERR
            a.pid, a.idmp_pos = argv[i + 1], i
            if not a.pid:
                raise IDMP_EMPTY
            i += 1
        elif xadd:
            a.id, a.seq_given = _xadd_id(opt)
            a.id_given = True
            break
        else:
            raise SYNTAX_ERR
        i += 1
    a.id_pos = i
    if a.limit and a.strategy == TRIM_NONE:
        raise LIMIT_NO_STRATEGY
    if not xadd and a.strategy == TRIM_NONE:
        raise XTRIM_NO_STRATEGY
    if must_obey(c):
        a.limit = 0
    elif limit_given:
        if not a.approx:
            raise LIMIT_NO_TILDE
    elif a.approx:
        limit = 100 * c.server.stream_node_max_entries
        if limit <= 0:
            limit = 10000
        a.limit = min(limit, 1000000)
    else:
        a.limit = 0
    return a


def _xadd_id(arg: bytes) -> tuple[int, bool]:
    """XADD's explicit ID: ``ms-seq``, ``ms`` or ``ms-*``; ``(id, seq_given)``."""
    ms, dash, seq = arg.partition(b"-")
    if ms.isdigit() and seq.isdigit() and len(arg) < 128:
        m = int(ms)
        q = int(seq)
        if m <= MASK64 and q <= MASK64:
            return (m << 64) | q, True
    return _parse_id_slow(arg, 0, True, True)


_POLICIES = {b"keepref": REF_KEEP, b"delref": REF_DEL, b"acked": REF_ACKED}


# -- XREAD / XREADGROUP options ----------------------------------------------------------------


class ReadArgs:
    """Parsed XREAD / XREADGROUP options."""

    __slots__ = (
        "timeout", "count", "streams_arg", "nstreams", "group", "consumer", "noack",
        "claim", "maxcount", "maxsize",
    )

    def __init__(self) -> None:
        self.timeout = -1.0  # -1: no BLOCK
        self.count = 0
        self.streams_arg = 0
        self.nstreams = 0
        self.group: bytes | None = None
        self.consumer: bytes | None = None
        self.noack = False
        self.claim = -1  # CLAIM min-idle-time (Redis 8.4), -1: none
        self.maxcount = 0  # MAXCOUNT / MAXSIZE (Redis 8.10), 0: none
        self.maxsize = 0

    def budget(self) -> Budget | None:
        return Budget(self.maxcount, self.maxsize) if self.maxcount or self.maxsize else None


def parse_read_args(argv: list[bytes], xreadgroup: bool, serving: bool, script: bool = False) -> ReadArgs:
    """The option loop of xreadCommand (errors in Redis's order). A retry (``serving``)
    skips the timeout: its deadline was fixed when the client blocked. A script may
    not even ask to block (``script``), whatever the timeout."""
    r = ReadArgs()
    argc = len(argv)
    i = 1
    while i < argc:
        more = argc - i - 1
        o = argv[i].lower()
        if o == b"block" and more:
            if script:
                raise ReplyError(b"ERR %s command is not allowed with BLOCK option from scripts" % argv[0])
            i += 1
            r.timeout = 0.0 if serving else parse_timeout(argv[i], unit_ms=True)
        elif o == b"count" and more:
            i += 1
            v = count_arg(argv[i])
            r.count = v if v > 0 else 0
        elif o == b"streams" and more:
            r.streams_arg = i + 1
            n = argc - r.streams_arg
            if n & 1:
                raise UNBALANCED
            r.nstreams = n >> 1
            break
        elif o == b"group" and more >= 2:
            if not xreadgroup:
                raise ReplyError("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.")
            r.group = argv[i + 1]
            r.consumer = argv[i + 2]
            i += 2
        elif o == b"noack":
            if not xreadgroup:
                raise ReplyError("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.")
            r.noack = True
        elif o == b"claim" and more:
            # Redis 8.4; the texts of its errors are not documented: ours follow NOACK's.
            if not xreadgroup:
                raise ReplyError("ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead.")
            i += 1
            v = string2ll(argv[i])
            if v is None or v < 0:
                raise ReplyError("ERR min-idle-time must be a positive integer")
            r.claim = v
        elif (o == b"maxcount" or o == b"maxsize") and more:
            # Redis 8.10: "must be a positive integer" (the docs give no error texts).
            i += 1
            v = string2ll(argv[i])
            if v is None or v <= 0:
                raise ReplyError(b"ERR %b must be a positive integer" % o.upper())
            if o == b"maxcount":
                r.maxcount = v
            else:
                r.maxsize = v
        else:
            raise SYNTAX_ERR
        i += 1
    if r.streams_arg == 0:
        raise SYNTAX_ERR
    if xreadgroup and r.group is None:
        raise ReplyError("ERR Missing GROUP option for XREADGROUP")
    if r.maxcount and r.count and r.maxcount < r.count:
        raise ReplyError("ERR MAXCOUNT must be greater than or equal to COUNT")
    return r


# -- IDS blocks (Redis 8.2's XDELEX, XACKDEL) ------------------------------------------------


def parse_ids_block(c: Client, argv: list[bytes], i: int) -> list[int]:
    """``IDS numids id [id ...]`` starting at ``argv[i]`` (the IDS token), running to the
    end of the command. Redis 8.2 documents no error texts for a bad count; ours say
    what is wrong."""
    n = string2ll(argv[i + 1]) if i + 1 < len(argv) else None
    if n is None or n <= 0:
        raise NUMIDS_INVALID
    ids = argv[i + 2 :]
    if len(ids) != n:
        raise NUMIDS_MISMATCH
    return parse_ids(ids)


NUMIDS_INVALID = ReplyError("ERR Number of IDs must be a positive integer")
NUMIDS_MISMATCH = ReplyError("ERR The `numids` parameter must match the number of arguments")


def parse_policy_and_ids(c: Client, argv: list[bytes], first: int) -> tuple[int, list[int]]:
    """``[KEEPREF | DELREF | ACKED] IDS numids id ...`` from ``argv[first]`` on."""
    policy = REF_KEEP
    i = first
    seen_policy = False
    while i < len(argv):
        low = argv[i].lower()
        if low in _POLICIES and not seen_policy:
            policy = _POLICIES[low]
            seen_policy = True
            i += 1
        elif low == b"ids":
            return policy, parse_ids_block(c, argv, i)
        else:
            raise SYNTAX_ERR
    raise SYNTAX_ERR
