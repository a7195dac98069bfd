"""Replication commands: SYNC, PSYNC, REPLCONF and WAIT (this server as a master),
REPLICAOF (this server as a replica), and ROLE.

The work lives in server/replication/: master.py (the replicas attached here, the
stream, the backlog) and replica.py (the link to a master); these handlers parse
arguments and shape replies as Redis 7.0 does.
"""

from __future__ import annotations

import logging

from rill.protocol.parser import split_args
from rill.protocol.reply import OK, Raw, ReplyError, Status

from ..blocking import parse_timeout
from ..client import Client
from ..disk import master_side
from ..outcomes import NO_REPLY, Block
from ..replication.master import ReplicaLink, replica_address
from .args import SYNTAX_ERR, get_int, string2ll
from .table import command

log = logging.getLogger("rill")


@command("sync")
def sync(c: Client, argv: list[bytes]):
    master_side(c.server).attach_replica(c, psync=False)
    return NO_REPLY


@command("psync")
def psync(c: Client, argv: list[bytes]):
    """PSYNC replid offset [FAILOVER]: FAILOVER, from the master we follow handing over
    to us (see replication/failover.py), makes us a master first if the history it
    continues is ours."""
    if len(argv) > 3 and argv[3].lower() == b"failover" and c.kind != "replica":
        server = c.server
        replid = argv[1].decode(errors="replace")
        log.warning("Failover request received for replid %s.", replid)
        if server.replica_side.host is None:
            raise ReplyError("ERR PSYNC FAILOVER can't be sent to a master.")
        if replid.lower() != master_side(server).replid.lower():
            raise ReplyError("ERR PSYNC FAILOVER replid must match my replid.")
        server.replica_side.stop(f"failover request from '{c.addr}'")
    offset = string2ll(argv[2])
    master_side(c.server).attach_replica(c, psync=True, replid=argv[1],
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
                    master_side(c.server).acked(c, offset)
            return NO_REPLY
        elif opt == b"getack":
            # Our master asking how far we got: the answer goes to it, not as a reply.
            if c.kind == "master":
                c.server.replica_side.send_ack()
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


@command("replicaof")
@command("slaveof")
def replicaof(c: Client, argv: list[bytes]):
    """REPLICAOF host port: follow that master; REPLICAOF NO ONE: be a master again."""
    repl = c.server.replica_side
    if c.server.failover.active:
        raise ReplyError("ERR REPLICAOF not allowed while failing over.")
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


@command("failover")
def failover(c: Client, argv: list[bytes]):
    """FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms] (replication/failover.py)."""
    state = c.server.failover
    if len(argv) == 2 and argv[1].lower() == b"abort":
        if not state.active:
            raise ReplyError("ERR No failover in progress.")
        state.abort("Failover manually aborted")
        return OK
    timeout = 0
    force = False
    host: str | None = None
    port = 0
    j = 1
    while j < len(argv):
        opt = argv[j].lower()
        if opt == b"timeout" and j + 1 < len(argv) and timeout == 0:
            timeout = get_int(argv[j + 1])
            if timeout <= 0:
                raise ReplyError("ERR FAILOVER timeout must be greater than 0")
            j += 2
        elif opt == b"to" and j + 2 < len(argv) and host is None:
            port = get_int(argv[j + 2])
            host = argv[j + 1].decode(errors="replace")
            j += 3
        elif opt == b"force" and not force:
            force = True
            j += 1
        else:
            raise SYNTAX_ERR
    state.start(host, port, timeout, force)
    return OK


@command("role")
def role(c: Client, argv: list[bytes]):
    """A master: its offset and every replica that is online; a replica: whom it follows."""
    repl = c.server.replica_side
    if repl.host is not None:
        return repl.role()
    m = master_side(c.server)
    rows = []
    for r in m.live_replicas():
        link = r.repl
        if not link.online:
            continue
        addr = replica_address(r).encode()
        port = b"%d" % link.listening_port
        off = b"%d" % link.ack_offset
        rows.append(b"*3\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (
            len(addr), addr, len(port), port, len(off), off))
    return Raw(b"*3\r\n$6\r\nmaster\r\n:%d\r\n*%d\r\n%b" % (m.repl_offset, len(rows), b"".join(rows)))


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
    m = master_side(c.server)
    offset = m.repl_offset
    acked = m.count_acks(offset)
    if acked >= numreplicas or c.in_exec:
        return acked

    def at_timeout() -> int:
        return m.count_acks(offset)

    m.ack_waiters.append((c, offset, numreplicas, at_timeout))
    m.request_acks()
    return Block([], timeout, timeout_reply=at_timeout)
