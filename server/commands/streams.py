"""Stream commands, part one (Redis 7.0's t_stream.c): XADD, XRANGE, XREVRANGE, XLEN, XDEL,
XTRIM, XSETID and XREAD, plus what the consumer-group family (stream_groups.py) shares:
ID parsing, reply encoding, keyspace events and the blocking helpers.

Replies and errors are Redis 7.0.15's, RESP2 and RESP3. Where rill follows a later Redis
on purpose it says so: XREAD accepts ``+`` (the last entry, as 7.4 does; 7.0 answers
"Invalid stream ID").

Propagation (Redis's rules, reference section 4): XADD goes out with the real ID in place
of ``*``/``ms-*`` and any ``~`` trim rewritten as ``= <length>`` / ``= <first id>``; XTRIM and
XDEL only when something was removed; XREAD is a read.

Blocking: XREAD BLOCK returns a ``Block`` whose argv has ``$`` (and ``+``) resolved to IDs,
so a retry waits for entries after what the stream held when the client blocked. A
retry serves only the key that became ready, as Redis does, at most COUNT entries (1000
when no COUNT was given, Redis's XREAD_BLOCKED_DEFAULT_COUNT).

Entries are encoded straight into RESP bytes (identical in RESP2 and RESP3): an XRANGE of
100 entries is the hot read path, and the encodings of entries in the storage's
decoded-node cache are kept per node (see ``_NODE_ENC``), so repeated reads of the same
entries cost a list slice.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from rill.protocol.reply import NULL_ARRAY, OK, Raw, ReplyError
from rill.protocol.stream_entries import RESP_ENTRIES, array_head, encode_entry, entries_bytes
from rill.storage.stream import (
    ID_MAX,
    MASK64,
    REF_ACKED,
    REF_DEL,
    REF_KEEP,
    IdmpState,
    Stream,
    StreamIDError,
    StreamSizeError,
)

from ..blocking import parse_timeout
from ..client import Client
from ..outcomes import Block
from . import keys as _keys
from .args import NO_SUCH_KEY, NOT_INT, SYNTAX_ERR, WRONGTYPE, string2ll
from .table import arg, command
from .table import tag_set as _tag_set

INVALID_ID = ReplyError("ERR Invalid stream ID specified as stream command argument")
ID_TOO_SMALL = ReplyError(
    "ERR The ID specified in XADD is equal or smaller than the target stream top item"
)
ID_ZERO = ReplyError("ERR The ID specified in XADD must be greater than 0-0")
EXHAUSTED = ReplyError("ERR The stream has exhausted the last possible ID, unable to add more items")
TOO_LARGE = ReplyError("ERR Elements are too large to be stored")
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
XADD_ARITY = ReplyError("ERR wrong number of arguments for 'xadd' command")
# Redis 8.6 documents no text for these two; ours say what is wrong.
IDMP_EXPLICIT_ID = ReplyError("ERR IDMP and IDMPAUTO can be used only with the auto-generated ID '*'")
IDMP_EMPTY = ReplyError("ERR IDMP producer-id and idempotent-id must not be empty")

XREAD_BLOCKED_DEFAULT_COUNT = 1000


# -- small helpers ---------------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def fmt_id(sid: int) -> bytes:
    """``ms-seq``: the reply and propagation form of an ID."""
    return b"%d-%d" % (sid >> 64, sid & MASK64)


def notify(c: Client, event: bytes, key: bytes) -> None:
    """A stream keyspace event (class 't')."""
    notifier = _keys.notifier
    if notifier is not None:
        notifier(c.db.id, "t", event, key)


def is_stream(value: Any) -> bool:
    return type(value) is Stream or isinstance(value, Stream)


def stream_read(c: Client, key: bytes) -> Stream | None:
    """lookupKeyRead + checkType: counts a keyspace hit or miss."""
    v = c.db.lookup_read(key)
    if v is None or type(v) is Stream or isinstance(v, Stream):
        return v
    raise WRONGTYPE


def stream_write(c: Client, key: bytes) -> Stream | None:
    """lookupKeyWrite + checkType (no hit/miss stats)."""
    v = c.db.lookup(key)
    if v is None or type(v) is Stream or isinstance(v, Stream):
        return v
    raise WRONGTYPE


def must_obey(c: Client) -> bool:
    """Redis's mustObeyClient: the AOF loader (an internal client other than a script)
    replays trims without LIMIT and accepts LIMIT after a rewritten ``=``."""
    return c.id < 0 and c.kind != "lua"


def sync_node_limits(c: Client) -> None:
    """Node limits are server-wide CONFIG values; the storage keeps them on the class."""
    server = c.server
    if Stream.node_max_bytes != server.stream_node_max_bytes:
        Stream.node_max_bytes = server.stream_node_max_bytes
    if Stream.node_max_entries != server.stream_node_max_entries:
        Stream.node_max_entries = server.stream_node_max_entries


# -- IDs -------------------------------------------------------------------------------------

_SPACES = b" \t\n\v\f\r"


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


def parse_interval(arg: bytes, missing_seq: int) -> tuple[int, bool]:
    """streamParseIntervalIDOrReply: ``(id, exclusive)``; ``(`` makes it exclusive (and strict)."""
    if len(arg) > 1 and arg[0] == 40:
        return parse_id(arg[1:], missing_seq, True), True
    return parse_id(arg, missing_seq, False), False


def parse_range(start_arg: bytes, end_arg: bytes) -> tuple[int, int]:
    """Start and end of an XRANGE-like interval, exclusive bounds applied, Redis's errors."""
    start, ex = parse_interval(start_arg, 0)
    if ex:
        if start >= ID_MAX:
            raise BAD_START
        start += 1
    end, ex = parse_interval(end_arg, MASK64)
    if ex:
        if end <= 0:
            raise BAD_END
        end -= 1
    return start, end


# -- reply encoding ----------------------------------------------------------------------------

# Encoded entries of the storage's decoded-node cache lists: id(list) -> (list, encodings).
# A cached node's list is only ever appended to while cached (a changed node gets a new
# list), so an encoding made once serves every later read of that entry -- repeated
# XRANGEs, and the XREAD fan-out of new entries to many readers -- as a list slice.
# Each encoding is kept with a leading CRLF, the form range_bytes joins.
_NODE_ENC: dict[int, tuple[list, list]] = {}
_NODE_ENC_MAX = 512


def range_bytes(
    s: Stream, start: int, end: int, count: int, rev: bool = False, sids: list[int] | None = None
) -> bytes:
    """XRANGE/XREVRANGE's array (no trailing CRLF): ``s.range(...)`` encoded; a forward
    read also appends the IDs of the entries to ``sids`` when given."""
    # Uncached nodes come back as RESP pieces (each entry preceded by CRLF, see
    # protocol/stream_entries.py); cached ones as decoded entries whose encodings are kept
    # in _NODE_ENC.
    parts: list[bytes] = [b""]
    n = 0
    ext = parts.extend
    for ents, lo, hi, cached in s.range_segments(start, end, count, rev, RESP_ENTRIES, sids):
        n += hi - lo
        if not cached:
            ext(ents)
            continue
        rec = _NODE_ENC.get(id(ents))
        if rec is None or rec[0] is not ents:
            if len(_NODE_ENC) >= _NODE_ENC_MAX:
                del _NODE_ENC[next(iter(_NODE_ENC))]
            rec = (ents, [])
            _NODE_ENC[id(ents)] = rec
        encs = rec[1]
        if len(encs) < len(ents):
            encs.extend([None] * (len(ents) - len(encs)))
        chunk = encs[lo:hi]
        if None in chunk:
            for k in range(lo, hi):
                if encs[k] is None:
                    sid, fv = ents[k]
                    encs[k] = b"\r\n" + encode_entry(sid, fv)
            chunk = encs[lo:hi]
        if rev:
            chunk.reverse()
        ext(chunk)
    if not n:
        return b"*0"
    parts[0] = array_head(n)
    return b"".join(parts)


def entry_reply(ent: tuple[int, list[bytes]]) -> Raw:
    return Raw(encode_entry(ent[0], ent[1]) + b"\r\n")


def bulk(b: bytes) -> bytes:
    """A bulk string (no trailing CRLF)."""
    return b"$%d\r\n%b" % (len(b), b)


def read_reply(c: Client, served: list[tuple[bytes, bytes]]) -> Raw:
    """XREAD/XREADGROUP's top level: per stream its key and entries (already encoded);
    an array of pairs in RESP2, a map in RESP3."""
    n = len(served)
    if c.resp3:
        parts = [b"%%%d" % n]
        for key, ents in served:
            parts.append(bulk(key))
            parts.append(ents)
    else:
        parts = [b"*%d" % n]
        for key, ents in served:
            parts.append(b"*2")
            parts.append(bulk(key))
            parts.append(ents)
    return Raw(b"\r\n".join(parts) + b"\r\n")


# -- XADD / XTRIM argument parsing ------------------------------------------------------------

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


def trim(s: Stream, a: TrimArgs) -> int:
    """streamTrim with parsed arguments; entries removed."""
    if a.strategy == TRIM_NONE:
        return 0
    by_len = a.strategy == TRIM_MAXLEN
    if a.policy == REF_ACKED:
        removed, a.acked_last = s.trim_acked_last(by_len, a.maxlen, a.minid, a.limit)
        return removed
    if by_len:
        return s.trim_maxlen(a.maxlen, a.approx, a.limit, a.policy)
    return s.trim_minid(a.minid, a.approx, a.limit, a.policy)


def rewrite_trim(argv: list[bytes], s: Stream, a: TrimArgs) -> None:
    """streamRewriteApproxSpecifier + streamRewriteTrimArgument: ``~ N`` becomes ``= <what
    the stream now holds>`` so replicas and the AOF trim exactly as we did.  An ACKED
    MINID trim steps over referenced entries, so its exact form is "below the entry after
    the last one removed" rather than the first entry left."""
    argv[a.arg_idx - 1] = b"="
    if a.strategy == TRIM_MAXLEN:
        argv[a.arg_idx] = b"%d" % s.length
    elif a.policy == REF_ACKED:
        argv[a.arg_idx] = fmt_id(a.acked_last + 1 if a.acked_last else 0)
    else:
        argv[a.arg_idx] = fmt_id(s.edge_id(True, False))


def _set_gc_ratio(server: Any) -> None:
    Stream.gc_ratio = server.config.int("stream-node-gc-percent") / 100.0


def setup(server: Any) -> None:
    """GC ratio from CONFIG stream-node-gc-percent, now and on every CONFIG SET."""
    _set_gc_ratio(server)
    server.config_changed_hooks["stream-node-gc-percent"] = lambda: _set_gc_ratio(server)


def auto_iid(fields_values: list[bytes]) -> bytes:
    """IDMPAUTO's idempotent ID: a digest of the field/value pairs (length-prefixed so
    different splits of the same bytes differ), in hex so it reads well in XINFO/AOF."""
    h = hashlib.blake2b(digest_size=16)
    for x in fields_values:
        h.update(b"%d:" % len(x))
        h.update(x)
    return h.hexdigest().encode()


# -- XADD ------------------------------------------------------------------------------------


@command("xadd")
def xadd(c: Client, argv: list[bytes]):
    argc = len(argv)
    if argv[2] == b"*" and argc & 1:
        # The common form, XADD key * f v [f v ...]: no options to parse.
        db = c.db
        key = argv[1]
        s = db.lookup(key)
        if s is None:
            s = Stream()
            db.set(key, s)
        elif type(s) is not Stream and not isinstance(s, Stream):
            raise WRONGTYPE
        server = c.server
        if Stream.node_max_bytes != server.stream_node_max_bytes or (
            Stream.node_max_entries != server.stream_node_max_entries
        ):
            sync_node_limits(c)
        if s.last_id >= ID_MAX:
            raise EXHAUSTED
        try:
            sid = s.add(argv[3:], None, int(time.time() * 1000))
        except StreamIDError:
            raise ID_TOO_SMALL from None
        except StreamSizeError:
            raise TOO_LARGE from None
        idb = b"%d-%d" % (sid >> 64, sid & MASK64)
        if db.watched and key in db.watched:
            db.modified(key)
        if server.blocking.waiters:  # XADD wakes its key's waiters (see BlockingRegistry.signal_command)
            server.blocking.signal(db.id, key)
        if _keys.notifier is not None:
            notify(c, b"xadd", key)
        server.dirty += 1
        if server.propagating:
            new = list(argv)
            new[2] = idb
            server.rewrite_propagation(new)
        return idb
    return _xadd_general(c, argv)


def _xadd_general(c: Client, argv: list[bytes]):
    a = parse_trim_args(c, argv, True)
    argc = len(argv)
    nfv = argc - (a.id_pos + 1)
    if nfv < 2 or nfv & 1:
        raise XADD_ARITY
    if a.id_given and a.seq_given and a.id == 0:
        raise ID_ZERO
    if a.pid is not None and a.id_given and not must_obey(c):
        raise IDMP_EXPLICIT_ID
    key = argv[1]
    s = stream_write(c, key)
    if s is None:
        if a.nomkstream:
            return None
        s = Stream()
        c.db.set(key, s)
    sync_node_limits(c)
    fv = argv[a.id_pos + 1 :]
    iid = None
    if a.pid is not None:
        iid = a.iid if a.iid is not None else auto_iid(fv)
        st = s.idmp
        if st is None:
            st = s.idmp = IdmpState()
        dup = st.lookup(a.pid, iid, now_ms())
        if dup is not None:
            # Already produced: the original ID, and nothing added, trimmed or propagated.
            st.iids_duplicates += 1
            return fmt_id(dup)
    if s.last_id >= ID_MAX:
        raise EXHAUSTED
    try:
        if not a.id_given:
            sid = s.add(fv, None, now_ms())
        elif a.seq_given:
            sid = s.add(fv, a.id)
        else:
            auto = s.auto_seq_id(a.id >> 64)
            if auto is None:
                raise TOO_LARGE
            sid = s.add(fv, auto)
    except StreamIDError:
        raise ID_TOO_SMALL from None
    except StreamSizeError:
        raise TOO_LARGE from None
    idb = fmt_id(sid)
    if iid is not None:
        s.idmp.record(a.pid, iid, sid, now_ms())  # type: ignore[union-attr]
    c.db.modified(key)
    c.server.blocking.signal(c.db.id, key)
    notify(c, b"xadd", key)
    server = c.server
    server.dirty += 1
    rewritten = None
    if a.strategy != TRIM_NONE:
        if trim(s, a):
            notify(c, b"xtrim", key)
        if a.approx:
            rewritten = list(argv)
            rewrite_trim(rewritten, s, a)
    if not a.id_given or not a.seq_given:
        if rewritten is None:
            rewritten = list(argv)
        rewritten[a.id_pos] = idb
    if a.pid is not None and a.iid is None:
        # IDMPAUTO goes out resolved, so a replay does not depend on the digest.
        if rewritten is None:
            rewritten = list(argv)
        p = a.idmp_pos
        rewritten[p : p + 2] = [b"IDMP", a.pid, iid]  # type: ignore[list-item]
    if rewritten is not None and server.propagating:
        server.rewrite_propagation(rewritten)
    return idb


# -- XRANGE / XREVRANGE / XLEN -------------------------------------------------------------------


def _xrange(c: Client, argv: list[bytes], rev: bool):
    if rev:
        start, end = parse_range(argv[3], argv[2])
    else:
        start, end = parse_range(argv[2], argv[3])
    count = -1
    argc = len(argv)
    if argc > 4:
        j = 4
        while j < argc:
            if argv[j].lower() == b"count" and argc - j - 1 >= 1:
                v = string2ll(argv[j + 1])
                if v is None:
                    raise NOT_INT
                count = v if v > 0 else 0
                j += 1
            else:
                raise SYNTAX_ERR
            j += 1
    s = stream_read(c, argv[1])
    if s is None:
        return Raw(b"*0\r\n")
    if count == 0:
        return NULL_ARRAY
    return Raw(range_bytes(s, start, end, count if count > 0 else 0, rev) + b"\r\n")


@command("xrange")
def xrange_(c: Client, argv: list[bytes]):
    return _xrange(c, argv, False)


@command("xrevrange")
def xrevrange(c: Client, argv: list[bytes]):
    return _xrange(c, argv, True)


@command("xlen")
def xlen(c: Client, argv: list[bytes]):
    s = stream_read(c, argv[1])
    return 0 if s is None else s.length


# -- XDEL / XTRIM / XSETID -------------------------------------------------------------------------


@command("xdel")
def xdel(c: Client, argv: list[bytes]):
    key = argv[1]
    s = stream_write(c, key)
    if s is None:
        return 0
    ids = [parse_id(a) for a in argv[2:]]
    deleted = 0
    for sid in ids:
        if s.delete(sid):
            deleted += 1
    if deleted:
        c.db.modified(key)
        notify(c, b"xdel", key)
        c.server.dirty += deleted
    return deleted


@command("xtrim")
def xtrim(c: Client, argv: list[bytes]):
    a = parse_trim_args(c, argv, False)
    key = argv[1]
    s = stream_write(c, key)
    if s is None:
        return 0
    deleted = trim(s, a)
    if deleted:
        notify(c, b"xtrim", key)
        if a.approx and c.server.propagating:
            rewritten = list(argv)
            rewrite_trim(rewritten, s, a)
            c.server.rewrite_propagation(rewritten)
        c.db.modified(key)
        c.server.dirty += deleted
    return deleted


@command("xsetid")
def xsetid(c: Client, argv: list[bytes]):
    sid = parse_id(argv[2])
    entries_added = -1
    max_xdel = 0
    argc = len(argv)
    i = 3
    while i < argc:
        more = argc - 1 - i
        opt = argv[i].lower()
        if opt == b"entriesadded" and more:
            v = string2ll(argv[i + 1])
            if v is None:
                raise NOT_INT
            if v < 0:
                raise ReplyError("ERR entries_added must be positive")
            entries_added = v
            i += 2
        elif opt == b"maxdeletedid" and more:
            max_xdel = parse_id(argv[i + 1])
            if sid < max_xdel:
                raise ReplyError(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
                )
            i += 2
        else:
            raise SYNTAX_ERR
    key = argv[1]
    s = stream_write(c, key)
    if s is None:
        raise NO_SUCH_KEY
    if s.length > 0:
        if sid < s.last_valid_id():
            raise ReplyError("ERR The ID specified in XSETID is smaller than the target stream top item")
        if entries_added != -1 and s.length > entries_added:
            raise ReplyError(
                "ERR The entries_added specified in XSETID is smaller than the target stream length"
            )
    s.last_id = sid
    if entries_added != -1:
        s.entries_added = entries_added
    if max_xdel:
        s.max_deleted_entry_id = max_xdel
    c.server.dirty += 1
    notify(c, b"xsetid", key)
    return OK


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


class Budget:
    """MAXCOUNT/MAXSIZE: one allowance for the whole reply across streams. The first entry
    always goes; a later one only if it fits (checked before it is delivered)."""

    __slots__ = ("count_left", "size_left", "emitted")

    def __init__(self, maxcount: int, maxsize: int) -> None:
        self.count_left = maxcount or -1
        self.size_left = maxsize or -1
        self.emitted = 0

    def accept(self, sid: int, fv: list[bytes] | None) -> bool:
        if self.count_left == 0:
            return False
        if self.size_left >= 0:
            size = len(encode_entry(sid, fv)) if fv is not None else 40
            if self.emitted and size > self.size_left:
                self.size_left = 0
                return False
            self.size_left = max(self.size_left - size, 0)
        if self.count_left > 0:
            self.count_left -= 1
        self.emitted += 1
        return True

    def spent(self) -> bool:
        return self.count_left == 0 or (self.emitted > 0 and self.size_left == 0)


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
            v = string2ll(argv[i])
            if v is None:
                raise NOT_INT
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


def budget_range(s: Stream, start: int, count: int, budget: Budget) -> bytes | None:
    """XREAD's entries after ``start`` within the reply budget (None: nothing fits)."""
    n = count
    if budget.count_left > 0 and (not n or budget.count_left < n):
        n = budget.count_left
    out = []
    for sid, fv in s.range(start, ID_MAX, n):
        if not budget.accept(sid, fv):
            break
        out.append((sid, fv))
    return entries_bytes(out) if out else None


# -- XREAD -----------------------------------------------------------------------------------------


@command("xread")
def xread(c: Client, argv: list[bytes]):
    serving = c.server.blocking.serving
    r = parse_read_args(argv, False, serving is not None, c.kind == "lua")
    if serving is not None:
        return _xread_served(c, argv, r, serving)
    db = c.db
    first = r.streams_arg
    n = r.nstreams
    ids: list[int] = []
    resolved: list[tuple[int, bytes]] = []
    for k in range(n):
        key = argv[first + k]
        arg = argv[first + n + k]
        s = stream_read(c, key)
        if arg == b"$":
            sid = s.last_id if s is not None else 0
            resolved.append((first + n + k, fmt_id(sid)))
        elif arg == b"+":
            # Redis 7.4: the last entry (entries after last_id - 1).
            if s is not None:
                if s.last_id == 0:
                    raise ReplyError("ERR the stream last element ID is 0-0")
                sid = s.last_id - 1
            else:
                sid = 0
            resolved.append((first + n + k, fmt_id(sid)))
        elif arg == b">":
            raise ReplyError(
                "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."
            )
        else:
            sid = parse_id(arg)
        ids.append(sid)
    served: list[tuple[bytes, bytes]] = []
    count = r.count
    budget = r.budget()
    for k in range(n):
        key = argv[first + k]
        v = db.lookup_read(key)
        if v is None:
            continue
        gt = ids[k]
        if v.length and v.last_valid_id() > gt:
            if budget is None:
                served.append((key, range_bytes(v, gt + 1, ID_MAX, count)))
                continue
            if budget.spent():
                continue
            ents = budget_range(v, gt + 1, count, budget)
            if ents is not None:
                served.append((key, ents))
    if served:
        return read_reply(c, served)
    if r.timeout < 0:
        return NULL_ARRAY
    block_argv = argv
    if resolved:
        block_argv = list(argv)
        for pos, idb in resolved:
            block_argv[pos] = idb
    return Block(argv[first : first + n], r.timeout, block_argv, NULL_ARRAY, wake=b"stream")


def _xread_served(c: Client, argv: list[bytes], r: ReadArgs, key: bytes):
    """A blocked XREAD retried because ``key`` was signalled (serveClientsBlockedOnStreamKey):
    served when the stream's last ID passed the one the client waits after, with that
    key's entries only."""
    first = r.streams_arg
    n = r.nstreams
    keys = argv[first : first + n]
    s = c.db.lookup(key)
    if not is_stream(s):
        return Block(keys, 0, None, NULL_ARRAY, wake=b"stream")
    gt = parse_id(argv[first + n + keys.index(key)])
    if s.last_id <= gt:
        return Block(keys, 0, None, NULL_ARRAY, wake=b"stream")
    count = r.count or XREAD_BLOCKED_DEFAULT_COUNT
    budget = r.budget()
    if budget is not None:
        return read_reply(c, [(key, budget_range(s, gt + 1, count, budget) or b"*0")])
    return read_reply(c, [(key, range_bytes(s, gt + 1, ID_MAX, count))])


# -- Redis 8 commands: specs ------------------------------------------------------------------
#
# Commands newer than 7.0 are not in specs.json: their facts (from the redis.io command
# pages) are built here in the same tagged form.


def policy_arg() -> dict:
    return arg("condition", "oneof", optional=True, since="8.2.0", args=[
        arg("keepref", "pure-token", "KEEPREF"), arg("delref", "pure-token", "DELREF"),
        arg("acked", "pure-token", "ACKED")])


def ids_arg() -> dict:
    return arg("ids", "block", "IDS", args=[arg("numids", "integer"), arg("id", "string", multiple=True)])


def make_spec(name: str, arity: int, flags: list[str], acl: list[str], key_flags: list[str],
              summary: str, since: str, complexity: str, args: list) -> dict:
    """A specs.json-shaped entry for a command with one key at index 1."""
    key_spec = {"m": [
        ["flags", _tag_set(key_flags)],
        ["begin_search", {"m": [["type", "index"], ["spec", {"m": [["index", 1]]}]]}],
        ["find_keys", {"m": [["type", "range"], ["spec", {"m": [["lastkey", 0], ["keystep", 1], ["limit", 0]]}]]}],
    ]}
    return {
        "info": [name, arity, _tag_set(flags), 1, 1, 1, _tag_set(acl), {"s": []},
                 {"s": [key_spec]}, {"s": []}],
        "docs": {"m": [["summary", summary], ["since", since], ["group", "stream"],
                       ["complexity", complexity], ["arguments", args]]},
    }


KEY_ARG = arg("key", "key", key_spec_index=0)


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
    return [parse_id(x) for x in ids]


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


def deleted_effects(c: Client, key: bytes, s: Stream, n: int, event: bytes = b"xdel") -> None:
    """Side effects of ``n`` entries removed by a command (keyspace event, WATCH, dirty)."""
    if n:
        c.db.modified(key)
        notify(c, event, key)
        c.server.dirty += n


# -- XDELEX ------------------------------------------------------------------------------------

XDELEX_SPEC = make_spec(
    "xdelex", -5, ["write", "fast"], ["@write", "@stream", "@fast"], ["RW", "delete"],
    "Deletes one or multiple entries from the stream.", "8.2.0",
    "O(1) for each single item to delete in the stream, regardless of the stream size.",
    [KEY_ARG, policy_arg(), ids_arg()],
)


@command("xdelex", spec=XDELEX_SPEC)
def xdelex(c: Client, argv: list[bytes]):
    policy, ids = parse_policy_and_ids(c, argv, 2)
    key = argv[1]
    s = stream_write(c, key)
    if s is None:
        return [-1] * len(ids)
    refs = pending_refs(s) if policy == REF_DEL else 0
    out = [s.delete_ex(sid, policy) for sid in ids]
    n = out.count(1)
    deleted_effects(c, key, s, n)
    if not n and refs != (pending_refs(s) if policy == REF_DEL else 0):
        # Only dangling references went: still a change replicas must see.
        c.server.dirty += 1
    return out


def pending_refs(s: Stream) -> int:
    """Pending entries across all groups (to tell whether a DELREF changed anything)."""
    return sum(len(g.pel) for g in s.groups())


# -- XCFGSET / XIDMPRECORD ---------------------------------------------------------------------

XCFGSET_SPEC = make_spec(
    "xcfgset", -2, ["write", "fast"], ["@write", "@stream", "@fast"], ["RW", "update"],
    "Sets the IDMP configuration parameters for a stream.", "8.6.0", "O(1)",
    [KEY_ARG, arg("idmp-duration", "integer", "IDMP-DURATION", optional=True),
     arg("idmp-maxsize", "integer", "IDMP-MAXSIZE", optional=True)],
)

BAD_DURATION = ReplyError("ERR invalid duration")
BAD_MAXSIZE = ReplyError("ERR invalid maxsize")


@command("xcfgset", spec=XCFGSET_SPEC)
def xcfgset(c: Client, argv: list[bytes]):
    """Per-stream IDMP settings. The docs say both that XCFGSET clears the producers'
    maps and that it does so when a value changes; we clear on a change, so re-applying
    the same settings (an AOF replay, a deploy script) keeps the dedup window."""
    duration = maxsize = None
    i = 2
    argc = len(argv)
    while i < argc:
        opt = argv[i].lower()
        if i + 1 >= argc:
            raise SYNTAX_ERR
        v = string2ll(argv[i + 1])
        if opt == b"idmp-duration":
            if v is None or not 1 <= v <= 86400:
                raise BAD_DURATION
            duration = v
        elif opt == b"idmp-maxsize":
            if v is None or not 1 <= v <= 10000:
                raise BAD_MAXSIZE
            maxsize = v
        else:
            raise SYNTAX_ERR
        i += 2
    if duration is None and maxsize is None:
        raise SYNTAX_ERR
    key = argv[1]
    s = stream_write(c, key)
    if s is None:
        raise NO_SUCH_KEY
    st = s.idmp
    if st is None:
        st = s.idmp = IdmpState()
    changed = (duration is not None and duration != st.duration) or (
        maxsize is not None and maxsize != st.maxsize
    )
    if duration is not None:
        st.duration = duration
    if maxsize is not None:
        st.maxsize = maxsize
    if changed:
        st.producers.clear()
    st.configured = True
    c.db.modified(key)
    c.server.dirty += 1
    return OK


XIDMPRECORD_SPEC = make_spec(
    "xidmprecord", 5, ["write", "denyoom", "fast"], ["@write", "@stream", "@fast"], ["RW", "update"],
    "An internal command for setting IDMP metadata on an existing stream message.", "8.8.0", "O(1)",
    [KEY_ARG, arg("pid", "string"), arg("iid", "string"), arg("stream-id", "string")],
)


@command("xidmprecord", spec=XIDMPRECORD_SPEC)
def xidmprecord(c: Client, argv: list[bytes]):
    """Record (pid, iid) -> entry ID, as an AOF rewrite replays IDMP state. The docs list
    its error cases but not their texts; ours name the case. From the AOF loader an ID
    whose entry was deleted since is accepted: the iid still guards against a resend."""
    key, pid, iid = argv[1], argv[2], argv[3]
    sid = parse_id(argv[4])
    if not pid or not iid:
        raise IDMP_EMPTY
    s = stream_write(c, key)
    if s is None:
        raise NO_SUCH_KEY
    if not s.exists(sid) and not must_obey(c):
        raise ReplyError("ERR the stream ID does not refer to an existing entry")
    st = s.idmp
    if st is None:
        st = s.idmp = IdmpState()
    known = st.lookup(pid, iid, now_ms())
    if known is not None:
        if known != sid:
            raise ReplyError("ERR the producer ID and idempotent ID already map to another entry")
        return OK
    st.record(pid, iid, sid, now_ms())
    c.db.modified(key)
    c.server.dirty += 1
    return OK
