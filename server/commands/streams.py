"""Stream commands, part one (Redis 7.0's t_stream.c): XADD, XRANGE, XREVRANGE, XLEN, XDEL,
XTRIM, XSETID and XREAD, Redis 8's XDELEX, XCFGSET and XIDMPRECORD, plus what the
consumer-group family (stream_groups.py, xinfo.py) shares besides arguments and replies:
key lookups, keyspace events, trimming and the Redis 8 command specs.

The family's modules: argument parsing in stream_args.py, reply shaping in
stream_replies.py, consumer groups in stream_groups.py, XINFO in xinfo.py.

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
decoded-node cache are kept per node (see ``stream_replies._NODE_ENC``), so repeated reads
of the same entries cost a list slice.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from rill.protocol.reply import NULL_ARRAY, OK, Raw, ReplyError
from rill.storage.stream import (
    ID_MAX,
    MASK64,
    REF_ACKED,
    REF_DEL,
    IdmpState,
    Stream,
    StreamIDError,
    StreamSizeError,
)
from rill.storage.stream.active import ActiveStream

from .. import notify as events
from ..client import Client
from ..outcomes import Block
from .args import NO_SUCH_KEY, NOT_INT, SYNTAX_ERR, WRONGTYPE, string2ll
from .stream_args import (
    IDMP_EMPTY,
    TRIM_MAXLEN,
    TRIM_NONE,
    XREAD_BLOCKED_DEFAULT_COUNT,
    ReadArgs,
    TrimArgs,
    count_arg,
    must_obey,
    parse_id,
    parse_policy_and_ids,
    parse_range,
    parse_read_args,
    parse_trim_args,
)
from .stream_replies import budget_range, fmt_id, one_stream_head, range_bytes, read_reply
from .table import TABLE, arg, command, command_spec, key_at_index

ID_TOO_SMALL = ReplyError(
    "ERR The ID specified in XADD is equal or smaller than the target stream top item"
)
ID_ZERO = ReplyError("ERR The ID specified in XADD must be greater than 0-0")
EXHAUSTED = ReplyError("ERR The stream has exhausted the last possible ID, unable to add more items")
TOO_LARGE = ReplyError("ERR Elements are too large to be stored")
XADD_ARITY = ReplyError("ERR wrong number of arguments for 'xadd' command")
# Redis 8.6 documents no text for this one (nor for stream_args.IDMP_EMPTY); ours says what
# is wrong.
IDMP_EXPLICIT_ID = ReplyError("ERR IDMP and IDMPAUTO can be used only with the auto-generated ID '*'")


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython): where the fastest form differs between the modes, this picks it.
_COMPILED = type(_probe).__name__ != "function"


# -- small helpers ---------------------------------------------------------------------------


# The stream commands' one clock hook: None reads the wall clock; a test that needs the
# clock to go back sets a function returning milliseconds here (``now_ms`` and XADD's
# common form both honour it), since the compiled build reads the wall clock in C, where
# patching time.time reaches nothing.
clock = None


def now_ms() -> int:
    """The wall clock in milliseconds (Redis's mstime()): XADD's ``*`` IDs, IDMP's expiry,
    consumers' seen and active times. Read in C when compiled (streams.pxd's _c_wall_ms)."""
    if clock is not None:
        return clock()
    if _COMPILED:
        return _c_wall_ms()  # noqa: F821 (streams.pxd declares it)
    return int(time.time() * 1000)


def notify(c: Client, event: bytes, key: bytes) -> None:
    """A stream keyspace event (class 't')."""
    notifier = events.notifier
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


# The server whose node limits Stream's class attributes hold; None when none does or
# when its stream-node-max-* changed since (node_limits_changed, the server's config
# listener). XADD re-syncs only when this is not its server: one compare a call, where
# comparing the class's and the server's two limits read four attributes (~0.6k Ir).
_limits_of = None


def sync_node_limits(c: Client) -> None:
    """Node limits are server-wide CONFIG values; the storage keeps them on the class, so
    they are the calling server's before a write that can start a node."""
    global _limits_of
    server = c.server
    if server is not _limits_of:
        Stream.node_max_bytes = server.stream_node_max_bytes
        Stream.node_max_entries = server.stream_node_max_entries
        _limits_of = server


def node_limits_changed(server: Any) -> None:
    """The server's config changed (its listener calls this): its node limits, if Stream
    holds them, are synced again by the next write."""
    global _limits_of
    if _limits_of is server:
        _limits_of = None


# -- trimming, the node GC setting, IDMPAUTO ---------------------------------------------------


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


def auto_iid(fields_values: list[bytes]) -> bytes:
    """IDMPAUTO's idempotent ID: a digest of the field/value pairs (length-prefixed so
    different splits of the same bytes differ), in hex so it reads well in XINFO/AOF."""
    h = hashlib.blake2b(digest_size=16)
    for x in fields_values:
        h.update(b"%d:" % len(x))
        h.update(x)
    return h.hexdigest().encode()


# -- XADD ------------------------------------------------------------------------------------


def xadd(c: Client, argv: list[bytes]):
    """XADD. The common form (``XADD key * f v ...``) is served here; streams.pxd types it
    for the compiled build (a ``.pxd`` cannot type a decorated def, so the handler is
    registered below rather than by ``@command``)."""
    argc = len(argv)
    if argv[2] == b"*" and argc & 1:
        # The common form, XADD key * f v [f v ...]: no options to parse.
        db = c.db
        key = argv[1]
        v = db.lookup(key)
        if v is None:
            v = c.server.new_stream()
            db.set(key, v)
        elif type(v) is not Stream and not isinstance(v, Stream):
            raise WRONGTYPE
        s = v  # typed (the stream's core) when compiled: its fields are C reads
        server = c.server
        if server is not _limits_of:
            sync_node_limits(c)
        if s.last_id >= ID_MAX:
            raise EXHAUSTED
        try:
            if _COMPILED and type(v) is ActiveStream:
                # An Active-Active stream's own XADD: its add's body (active.py's _add_own)
                # as a C call, where s.add would look up and call ActiveStream.add, a
                # Python method overriding the core's (Cython's override check, then a
                # Python call). Whole-writer callgrind, XADD with two peers: see
                # docs/hot-core.md (active.py's row).
                fv = argv[3:] if type(argv) is list else list(argv[3:])  # _add_own takes a list
                sid = _add_own(v, fv, None, now_ms())  # noqa: F821 (streams.pxd cimports it)
            else:
                sid = s.add(argv[3:], None, now_ms())
        except StreamIDError:
            raise ID_TOO_SMALL from None
        except StreamSizeError:
            raise TOO_LARGE from None
        if _COMPILED:
            # Formatted from C integers: bytes' %d goes through a str per number. The
            # halves add() kept are this ID's when it is the very object (stream.pxd's
            # _l_id; an Active-Active stream's add keeps none, and is shifted here).
            if s._l_id is sid:
                idb = _id_bytes(s._l_ms, s._l_seq)  # noqa: F821 (streams.pxd cimports it)
            else:
                idb = _id_bytes(sid >> 64, sid & MASK64)  # noqa: F821 (streams.pxd cimports it)
        else:
            idb = b"%d-%d" % (sid >> 64, sid & MASK64)
        if db.watched and key in db.watched:
            db.modified(key)
        if server.blocking.waiters:  # XADD wakes its key's waiters (see BlockingRegistry.signal_command)
            server.blocking.signal(db.id, key)
        if events.notifier is not None:
            notify(c, b"xadd", key)
        server.dirty += 1
        if server.commands_wanted:  # (not for Active-Active's feed alone: it reads the journal)
            new = list(argv)
            new[2] = idb
            server.rewrite_propagation(new)
        return idb
    return _xadd_general(c, argv)


command("xadd")(xadd)

if _COMPILED:
    # The dispatcher's C entry for the typed handler (streams.pxd's _e_xadd): a C call from
    # fastpath's loop and from the Active-Active engine's XADD, not a Python one.
    _c_set_entry(TABLE.commands[b"xadd"], xadd, _e_xadd)  # noqa: F821


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
        s = c.server.new_stream()
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
    explicit = 0
    if a.id_given and a.seq_given:
        # A user's ID: an Active-Active stream applies its ID mode (the plain one keeps it).
        try:
            explicit = s.explicit_id(a.id, b"-" not in argv[a.id_pos])
        except StreamIDError as e:
            raise ReplyError(f"ERR {e}") from None
        except StreamSizeError:
            raise TOO_LARGE from None
    try:
        if not a.id_given:
            sid = s.add(fv, None, now_ms())
        elif a.seq_given:
            sid = s.add(fv, explicit)
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
    if rewritten is not None and server.commands_wanted:
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
                v = count_arg(argv[j + 1])
                count = v if v > 0 else 0
                j += 1
            else:
                raise SYNTAX_ERR
            j += 1
    # stream_read's lookup and check, here so that compiled (streams.pxd) the database is a
    # C read and its lookup a C call, not a Python call through stream_read.
    db = c.db
    s = db.lookup_read(argv[1])
    if s is None:
        return Raw(b"*0\r\n")
    if type(s) is not Stream and not isinstance(s, Stream):
        raise WRONGTYPE
    if count == 0:
        return NULL_ARRAY
    return Raw(range_bytes(s, start, end, count if count > 0 else 0, rev, None, b"", True))


def xrange_(c: Client, argv: list[bytes]):
    return _xrange(c, argv, False)


def xrevrange(c: Client, argv: list[bytes]):
    return _xrange(c, argv, True)


# Registered after their definition: streams.pxd types them (a .pxd cannot type a decorated def).
command("xrange")(xrange_)
command("xrevrange")(xrevrange)

if _COMPILED:
    # Their C entries (streams.pxd's _e_xrange, _e_xrevrange), as XADD's.
    _c_set_entry(TABLE.commands[b"xrange"], xrange_, _e_xrange)  # noqa: F821
    _c_set_entry(TABLE.commands[b"xrevrange"], xrevrange, _e_xrevrange)  # noqa: F821


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
    try:
        s.set_id(sid, entries_added, max_xdel)
    except StreamIDError as e:  # Active-Active: never below the last ID
        raise ReplyError(f"ERR {e}") from None
    c.server.dirty += 1
    notify(c, b"xsetid", key)
    return OK


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
                if n == 1:
                    # The whole reply in one join (range_bytes' head).
                    return Raw(range_bytes(
                        v, gt + 1, ID_MAX, count, False, None, one_stream_head(c, key), True
                    ))
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
# pages) are built with the command table's helpers, in the same tagged form.


def policy_arg() -> dict:
    return arg("condition", "oneof", optional=True, since="8.2.0", args=[
        arg("keepref", "pure-token", "KEEPREF"), arg("delref", "pure-token", "DELREF"),
        arg("acked", "pure-token", "ACKED")])


def ids_arg() -> dict:
    return arg("ids", "block", "IDS", args=[arg("numids", "integer"), arg("id", "string", multiple=True)])


def make_spec(name: str, arity: int, flags: list[str], acl: list[str], key_flags: list[str],
              summary: str, since: str, complexity: str, args: list) -> dict:
    """A stream command's specs.json-shaped entry: one key, at index 1."""
    return command_spec(name, arity, flags, acl, group="stream", summary=summary, since=since,
                        complexity=complexity, args=args, key_specs=[key_at_index(key_flags)], keys=(1, 1, 1))


KEY_ARG = arg("key", "key", key_spec_index=0)


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
