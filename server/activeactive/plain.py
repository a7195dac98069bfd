"""Ordinary Redis commands that mirror an applied peer op, for plain replicas.

A replica of an Active-Active instance (rill or redis-server) holds ordinary streams: the
merged view (``ActiveStream.to_plain``), which its full sync brought (a snapshot made
with ``SaveOptions.plain``). After the engine applies a peer's op to a key,
:func:`plain_ops` gives the commands that bring the replica's copy to the key's new merged
view, as cheaply as the op allows:

- ``XADD`` of an entry after the stream's last ID: the same XADD with its ID;
- ``XDEL``: the same XDEL (unless another region's entry with the same ID is still there);
- ``GCREATE`` / ``GDESTROY``: the group made whole as below (XGROUP CREATE ... MKSTREAM
  when the op made the key) / XGROUP DESTROY;
- ``XACK`` (a peer's acknowledged prefix, which moves the group and drops pending entries
  here): the group rebuilt: XGROUP DESTROY and CREATE, CREATECONSUMER per consumer, an
  XCLAIM ... FORCE JUSTID per pending entry (what an AOF rewrite writes for a group);
- ``XTRIM`` that leaves nothing at or below its bounds: XTRIM MINID past them;
- ``SETID``: XSETID with the merged values;
- ``EXPIRE``: PEXPIREAT of the register's outcome, or PERSIST;
- a key the op removed: DEL;
- a string's, hash field's, set member's or sorted-set member's op (keyed.py): SET ...
  KEEPTTL, HSET/HDEL, SADD/SREM, ZADD/ZREM of the element's merged value;
- anything a replica cannot follow op by op (an entry landing before the last ID, a
  trim of one region's sub-stream that another region's older entries survive, a DEL that
  concurrent entries survive): the key rewritten whole, DEL then RESTORE of the merged
  view's DUMP payload with its TTL.
"""

from __future__ import annotations

from typing import Any

from rill.persistence import rdb
from rill.storage.list import ListValue
from rill.storage.stream import ID_MAX, MASK64, Stream

from .keyed import HASH, SET, STRING, kind_of

Op = list[bytes]


def _fmt(sid: int) -> bytes:
    return b"%d-%d" % (sid >> 64, sid & MASK64)


def _pid(b: bytes) -> int:
    ms, _, seq = b.partition(b"-")
    return int(ms) << 64 | int(seq or b"0")


def plain_ops(db: Any, key: bytes, last_before: int | None, op: Op) -> list[Op]:
    """Commands for ``db``'s plain replicas after ``op`` (``[NAME, key, args...]``) was
    applied to ``key``; ``last_before`` is the stream's last ID before it (None: there was
    no stream, so the replica has no key)."""
    value = db.data.get(key)
    if not isinstance(value, Stream):
        if value is not None and op[0] == b"EXPIRE":
            # A string, hash, set, sorted set or HLL: its TTL as the register resolved it
            # (a peer's EXPIRE on one was not mirrored: the replica kept its old TTL).
            at = db.expires.get(key)
            return [[b"PERSIST", key]] if at is None else [[b"PEXPIREAT", key, b"%d" % at]]
        return [[b"DEL", key]] if last_before is not None else []
    name = op[0].upper()
    if name == b"XADD":
        sid = _pid(op[3])
        if sid > (last_before or 0):
            return [[b"XADD", key, op[3], *op[4:]]]
    elif name == b"XDEL":
        ids = op[3::2]
        if last_before is not None and not any(value.exists(_pid(i)) for i in ids):
            return [[b"XDEL", key, *ids]]
    elif name == b"GCREATE":
        g = value.get_group(op[2])
        if g is None:
            return []  # lost to a delete it had not seen
        if last_before is None:
            return [[b"XGROUP", b"CREATE", key, g.name, _fmt(g.last_id), b"MKSTREAM",
                     b"ENTRIESREAD", b"%d" % g.entries_read]]
        # The name may have been taken already (a concurrent creation elsewhere): the group
        # is made whole, which a plain XGROUP CREATE would refuse with BUSYGROUP.
        ops = rebuild_group(key, g)
        if ops is not None:
            return ops
    elif name == b"GDESTROY":
        if last_before is not None and value.get_group(op[2]) is None:
            return [[b"XGROUP", b"DESTROY", key, op[2]]]
    elif name == b"XACK":
        g = value.get_group(op[2])
        if g is None:
            return []
        if last_before is not None:
            ops = rebuild_group(key, g)
            if ops is not None:
                return ops
    elif name == b"XTRIM":
        # Usually one region writes and trims (a peer's XADD ... MAXLEN): nothing at or below
        # the highest bound is left, so the replica trims to it, by ID, as the op did.
        bound = max(_pid(b) for b in op[3::2])
        if last_before is not None and bound < ID_MAX and not value.range(0, bound, 1):
            return [[b"XTRIM", key, b"MINID", b"=", _fmt(bound + 1)]]
    elif name == b"SETID":
        if last_before is not None:
            return [[b"XSETID", key, _fmt(value.last_id), b"ENTRIESADDED", b"%d" % value.entries_added,
                     b"MAXDELETEDID", _fmt(value.max_deleted_entry_id)]]
    elif name == b"EXPIRE":
        if last_before is not None:
            at = db.expires.get(key)
            return [[b"PERSIST", key]] if at is None else [[b"PEXPIREAT", key, b"%d" % at]]
    return rewrite(db, key, value)


def keyed_plain_ops(db: Any, key: bytes, kind_before: bytes | None, op: Op) -> list[Op]:
    """Commands for ``db``'s plain replicas after a string, hash, set or sorted-set op
    (keyed.py) was applied to ``key``; ``kind_before`` is what the key showed before."""
    value = db.data.get(key)
    if value is None:
        return [[b"DEL", key]] if kind_before is not None else []
    kind = kind_of(value)
    if kind is None:
        return []  # a stream shows: the op changed hidden state only
    if op[0] != b"CDEL" and kind == kind_before == op[2]:
        elem = op[3]
        if kind == STRING:
            return [[b"SET", key, bytes(value), b"KEEPTTL"]]
        if kind == HASH:
            v = value.get(elem)
            return [[b"HDEL", key, elem]] if v is None else [[b"HSET", key, elem, v]]
        if kind == SET:
            return [[b"SADD", key, elem]] if elem in value else [[b"SREM", key, elem]]
        score = value.dict.get(elem)
        return [[b"ZREM", key, elem]] if score is None else [[b"ZADD", key, repr(score).encode(), elem]]
    return rewrite(db, key, value)


def list_plain_ops(db: Any, key: bytes, before: Any, op: Op) -> list[Op]:
    """Commands for plain replicas after a list op (lists.py) was applied to ``key``: a push
    when the element landed at an end, DEL when the list went, else the list rewritten
    whole (DEL + RESTORE)."""
    value = db.data.get(key)
    if type(value) is not ListValue:
        if value is None:
            return [[b"DEL", key]] if before is not None else []
        return [] if type(before) is not ListValue else rewrite(db, key, value)
    if type(before) is not ListValue:
        return rewrite(db, key, value)
    if op[0] == b"LINS" and len(value) and value[0] is op[3]:
        return [[b"LPUSH", key, op[3]]]
    if op[0] == b"LINS" and len(value) and value[len(value) - 1] is op[3]:
        return [[b"RPUSH", key, op[3]]]
    return rewrite(db, key, value)


def rebuild_group(key: bytes, g: Any) -> list[Op] | None:
    """Commands that make a replica's copy of group ``g`` equal to it whatever it held:
    None when a pending entry has no owner (XNACK's released entries), which no command
    of Redis 7 can make."""
    pel = list(g.pel.items())
    if any(nack.consumer is None for _sid, nack in pel):
        return None
    ops: list[Op] = [
        [b"XGROUP", b"DESTROY", key, g.name],
        [b"XGROUP", b"CREATE", key, g.name, _fmt(g.last_id), b"ENTRIESREAD", b"%d" % g.entries_read],
    ]
    ops.extend([b"XGROUP", b"CREATECONSUMER", key, g.name, c.name] for c in g.consumers_sorted())
    ops.extend(
        [b"XCLAIM", key, g.name, nack.consumer.name, b"0", _fmt(sid), b"TIME", b"%d" % nack.delivery_time,
         b"RETRYCOUNT", b"%d" % nack.delivery_count, b"FORCE", b"JUSTID"]
        for sid, nack in pel
    )
    return ops


def rewrite(db: Any, key: bytes, value: Any) -> list[Op]:
    """DEL + RESTORE of the key's merged view, keeping its TTL (absolute, ABSTTL)."""
    at = db.expires.get(key)
    restore = [b"RESTORE", key, b"%d" % (at or 0), rdb.dump_payload(value)]
    if at is not None:
        restore.append(b"ABSTTL")
    return [[b"DEL", key], restore]
