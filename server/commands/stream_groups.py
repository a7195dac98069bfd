"""Stream commands, part two (Redis 7.0's t_stream.c): consumer groups -- XGROUP, XREADGROUP,
XACK, XPENDING, XCLAIM, XAUTOCLAIM, and Redis 8's XACKDEL and XNACK. (XINFO is xinfo.py.)

Replies and errors are Redis 7.0.15's, RESP2 and RESP3.

Propagation follows Redis: XREADGROUP itself never goes out; each entry it delivers is
propagated as ``XCLAIM key group consumer 0 id TIME ms RETRYCOUNT n FORCE JUSTID LASTID id``
(with NOACK: ``XGROUP CREATECONSUMER`` for a new consumer and one ``XGROUP SETID ...
ENTRIESREAD n``); XCLAIM and XAUTOCLAIM likewise propagate one XCLAIM per entry they touched
(including entries found deleted, whose NACK goes away). Several effects travel as one
MULTI/EXEC (the dispatcher wraps them).

Blocking: XREADGROUP ... BLOCK waits with ``on_gone``, so a deleted key, a type change or a
destroyed group reaches the waiter as Redis's served-waiter errors.
"""

from __future__ import annotations

from rill.protocol.reply import NULL_ARRAY, OK, Raw, ReplyError
from rill.protocol.stream_entries import encode_entry
from rill.storage.stream import (
    ID_MAX,
    REF_ACKED,
    REF_DEL,
    SCG_INVALID_ENTRIES_READ,
    ConsumerGroup,
    Stream,
)

from ..client import Client
from ..outcomes import Block
from .args import NOT_INT, SYNTAX_ERR, help_reply, string2ll
from .stream_args import (
    XREAD_BLOCKED_DEFAULT_COUNT,
    parse_id,
    parse_ids,
    parse_ids_block,
    parse_policy_and_ids,
    parse_range,
    parse_read_args,
    subcommand_error,
)
from .stream_replies import (
    Budget,
    bulk,
    fmt_id,
    nogroup,
    nogroup_for_key,
    range_bytes,
    read_reply,
)
from .streams import (
    KEY_ARG,
    deleted_effects,
    ids_arg,
    is_stream,
    make_spec,
    notify,
    now_ms,
    policy_arg,
    stream_read,
    stream_write,
)
from .table import TABLE, arg, command


def _probe() -> None:
    """Only its type matters: see _COMPILED."""


# Whether this module runs compiled (what ``cython.compiled`` says, without importing
# Cython): then XREADGROUP and XACK get C entries (stream_groups.pxd), names that exist only
# in the compiled module; ``_COMPILED`` guards them.
_COMPILED = type(_probe).__name__ != "function"

UNBLOCKED_GONE = ReplyError("UNBLOCKED the stream key no longer exists")
NOGROUP_BLOCKED = ReplyError("NOGROUP the consumer group this client was blocked on no longer exists")
DOLLAR_IN_GROUP = ReplyError(
    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of "
    "this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would "
    "just return an empty result set."
)
KEY_MUST_EXIST = ReplyError(
    "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use "
    "the MKSTREAM option to create an empty stream automatically."
)
BUSYGROUP = ReplyError("BUSYGROUP Consumer Group name already exists")

_ZERO = b"0"


def _consumer_created(c: Client, key: bytes, group: bytes, name: bytes, propagate: bool) -> None:
    """streamCreateConsumer's side effects (SCC_DEFAULT): dirty, the keyspace event, and for
    XREADGROUP NOACK an XGROUP CREATECONSUMER for replicas and the AOF."""
    server = c.server
    server.dirty += 1
    notify(c, b"xgroup-createconsumer", key)
    if propagate and server.propagating:
        server.also_propagate(c.db.id, [b"XGROUP", b"CREATECONSUMER", key, group, name])


def _xclaim_argv(key: bytes, group: ConsumerGroup, group_name: bytes, idb: bytes, nack) -> list[bytes]:
    """streamPropagateXCLAIM: the idempotent form that recreates one NACK."""
    return [
        b"XCLAIM", key, group_name, nack.consumer.name, _ZERO, idb,
        b"TIME", b"%d" % nack.delivery_time, b"RETRYCOUNT", b"%d" % nack.delivery_count,
        b"FORCE", b"JUSTID", b"LASTID", fmt_id(group.last_id),
    ]


def _setid_argv(key: bytes, group: ConsumerGroup, group_name: bytes) -> list[bytes]:
    """streamPropagateGroupID."""
    return [
        b"XGROUP", b"SETID", key, group_name, fmt_id(group.last_id),
        b"ENTRIESREAD", b"%d" % group.entries_read,
    ]


# -- XREADGROUP ------------------------------------------------------------------------------


def _deliver(
    c: Client, key: bytes, s: Stream, g: ConsumerGroup, group_name: bytes, consumer_name: bytes,
    count: int, noack: bool, now: int, claim: int = -1, budget: Budget | None = None,
) -> tuple[bytes, int]:
    """Serve ``>``: with CLAIM first the idle pending entries, then new entries, to the
    consumer (created if needed), with propagation; the encoded entries and how many."""
    consumer, created = g.get_or_create_consumer(consumer_name, now)
    if created:
        _consumer_created(c, key, group_name, consumer_name, noack)
    accept = budget.accept if budget is not None else None
    claimed_parts: list[bytes] = []
    if claim >= 0:
        claimed, dropped = s.claim_idle(g, consumer, claim, count, now, accept)
        server = c.server
        if server.propagating:
            for sid in dropped:
                server.also_propagate(c.db.id, [b"XACK", key, group_name, fmt_id(sid)])
            for sid, _fv, _idle, _prev in claimed:
                server.also_propagate(
                    c.db.id, _xclaim_argv(key, g, group_name, fmt_id(sid), g.pel.get(sid))
                )
        server.dirty += len(claimed) + len(dropped)
        # Claimed entries carry their delivery metadata (8.4: as integers): ms idle
        # before this delivery and the deliveries before it. New entries keep 2 fields.
        for sid, fv, idle, prev in claimed:
            ent = encode_entry(sid, fv)
            claimed_parts.append(b"*4" + ent[2:] + b"\r\n:%d\r\n:%d" % (idle, prev))
        if count:
            count -= len(claimed)
            if count <= 0:
                n = len(claimed_parts)
                return (b"*%d\r\n" % n + b"\r\n".join(claimed_parts)) if n else b"*0", n
    if budget is None and not claimed_parts and not s.cursor_reads:
        # The common case: encoded straight from the nodes, only the IDs taken as values.
        sids: list[int] = []
        ents = b"*0"
        if g.last_id < ID_MAX:
            ents = range_bytes(s, g.last_id + 1, ID_MAX, count, sids=sids)
            if sids:
                s.record_group_read(g, consumer, sids, now, noack)
    else:
        spent = budget is not None and budget.spent()
        items = [] if spent else s.read_group(g, consumer, count, now, noack, accept)
        sids = [sid for sid, _fv in items]
        parts = claimed_parts + [encode_entry(sid, fv) for sid, fv in items]
        ents = b"*%d\r\n" % len(parts) + b"\r\n".join(parts) if parts else b"*0"
    server = c.server
    if sids and server.propagating:
        db_id = c.db.id
        also = server.also_propagate
        if noack:
            also(db_id, _setid_argv(key, g, group_name))
        else:
            t = b"%d" % now
            for sid in sids:
                idb = fmt_id(sid)
                # Each delivery moved last_id to this entry: LASTID is the entry itself.
                also(db_id, [
                    b"XCLAIM", key, group_name, consumer_name, _ZERO, idb, b"TIME", t,
                    b"RETRYCOUNT", b"1", b"FORCE", b"JUSTID", b"LASTID", idb,
                ])
    return ents, len(claimed_parts) + len(sids)


def _history_bytes(items: list, resp3: bool) -> bytes:
    """A consumer's history: entries, and ``[id, nil]`` for those deleted since delivery."""
    n = len(items)
    if not n:
        return b"*0"
    parts = [b"*%d" % n]
    null = b"_" if resp3 else b"*-1"
    for sid, fv in items:
        if fv is None:
            idb = fmt_id(sid)
            parts.append(b"*2\r\n$%d\r\n%b\r\n%b" % (len(idb), idb, null))
        else:
            parts.append(encode_entry(sid, fv))
    return b"\r\n".join(parts)


def xreadgroup(c: Client, argv: list[bytes]):
    server = c.server
    serving = server.blocking.serving
    r = parse_read_args(argv, True, serving is not None, c.kind == "lua")
    group_name = r.group
    consumer_name = r.consumer
    first = r.streams_arg
    n = r.nstreams
    keys = argv[first : first + n]
    if serving is not None:
        return _xreadgroup_served(c, keys, r, serving)
    groups: list[ConsumerGroup] = []
    ids: list[int] = []
    for k in range(n):
        key = keys[k]
        s = stream_read(c, key)
        g = s.get_group(group_name) if s is not None else None
        if g is None:
            raise nogroup(key, group_name, b" in XREADGROUP with GROUP option")
        groups.append(g)
        arg = argv[first + n + k]
        if arg == b"$":
            raise DOLLAR_IN_GROUP
        ids.append(ID_MAX if arg == b">" else parse_id(arg))
    served: list[tuple[bytes, bytes]] = []
    now = now_ms()
    db = c.db
    budget = r.budget()
    for k in range(n):
        key = keys[k]
        s = db.lookup_read(key)
        if s is None:
            continue
        if budget is not None and budget.spent():
            break
        g = groups[k]
        gt = ids[k]
        if gt != ID_MAX:
            consumer, created = g.get_or_create_consumer(consumer_name, now)
            if created:
                _consumer_created(c, key, group_name, consumer_name, r.noack)
            items = s.read_group_history(
                consumer, gt + 1, r.count, now, accept=budget.accept if budget else None
            )
            if budget is not None and not items:
                continue
            served.append((key, _history_bytes(items, c.resp3)))
        elif s.undelivered(g) or (r.claim >= 0 and _has_idle(g, r.claim, now)):
            ents, got = _deliver(
                c, key, s, g, group_name, consumer_name, r.count, r.noack, now, r.claim, budget
            )
            if not got and (budget is not None or r.claim >= 0):
                continue
            served.append((key, ents))
        else:
            continue
        server.dirty += 1
    if served:
        server.prevent_propagation()  # effects go out as XCLAIM / XGROUP, never as XREADGROUP
        return read_reply(c, served)
    if r.timeout < 0:
        return NULL_ARRAY
    return Block(keys, r.timeout, None, NULL_ARRAY, wake=b"stream", on_gone=True)


def _xreadgroup_served(c: Client, keys: list[bytes], r, key: bytes):
    """A blocked XREADGROUP retried for ``key``: Redis's served-waiter errors when the key
    or the group went away, else new entries once the stream moved past the group."""
    s = c.db.lookup(key)
    if not is_stream(s):
        raise UNBLOCKED_GONE
    block = Block(keys, 0, None, NULL_ARRAY, wake=b"stream", on_gone=True)
    g = s.get_group(r.group)
    if g is None:
        raise NOGROUP_BLOCKED
    now = now_ms()
    nothing_new = not s.undelivered(g) if s.cursor_reads else s.last_id <= g.last_id
    if nothing_new and not (r.claim >= 0 and _has_idle(g, r.claim, now)):
        return block
    count = r.count or XREAD_BLOCKED_DEFAULT_COUNT
    server = c.server
    dirty = server.dirty
    ents, n = _deliver(
        c, key, s, g, r.group, r.consumer, count, r.noack, now, r.claim, r.budget()
    )
    if not n:
        return block
    if server.dirty != dirty or (n and server.propagating):
        # Only when effects were recorded: the flag is reset by their propagation.
        server.prevent_propagation()
    return read_reply(c, [(key, ents)])


def _has_idle(g: ConsumerGroup, min_idle: int, now: int) -> bool:
    """Whether CLAIM would find something: a released entry or one idle long enough."""
    if g.nacked:
        return True
    for _sid, nack in g.pel.items():
        if now - nack.delivery_time >= min_idle:
            return True
    return False


# -- XACK / XPENDING -----------------------------------------------------------------------------


def xack(c: Client, argv: list[bytes]):
    s = stream_read(c, argv[1])
    g = s.get_group(argv[2]) if s is not None else None
    if g is None:
        return 0
    acked = g.ack_many(parse_ids(argv[3:]))
    if acked:
        c.server.dirty += acked
    return acked


command("xreadgroup")(xreadgroup)
command("xack")(xack)

if _COMPILED:
    # The dispatcher's C entries for the typed handlers (stream_groups.pxd's _e_xreadgroup,
    # _e_xack): C calls from fastpath's loop, not Python ones.
    _c_set_entry(TABLE.commands[b"xreadgroup"], xreadgroup, _e_xreadgroup)  # noqa: F821
    _c_set_entry(TABLE.commands[b"xack"], xack, _e_xack)  # noqa: F821


@command("xpending")
def xpending(c: Client, argv: list[bytes]):
    argc = len(argv)
    if argc != 3 and (argc < 6 or argc > 9):
        raise SYNTAX_ERR
    key, group_name = argv[1], argv[2]
    count = 0
    minidle = 0
    consumer_name = None
    start = end = 0
    if argc >= 6:
        idx = 3
        if argv[3].lower() == b"idle":
            v = string2ll(argv[4])
            if v is None:
                raise NOT_INT
            minidle = v
            if argc < 8:
                raise SYNTAX_ERR
            idx += 2
        v = string2ll(argv[idx + 2])
        if v is None:
            raise NOT_INT
        count = v if v > 0 else 0
        start, end = parse_range(argv[idx], argv[idx + 1])
        if idx + 3 < argc:
            consumer_name = argv[idx + 3]
    s = stream_read(c, key)
    g = s.get_group(group_name) if s is not None else None
    if g is None:
        raise nogroup(key, group_name)
    if argc == 3:
        total, first, last, per = g.pending_summary()
        if not total:
            return [0, None, None, NULL_ARRAY]
        return [
            total, fmt_id(first), fmt_id(last),  # type: ignore[arg-type]
            [[name, b"%d" % pending] for name, pending in per],
        ]
    consumer = None
    if consumer_name is not None:
        consumer = g.lookup_consumer(consumer_name)
        if consumer is None:
            return []
    now = now_ms()
    out = []
    for sid, nack in g.pending_range(start, end, count, consumer, minidle, now):
        elapsed = now - nack.delivery_time
        if g.is_released(sid):
            # XNACKed (Redis 8.8): no owner and no delivery time, shown as "" and -1.
            out.append([fmt_id(sid), b"", -1, nack.delivery_count])
            continue
        owner = nack.consumer.name if nack.consumer is not None else b""
        out.append([fmt_id(sid), owner, elapsed if elapsed > 0 else 0, nack.delivery_count])
    return out


# -- XCLAIM / XAUTOCLAIM ---------------------------------------------------------------------------


def _claim_int(arg: bytes, what: bytes) -> int:
    v = string2ll(arg)
    if v is None:
        raise ReplyError(b"ERR Invalid %b argument for XCLAIM" % what)
    return v


@command("xclaim")
def xclaim(c: Client, argv: list[bytes]):
    key, group_name, consumer_name = argv[1], argv[2], argv[3]
    s = stream_read(c, key)
    g = s.get_group(group_name) if s is not None else None
    if g is None:
        raise nogroup(key, group_name)
    minidle = _claim_int(argv[4], b"min-idle-time")
    if minidle < 0:
        minidle = 0
    argc = len(argv)
    ids: list[int] = []
    j = 5
    while j < argc:
        try:
            ids.append(parse_id(argv[j]))
        except ReplyError:
            break
        j += 1
    id_args = argv[5:j]
    now = now_ms()
    deliverytime = -1
    retrycount = -1
    force = justid = False
    lastid = 0
    while j < argc:
        more = argc - 1 - j
        opt = argv[j].lower()
        if opt == b"force":
            force = True
        elif opt == b"justid":
            justid = True
        elif opt == b"idle" and more:
            j += 1
            deliverytime = now - _claim_int(argv[j], b"IDLE option")
        elif opt == b"time" and more:
            j += 1
            deliverytime = _claim_int(argv[j], b"TIME option")
        elif opt == b"retrycount" and more:
            j += 1
            retrycount = _claim_int(argv[j], b"RETRYCOUNT option")
        elif opt == b"lastid" and more:
            j += 1
            lastid = parse_id(argv[j])
        else:
            raise ReplyError(b"ERR Unrecognized XCLAIM option '%b'" % argv[j])
        j += 1
    dirty = c.server.dirty
    res = s.claim(
        g, consumer_name, ids, now, minidle,
        None if deliverytime == -1 else deliverytime,
        retrycount, force, justid, lastid,
    )
    server = c.server
    if res.consumer_created:
        _consumer_created(c, key, group_name, consumer_name, False)
    propagating = server.propagating
    db_id = c.db.id
    # Each event is matched to the argument it came from (events keep argument order):
    # Redis propagates the ID as the client typed it.
    pos = 0
    for sid, nack, _claimed in res.events:
        while ids[pos] != sid:
            pos += 1
        if propagating:
            server.also_propagate(db_id, _xclaim_argv(key, g, group_name, id_args[pos], nack))
        pos += 1
        server.dirty += 1
    if res.propagate_last_id:
        if propagating:
            server.also_propagate(db_id, _setid_argv(key, g, group_name))
        server.dirty += 1
    if server.dirty != dirty:
        server.prevent_propagation()  # the XCLAIMs above say it all
    if justid:
        return [fmt_id(sid) for sid in res.claimed]
    parts = [b"*%d" % len(res.claimed)]
    for sid in res.claimed:
        parts.append(encode_entry(sid, s.lookup(sid) or []))
    return Raw(b"\r\n".join(parts) + b"\r\n")


_XAUTOCLAIM_MAX_COUNT = (2**63 - 1) // 16


@command("xautoclaim")
def xautoclaim(c: Client, argv: list[bytes]):
    key, group_name, consumer_name = argv[1], argv[2], argv[3]
    minidle = string2ll(argv[4])
    if minidle is None:
        raise ReplyError("ERR Invalid min-idle-time argument for XAUTOCLAIM")
    if minidle < 0:
        minidle = 0
    start, _end = parse_range(argv[5], b"+")
    count = 100
    justid = False
    argc = len(argv)
    j = 6
    while j < argc:
        more = argc - 1 - j
        opt = argv[j].lower()
        if opt == b"count" and more:
            v = string2ll(argv[j + 1])
            if v is None or v < 1 or v > _XAUTOCLAIM_MAX_COUNT:
                raise ReplyError("ERR COUNT must be > 0")
            count = v
            j += 1
        elif opt == b"justid":
            justid = True
        else:
            raise SYNTAX_ERR
        j += 1
    s = stream_read(c, key)
    g = s.get_group(group_name) if s is not None else None
    if g is None:
        raise nogroup(key, group_name)
    now = now_ms()
    dirty = c.server.dirty
    res = s.autoclaim(g, consumer_name, minidle, start, count, now, justid)
    server = c.server
    if res.consumer_created:
        _consumer_created(c, key, group_name, consumer_name, False)
    propagating = server.propagating
    db_id = c.db.id
    for sid, nack, _claimed in res.events:
        if propagating:
            server.also_propagate(db_id, _xclaim_argv(key, g, group_name, fmt_id(sid), nack))
        server.dirty += 1
    if server.dirty != dirty:
        server.prevent_propagation()
    if justid:
        claimed = b"*%d" % len(res.claimed) + b"".join(
            b"\r\n" + bulk(fmt_id(sid)) for sid in res.claimed
        )
    else:
        claimed = b"\r\n".join(
            [b"*%d" % len(res.claimed)] + [encode_entry(sid, s.lookup(sid) or []) for sid in res.claimed]
        )
    deleted = b"*%d" % len(res.deleted) + b"".join(b"\r\n" + bulk(fmt_id(sid)) for sid in res.deleted)
    return Raw(b"*3\r\n%b\r\n%b\r\n%b\r\n" % (bulk(fmt_id(res.next_id)), claimed, deleted))


# -- XGROUP --------------------------------------------------------------------------------------

_XGROUP_HELP = [
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
]


@command("xgroup|help")
def xgroup_help(c: Client, argv: list[bytes]):
    return help_reply(_XGROUP_HELP)


def _xgroup(c: Client, argv: list[bytes]):
    """xgroupCommand: the checks every subcommand shares, in Redis's order, then dispatch."""
    argc = len(argv)
    sub = argv[1].lower()
    key = argv[2]
    group_name = argv[3]
    create = sub == b"create"
    setid = sub == b"setid"
    mkstream = False
    entries_read = SCG_INVALID_ENTRIES_READ
    i = 5
    while i < argc:
        opt = argv[i].lower()
        if create and opt == b"mkstream":
            mkstream = True
            i += 1
        elif (create or setid) and opt == b"entriesread" and i + 1 < argc:
            v = string2ll(argv[i + 1])
            if v is None:
                raise NOT_INT
            if v < 0 and v != SCG_INVALID_ENTRIES_READ:
                raise ReplyError("ERR value for ENTRIESREAD must be positive or -1")
            entries_read = v
            i += 2
        else:
            raise subcommand_error(argv)
    s = stream_write(c, key)
    g = None
    if not mkstream:
        if s is None:
            raise KEY_MUST_EXIST
        g = s.get_group(group_name)
        if g is None and sub in (b"setid", b"createconsumer", b"delconsumer"):
            raise nogroup_for_key(group_name, key)
    server = c.server
    if create and 5 <= argc <= 8:
        arg = argv[4]
        if arg == b"$":
            sid = s.last_id if s is not None else 0
        else:
            sid = parse_id(arg)
        created = s is None
        if created:
            s = server.new_stream()
            c.db.set(key, s)
            c.db.modified(key)
        if s.create_group(group_name, sid, entries_read) is None:
            raise BUSYGROUP
        if created:
            server.blocking.signal(c.db.id, key)  # a new key wakes waiters; a new group alone does not
        server.dirty += 1
        notify(c, b"xgroup-create", key)
        return OK
    if setid and (argc == 5 or argc == 7):
        arg = argv[4]
        sid = s.last_id if arg == b"$" else parse_id(arg, 0, False)
        g.last_id = sid
        g.entries_read = entries_read
        server.dirty += 1
        notify(c, b"xgroup-setid", key)
        return OK
    if sub == b"destroy" and argc == 4:
        if g is None:
            return 0
        s.destroy_group(group_name)
        server.dirty += 1
        notify(c, b"xgroup-destroy", key)
        server.blocking.signal(c.db.id, key)  # wakes XREADGROUP waiters with -NOGROUP
        return 1
    if sub == b"createconsumer" and argc == 5:
        if g.create_consumer(argv[4], now_ms()) is None:
            return 0
        server.dirty += 1
        notify(c, b"xgroup-createconsumer", key)
        return 1
    if sub == b"delconsumer" and argc == 5:
        pending = g.delete_consumer(argv[4])
        if pending is None:
            return 0
        server.dirty += 1
        notify(c, b"xgroup-delconsumer", key)
        return pending
    raise subcommand_error(argv)


for _sub in ("create", "setid", "destroy", "createconsumer", "delconsumer"):
    command(f"xgroup|{_sub}")(_xgroup)


# -- XACKDEL / XNACK (Redis 8.2 / 8.8) ------------------------------------------------------------

XACKDEL_SPEC = make_spec(
    "xackdel", -6, ["write", "fast"], ["@write", "@stream", "@fast"], ["RW", "update", "delete"],
    "Acknowledges and conditionally deletes one or multiple entries for a stream consumer group.",
    "8.2.0", "O(1) for each entry ID processed.",
    [KEY_ARG, arg("group", "string"), policy_arg(), ids_arg()],
)


@command("xackdel", spec=XACKDEL_SPEC)
def xackdel(c: Client, argv: list[bytes]):
    """Per ID: -1 no such entry, 1 acknowledged and deleted, 2 acknowledged but kept
    (ACKED: another group still references it). A missing key answers -1 for every ID;
    a missing group is NOGROUP, as the other group commands answer."""
    key, group_name = argv[1], argv[2]
    policy, ids = parse_policy_and_ids(c, argv, 3)
    s = stream_write(c, key)
    if s is None:
        return [-1] * len(ids)
    g = s.get_group(group_name)
    if g is None:
        raise nogroup(key, group_name)
    out = []
    acked = 0
    for sid in ids:
        if g.ack(sid):
            acked += 1
        if policy == REF_ACKED:
            if not s.exists(sid):
                out.append(-1)
            elif s.entry_referenced(sid):
                out.append(2)
            else:
                s.delete(sid)
                out.append(1)
            continue
        deleted = s.delete(sid)
        if policy == REF_DEL:
            s.drop_refs(sid)
        out.append(1 if deleted else -1)
    n = out.count(1)
    deleted_effects(c, key, s, n)
    if acked and not n:
        c.server.dirty += acked
    return out


XNACK_SPEC = make_spec(
    "xnack", -7, ["write", "fast"], ["@write", "@stream", "@fast"], ["RW", "update"],
    "Releases pending messages back to the group's PEL without acknowledging them, making them "
    "available for re-delivery.",
    "8.8.0", "O(1) for each message ID processed.",
    [KEY_ARG, arg("group", "string"),
     arg("mode", "oneof", args=[arg("silent", "pure-token", "SILENT"),
                                arg("fail", "pure-token", "FAIL"),
                                arg("fatal", "pure-token", "FATAL")]),
     ids_arg(), arg("count", "integer", "RETRYCOUNT", optional=True),
     arg("force", "pure-token", "FORCE", optional=True)],
)

LLONG_MAX = (1 << 63) - 1


@command("xnack", spec=XNACK_SPEC)
def xnack(c: Client, argv: list[bytes]):
    """XNACK key group SILENT|FAIL|FATAL IDS n id.. [RETRYCOUNT c] [FORCE]: release pending
    entries (no owner, delivery time 0, to the back of the released FIFO) with the
    delivery counter decremented / kept / set to LLONG_MAX; RETRYCOUNT overrides, FORCE
    creates unowned entries for existing IDs not pending. Replies how many were
    released. The docs give no error texts; ours follow the other group commands'."""
    key, group_name = argv[1], argv[2]
    mode = argv[3].lower()
    if mode not in (b"silent", b"fail", b"fatal"):
        raise SYNTAX_ERR
    # IDS block, then the optional RETRYCOUNT/FORCE after it.
    if argv[4].lower() != b"ids":
        raise SYNTAX_ERR
    n = string2ll(argv[5])
    if n is None or n <= 0:
        raise ReplyError("ERR Number of IDs must be a positive integer")
    if 6 + n > len(argv):
        raise ReplyError("ERR The `numids` parameter must match the number of arguments")
    ids = parse_ids_block(c, argv[: 6 + n], 4)
    retry = None
    force = False
    j = 6 + n
    while j < len(argv):
        opt = argv[j].lower()
        if opt == b"retrycount" and j + 1 < len(argv):
            v = string2ll(argv[j + 1])
            if v is None or v < 0:
                raise ReplyError("ERR Invalid RETRYCOUNT option argument for XNACK")
            retry = v
            j += 2
        elif opt == b"force":
            force = True
            j += 1
        else:
            raise SYNTAX_ERR
    s = stream_write(c, key)
    g = s.get_group(group_name) if s is not None else None
    if g is None:
        raise nogroup(key, group_name)
    released = 0
    for sid in ids:
        nack = g.pel.get(sid)
        if nack is None:
            if not force or not s.exists(sid):
                continue
            g.load_nack(sid, 0, 0)
            base = 0
        else:
            base = nack.delivery_count
        if retry is not None:
            newc = retry
        elif mode == b"fatal":
            newc = LLONG_MAX
        elif mode == b"silent":
            newc = base - 1 if base > 0 else 0
        else:
            newc = base
        g.release(sid, newc)
        released += 1
    if released:
        c.server.dirty += released
    return released
