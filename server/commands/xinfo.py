"""XINFO (Redis 7.0's t_stream.c xinfoCommand): STREAM (and FULL), GROUPS, CONSUMERS and
HELP, the metadata of a stream and of its groups and consumers.

Replies and errors are Redis 7.0.15's, RESP2 and RESP3 (XINFO CONSUMERS has no "inactive"
field and XINFO STREAM FULL no "active-time": those are 7.2's), plus the IDMP fields Redis
8.6 shows once a stream has IDMP state.
"""

from __future__ import annotations

from rill.protocol.reply import Map, Raw, ReplyError
from rill.protocol.stream_entries import encode_entry, entries_bytes
from rill.storage.stream import ID_MAX, SCG_INVALID_ENTRIES_READ, Stream

from ..client import Client
from .args import NOT_INT, help_reply, string2ll
from .stream_args import subcommand_error
from .stream_replies import fmt_id, nogroup_for_key
from .streams import now_ms, stream_read
from .table import command

_XINFO_HELP = [
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
]


@command("xinfo|help")
def xinfo_help(c: Client, argv: list[bytes]):
    return help_reply(_XINFO_HELP)


def _xinfo_stream_read(c: Client, key: bytes) -> Stream:
    s = stream_read(c, key)
    if s is None:
        raise ReplyError("ERR no such key")
    return s


def _opt_int(v: int) -> int | None:
    return None if v == SCG_INVALID_ENTRIES_READ else v


@command("xinfo|consumers")
def xinfo_consumers(c: Client, argv: list[bytes]):
    key = argv[2]
    s = _xinfo_stream_read(c, key)
    g = s.get_group(argv[3])
    if g is None:
        raise nogroup_for_key(argv[3], key)
    now = now_ms()
    out = []
    for cons in g.consumers_sorted():
        idle = now - cons.seen_time
        out.append(Map(((b"name", cons.name), (b"pending", len(cons.pel)), (b"idle", idle if idle > 0 else 0))))
    return out


@command("xinfo|groups")
def xinfo_groups(c: Client, argv: list[bytes]):
    s = _xinfo_stream_read(c, argv[2])
    out = []
    for g in s.groups():
        out.append(Map((
            (b"name", g.name),
            (b"consumers", len(g.consumers)),
            (b"pending", len(g.pel)),
            (b"last-delivered-id", fmt_id(g.last_id)),
            (b"entries-read", _opt_int(g.entries_read)),
            (b"lag", s.group_lag(g)),
        )))
    return out


@command("xinfo|stream")
def xinfo_stream(c: Client, argv: list[bytes]):
    key = argv[2]
    s = _xinfo_stream_read(c, key)
    opts = argv[3:]
    full = False
    count = 10
    if opts:
        if len(opts) not in (1, 3) or opts[0].lower() != b"full":
            raise subcommand_error(argv)
        full = True
        if len(opts) == 3:
            if opts[1].lower() != b"count":
                raise subcommand_error(argv)
            v = string2ll(opts[2])
            if v is None:
                raise NOT_INT
            count = v if v >= 0 else 10
    info = Map((
        (b"length", s.length),
        (b"radix-tree-keys", s.node_count()),
        (b"radix-tree-nodes", s.rax_node_count()),
        (b"last-generated-id", fmt_id(s.last_id)),
        (b"max-deleted-entry-id", fmt_id(s.max_deleted_entry_id)),
        (b"entries-added", s.entries_added),
        (b"recorded-first-entry-id", fmt_id(s.first_id)),
    ))
    st = s.idmp
    if st is not None:
        # Redis 8.6: shown once the stream has IDMP state (XCFGSET or an IDMP XADD).
        st.expire_all(now_ms())
        info[b"idmp-duration"] = st.duration
        info[b"idmp-maxsize"] = st.maxsize
        info[b"pids-tracked"] = st.pids_tracked()
        info[b"iids-tracked"] = st.iids_tracked()
        info[b"iids-added"] = st.iids_added
        info[b"iids-duplicates"] = st.iids_duplicates
    if not full:
        info[b"groups"] = s.group_count()
        first = s.first_entry()
        last = s.last_entry()
        info[b"first-entry"] = Raw(encode_entry(*first) + b"\r\n") if first else None
        info[b"last-entry"] = Raw(encode_entry(*last) + b"\r\n") if last else None
        return info
    info[b"entries"] = Raw(entries_bytes(s.range(0, ID_MAX, count)) + b"\r\n")
    groups = []
    for g in s.groups():
        pending = []
        for sid, nack in g.pel.items():
            if count and len(pending) >= count:
                break
            owner = nack.consumer.name if nack.consumer is not None else b""
            pending.append([fmt_id(sid), owner, nack.delivery_time, nack.delivery_count])
        consumers = []
        for cons in g.consumers_sorted():
            cpel = []
            for sid, nack in cons.pel.items():
                if count and len(cpel) >= count:
                    break
                cpel.append([fmt_id(sid), nack.delivery_time, nack.delivery_count])
            consumers.append(Map((
                (b"name", cons.name),
                (b"seen-time", cons.seen_time),
                (b"pel-count", len(cons.pel)),
                (b"pending", cpel),
            )))
        groups.append(Map((
            (b"name", g.name),
            (b"last-delivered-id", fmt_id(g.last_id)),
            (b"entries-read", _opt_int(g.entries_read)),
            (b"lag", s.group_lag(g)),
            (b"pel-count", len(g.pel)),
            (b"pending", pending),
            (b"consumers", consumers),
        )))
    info[b"groups"] = groups
    return info
