"""Ordinary Redis commands that mirror an applied peer op, for plain replicas.

A replica of an Active-Active instance (rill or redis-server) holds ordinary streams: the
merged view. After the engine applies a peer's op to a key, :func:`plain_ops` says which
commands bring the replica's copy to the same state. An entry that lands after the
stream's last ID is an XADD; anything the replica cannot follow op by op (an entry landing
before the last ID, a merged deletion) rewrites the key whole: DEL, then RESTORE of the
merged view with its TTL.
"""

from __future__ import annotations

from typing import Any

from rill.persistence import rdb
from rill.storage.stream import Stream

Op = list[bytes]


def plain_ops(db: Any, key: bytes, last_before: int | None, op: Op) -> list[Op]:
    """Commands for ``db``'s replica after ``op`` was applied to ``key``; ``last_before``
    is the stream's last ID before it (None: there was no stream)."""
    value = db.data.get(key)
    if not isinstance(value, Stream):
        return [[b"DEL", key]] if last_before is not None else []
    name = op[0]
    if name == b"XADD":
        sid = op[3]
        ms, _, seq = sid.partition(b"-")
        if last_before is None or (int(ms) << 64 | int(seq)) > last_before:
            return [[b"XADD", key, sid, *op[4:]]]
    if name == b"EXPIRE":
        at = db.expires.get(key)
        return [[b"PERSIST", key]] if at is None else [[b"PEXPIREAT", key, b"%d" % at]]
    return rewrite(db, key, value)


def rewrite(db: Any, key: bytes, value: Any) -> list[Op]:
    """DEL + RESTORE of the key's merged view, keeping its TTL."""
    plain = value.to_plain() if hasattr(value, "to_plain") else value
    at = db.expires.get(key)
    restore = [b"RESTORE", key, b"%d" % (at or 0), rdb.dump_payload(plain)]
    if at is not None:
        restore.append(b"ABSTTL")
    return [[b"DEL", key], restore]
