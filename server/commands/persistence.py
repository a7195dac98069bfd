"""Persistence commands: SAVE, BGSAVE, BGREWRITEAOF, LASTSAVE, DUMP, RESTORE.

The work itself lives in server/disk.py (the Persistence object attached to the
server) and rill.persistence (the formats); these handlers parse arguments and
shape replies as Redis 7.0 does. MIGRATE (commands/migrate.py) sends DUMP's
payloads; replication's commands are commands/replication.py.
"""

from __future__ import annotations

import time

from rill.persistence import rdb
from rill.protocol.reply import OK, ReplyError, Status

from .. import notify as events
from ..client import Client
from ..disk import PersistenceError, persistence_of
from .args import SYNTAX_ERR, get_int
from .table import command

BUSYKEY = ReplyError("BUSYKEY Target key name already exists.")



BAD_PAYLOAD = ReplyError("ERR DUMP payload version or checksum are wrong")
BAD_FORMAT = ReplyError("ERR Bad data format")


@command("save")
def save(c: Client, argv: list[bytes]):
    p = persistence_of(c.server)
    if p.child_type == "rdb":
        raise ReplyError("ERR Background save already in progress")
    try:
        p.save()
    except PersistenceError:
        raise ReplyError("ERR") from None
    return OK


@command("bgsave")
def bgsave(c: Client, argv: list[bytes]):
    schedule = False
    if len(argv) > 1:
        if len(argv) == 2 and argv[1].lower() == b"schedule":
            schedule = True
        else:
            raise SYNTAX_ERR
    p = persistence_of(c.server)
    if p.child_type == "rdb":
        raise ReplyError("ERR Background save already in progress")
    if p.child_pid is not None or c.in_exec:
        if schedule or c.in_exec:
            p.bgsave_scheduled = True
            return Status(b"Background saving scheduled")
        raise ReplyError(
            "ERR Another child process is active (AOF?): can't BGSAVE right now. "
            "Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible."
        )
    if p.bgsave():
        return Status(b"Background saving started")
    raise ReplyError("ERR")


@command("bgrewriteaof")
def bgrewriteaof(c: Client, argv: list[bytes]):
    return persistence_of(c.server).bgrewriteaof(in_exec=c.in_exec)


@command("lastsave")
def lastsave(c: Client, argv: list[bytes]):
    return c.server.lastsave


# -- DUMP / RESTORE -------------------------------------------------------------------
def dump_payload(c: Client, value) -> bytes:
    """DUMP's serialisation of ``value``, with the server's encoding settings."""
    config = c.server.config
    return rdb.dump_payload(
        value,
        compression=config.bool("rdbcompression"),
        list_fill=config.int("list-max-listpack-size"),
        list_compress_depth=config.int("list-compress-depth"),
    )


@command("dump")
def dump(c: Client, argv: list[bytes]):
    value = c.db.lookup_read(argv[1])
    if value is None:
        return None
    return dump_payload(c, value)


@command("restore-asking")  # cluster migrations send it; the same command on one server
@command("restore")
def restore(c: Client, argv: list[bytes]):
    """RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f], in Redis's order of checks."""
    replace = absttl = False
    idle = freq = -1
    i = 4
    n = len(argv)
    while i < n:
        opt = argv[i].lower()
        more = n - i - 1
        if opt == b"replace":
            replace = True
        elif opt == b"absttl":
            absttl = True
        elif opt == b"idletime" and more >= 1 and freq == -1:
            idle = get_int(argv[i + 1])
            if idle < 0:
                raise ReplyError("ERR Invalid IDLETIME value, must be >= 0")
            i += 1
        elif opt == b"freq" and more >= 1 and idle == -1:
            freq = get_int(argv[i + 1])
            if freq < 0 or freq > 255:
                raise ReplyError("ERR Invalid FREQ value, must be >= 0 and <= 255")
            i += 1
        else:
            raise SYNTAX_ERR
        i += 1
    db = c.db
    key = argv[1]
    if not replace and db.lookup(key) is not None:
        raise BUSYKEY
    ttl = get_int(argv[2])
    if ttl < 0:
        raise ReplyError("ERR Invalid TTL value, must be >= 0")
    payload = argv[3]
    if not rdb.verify_payload(payload):
        raise BAD_PAYLOAD
    sanitize = c.server.config["sanitize-dump-payload"]
    deep = sanitize == "yes" or (sanitize == "clients" and c.id >= 0)
    try:
        value = rdb.restore_payload(payload, deep=deep)
    except (rdb.RdbError, ValueError, IndexError):
        raise BAD_FORMAT from None
    server = c.server
    deleted = replace and db.delete(key)
    if ttl and not absttl:
        ttl += int(time.time() * 1000)
    if ttl and ttl <= int(time.time() * 1000):
        # Already expired: the key is not created, only the one it replaced is gone.
        if deleted:
            server.rewrite_propagation([b"DEL", key])
            db.modified(key)
            events.notify(db.id, "g", b"del", key)
            server.dirty += 1
        return OK
    db.set(key, value)
    # objectSetLRUOrLFU: FREQ counts under an LFU policy, IDLETIME under any other.
    if db.lfu:
        if freq >= 0:
            db.set_frequency(key, freq)
    elif idle >= 0:
        db.set_idle(key, idle)
    if ttl:
        db.set_expire(key, ttl)
        if not absttl:
            server.rewrite_propagation([argv[0], key, b"%d" % ttl, *argv[3:], b"ABSTTL"])
    db.modified(key)
    events.notify(db.id, "g", b"restore", key)
    server.dirty += 1
    return OK
