"""Persistence commands: SAVE, BGSAVE, BGREWRITEAOF, LASTSAVE, DUMP, RESTORE, MIGRATE,
and the master's side of replication: SYNC, PSYNC, REPLCONF, ROLE.

The work itself lives in server/persistence.py (the Persistence object attached to
the server) and rill.persistence (the formats); these handlers parse arguments
and shape replies as Redis 7.0 does.
"""

from __future__ import annotations

import time

from rill.persistence import rdb
from rill.persistence.aof import encode_command
from rill.protocol.parser import split_args
from rill.protocol.reply import OK, Raw, ReplyError, Status

from .. import notify as events
from ..blocking import parse_timeout
from ..client import Client
from ..migrate import links_of
from ..outcomes import NO_REPLY, Block
from ..persistence import PersistenceError, ReplicaLink, install, persistence_of
from ..replication import replication_of
from .args import SYNTAX_ERR, get_int, redact, string2ll
from .table import command

BUSYKEY = ReplyError("BUSYKEY Target key name already exists.")


def setup(server) -> None:
    """Family hook: every server gets its Persistence (idempotent; serve() also installs
    it), and follows the master ``replicaof`` names, if any (the cron connects)."""
    install(server)
    master = split_args(server.config["replicaof"].encode())
    if master and len(master) == 2 and string2ll(master[1]) is not None:
        replication_of(server).follow(master[0].decode(errors="replace"), string2ll(master[1]))

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
def _payload(c: Client, value) -> bytes:
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
    return _payload(c, value)


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


# -- MIGRATE ---------------------------------------------------------------------------


class _SocketError(Exception):
    """MIGRATE lost its connection: ``writing`` says in which direction, ``retry`` whether
    nothing was done and the connection merely died (not timed out), ``reply`` the
    target's error to report instead of the I/O error."""

    def __init__(self, writing: bool, retry: bool, reply: ReplyError | None = None) -> None:
        self.writing = writing
        self.retry = retry
        self.reply = reply


def _migrate_keys(argv: list[bytes]) -> list[tuple[int, int]]:
    """migrateGetKeys: the key at 3, or everything after KEYS (AUTH and AUTH2 skip their
    arguments); none when KEYS comes with a non-empty key argument. Spec 0 is the
    single key's, spec 1 the KEYS list's."""
    i = 6
    while i < len(argv):
        word = argv[i].lower()
        if word == b"keys":
            if argv[3]:
                return []
            return [(k, 1) for k in range(i + 1, len(argv))]
        i += {b"auth": 1, b"auth2": 2}.get(word, 0) + 1
    return [(3, 0)]


@command("migrate", getkeys=_migrate_keys)
def migrate(c: Client, argv: list[bytes]):
    """MIGRATE host port key|"" db timeout [COPY] [REPLACE] [AUTH pw] [AUTH2 user pw] [KEYS k...].

    RESTOREs each key on the target (DUMP payloads, TTLs as they stand) and, unless
    COPY, deletes the keys the target acknowledged: those deletions are what
    replicas and the AOF see, as one DEL. A cached connection that turns out to be
    dead (not slow) is reopened once before the error is reported.
    """
    n = len(argv)
    copy = replace = False
    username = password = None
    first_key, num_keys = 3, 1
    j = 6
    while j < n:
        opt = argv[j].lower()
        more = n - 1 - j
        if opt == b"copy":
            copy = True
        elif opt == b"replace":
            replace = True
        elif opt == b"auth":
            if not more:
                raise SYNTAX_ERR
            j += 1
            password = argv[j]
            redact(argv, j)
        elif opt == b"auth2":
            if more < 2:
                raise SYNTAX_ERR
            username, password = argv[j + 1], argv[j + 2]
            redact(argv, j + 1, j + 2)
            j += 2
        elif opt == b"keys":
            if argv[3]:
                raise ReplyError(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string"
                )
            first_key, num_keys = j + 1, n - j - 1
            break
        else:
            raise SYNTAX_ERR
        j += 1
    timeout_ms = get_int(argv[5])
    dbid = get_int(argv[4])
    if timeout_ms <= 0:
        timeout_ms = 1000
    timeout = timeout_ms / 1000
    db = c.db
    found = []
    for key in argv[first_key : first_key + num_keys]:
        value = db.lookup_read(key)
        if value is not None:
            found.append((key, value))
    if not found:
        return Status(b"NOKEY")
    links = links_of(c.server)
    host, port = argv[1], argv[2]
    may_retry = True
    while True:
        link = links.get(host, port, timeout)
        if link is None:
            raise ReplyError("IOERR error or timeout connecting to the client")
        try:
            return _migrate_over(c, link, found, dbid, timeout, copy, replace, username, password)
        except _SocketError as e:
            links.close(host, port)
            if e.reply is not None:
                raise e.reply from None
            if may_retry and e.retry:
                may_retry = False
                continue
            raise ReplyError(
                "IOERR error or timeout %s to target instance" % ("writing" if e.writing else "reading")
            ) from None


def _migrate_over(c: Client, link, found: list, dbid: int, timeout: float, copy: bool, replace: bool,
                  username: bytes | None, password: bytes | None):
    """One attempt of MIGRATE over ``link``; raises _SocketError when it may be retried
    or has to be reported as an I/O error."""
    db = c.db
    request = []
    if password is not None:
        request.append(encode_command([b"AUTH", password] if username is None else [b"AUTH", username, password]))
    select = link.last_dbid != dbid
    if select:
        request.append(encode_command([b"SELECT", b"%d" % dbid]))
    now = int(time.time() * 1000)
    sent = []
    for key, value in found:
        ttl = 0
        when = db.get_expire(key)
        if when is not None:
            ttl = when - now
            if ttl < 0:
                continue  # expired since it was looked up
            ttl = max(ttl, 1)
        sent.append(key)
        restore = [b"RESTORE", key, b"%d" % ttl, _payload(c, value)]
        if replace:
            restore.append(b"REPLACE")
        request.append(encode_command(restore))
    try:
        link.send(b"".join(request), timeout)
    except OSError as e:
        raise _SocketError(True, not isinstance(e, TimeoutError)) from None
    try:
        auth_reply = link.read_line(timeout) if password is not None else b"+OK"
        select_reply = link.read_line(timeout) if select else b"+OK"
    except OSError as e:
        raise _SocketError(False, not isinstance(e, TimeoutError)) from None
    error = None
    lost: OSError | None = None
    deleted = []
    for i, key in enumerate(sent):
        try:
            reply = link.read_line(timeout)
        except OSError as e:
            if i == 0 and not isinstance(e, TimeoutError):
                raise _SocketError(False, True) from None  # nothing was done: try again
            lost = e
            break
        failed = next((r for r in (auth_reply, select_reply, reply) if r[:1] == b"-"), None)
        if failed is not None:
            if error is None:
                link.last_dbid = -1
                error = ReplyError(b"ERR Target instance replied with error: " + failed[1:])
        elif not copy:
            db.delete(key)
            db.modified(key)
            events.notify(db.id, "g", b"del", key)
            c.server.dirty += 1
            deleted.append(key)
    if deleted:
        c.server.rewrite_propagation([b"DEL", *deleted])
    if lost is not None:
        raise _SocketError(False, False, error)  # some keys may have moved: never retried
    if error is not None:
        raise error
    link.last_dbid = dbid
    return OK


# -- replication (enough for a replica or a test harness to follow the stream) --------------
@command("sync")
def sync(c: Client, argv: list[bytes]):
    persistence_of(c.server).attach_replica(c, psync=False)
    return NO_REPLY


@command("psync")
def psync(c: Client, argv: list[bytes]):
    offset = string2ll(argv[2])
    persistence_of(c.server).attach_replica(c, psync=True, replid=argv[1],
                                            offset=offset if offset is not None else -1)
    return NO_REPLY


NET_HOST_STR_LEN = 256  # the longest address a replica may announce, terminator included


@command("replconf")
def replconf(c: Client, argv: list[bytes]):
    """A replica describing itself before it syncs, and acknowledging offsets after.

    Options apply in order, so one that fails leaves the earlier ones set, as in Redis.
    """
    if len(argv) % 2 == 0:
        raise SYNTAX_ERR
    link = c.repl
    if link is None:
        link = c.repl = ReplicaLink()
    for j in range(1, len(argv), 2):
        opt = argv[j].lower()
        value = argv[j + 1]
        if opt == b"listening-port":
            link.listening_port = get_int(value)
        elif opt == b"ip-address":
            if len(value) >= NET_HOST_STR_LEN:
                raise ReplyError(
                    f"ERR REPLCONF ip-address provided by replica instance is too long: {len(value)} bytes"
                )
            link.ip = value
        elif opt == b"capa":
            if value.lower() == b"eof":
                link.capa_eof = True  # it can take a diskless snapshot ($EOF:<mark>)
        elif opt == b"ack":
            # Internal to replicas and never answered; from anyone else it is ignored.
            if c.kind == "replica":
                offset = string2ll(value)
                if offset is not None:
                    persistence_of(c.server).acked(c, offset)
            return NO_REPLY
        elif opt == b"getack":
            # Our master asking how far we got: the answer goes to it, not as a reply.
            if c.kind == "master":
                replication_of(c.server).send_ack()
            return NO_REPLY
        elif opt == b"rdb-only":
            n = get_int(value)
            if n < 0 or n > 1:
                raise ReplyError("ERR value is out of range, value must between 0 and 1")
            link.rdb_only = n == 1
        elif opt == b"rdb-filter-only":
            filters = split_args(value)
            if filters is None:
                raise ReplyError("ERR Missing rdb-filter-only values")
            for f in filters:
                if f.lower() != b"functions":
                    raise ReplyError(f"ERR Unsupported rdb-filter-only option: {f.decode(errors='replace')}")
            # Everything is filtered out unless included: keys always, functions
            # unless named.
            link.exclude_data = True
            link.exclude_functions = not any(f.lower() == b"functions" for f in filters)
        else:
            raise ReplyError(f"ERR Unrecognized REPLCONF option: {argv[j].decode(errors='replace')}")
    return OK


def replica_address(replica: Client) -> str:
    """The address a replica is known by: the one it announced, else its peer address."""
    link = replica.repl
    if link is not None and link.ip is not None:
        return link.ip.decode(errors="replace")
    return replica.addr.rpartition(":")[0]


@command("replicaof")
@command("slaveof")
def replicaof(c: Client, argv: list[bytes]):
    """REPLICAOF host port: follow that master; REPLICAOF NO ONE: be a master again."""
    repl = replication_of(c.server)
    if argv[1].lower() == b"no" and argv[2].lower() == b"one":
        repl.stop()
        return OK
    if c.kind == "replica":
        raise ReplyError("ERR Command is not valid when client is a replica.")
    port = string2ll(argv[2])
    if port is None or not 0 <= port <= 65535:
        raise ReplyError("ERR Invalid master port")
    host = argv[1].decode(errors="replace")
    if repl.host is not None and repl.host.lower() == host.lower() and repl.port == port:
        return Status(b"OK Already connected to specified master")
    repl.follow(host, port)
    return OK


@command("role")
def role(c: Client, argv: list[bytes]):
    """A master: its offset and every replica that is online; a replica: whom it follows."""
    repl = c.server.__dict__.get("replication")
    if repl is not None and repl.host is not None:
        return repl.role()
    p = persistence_of(c.server)
    rows = []
    for r in p.live_replicas():
        link = r.repl
        if not link.online:
            continue
        addr = replica_address(r).encode()
        port = b"%d" % link.listening_port
        off = b"%d" % link.ack_offset
        rows.append(b"*3\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (
            len(addr), addr, len(port), port, len(off), off))
    return Raw(b"*3\r\n$6\r\nmaster\r\n:%d\r\n*%d\r\n%b" % (p.repl_offset, len(rows), b"".join(rows)))


WAIT_ON_REPLICA = ReplyError(
    "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a "
    "replica is configured to be writable (which is not the default) writes to replicas are just "
    "local and are not propagated."
)


@command("wait")
def wait(c: Client, argv: list[bytes]):
    """Block until ``numreplicas`` replicas acknowledged everything propagated so far, or
    the timeout (ms) passes; either way the reply is how many did.

    Redis waits for the offset after the client's own last command; rill waits for
    the offset when WAIT runs, which includes that one (and any later writes).
    """
    if c.server.replica_of is not None:
        raise WAIT_ON_REPLICA
    numreplicas = get_int(argv[1])
    timeout = parse_timeout(argv[2], unit_ms=True)
    p = persistence_of(c.server)
    offset = p.repl_offset
    acked = p.count_acks(offset)
    if acked >= numreplicas or c.in_exec:
        return acked

    def at_timeout() -> int:
        return p.count_acks(offset)

    p.ack_waiters.append((c, offset, numreplicas, at_timeout))
    p.request_acks()
    return Block([], timeout, timeout_reply=at_timeout)
