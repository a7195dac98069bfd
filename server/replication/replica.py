"""The replica side of replication: the link to a master (REPLICAOF), the full sync,
the command stream. (The master side, this server's own replicas, is master.py.)

The replica connects, runs the handshake (PING, AUTH with masterauth/masteruser,
REPLCONF listening-port and capa) and asks to continue where it stopped (``PSYNC
<replid> <offset+1>``) or, the first time, for a full resynchronization (``PSYNC ? -1``).
A master that can continue answers +CONTINUE and resumes its stream; otherwise the
replica loads the snapshot it sends (a ``$<len>`` bulk, or the diskless
``$EOF:<mark>`` form) in place of its dataset. It then executes the master's command
stream through the dispatcher as the master client, counting every byte as
replication offset, and acknowledges that offset every second and when the master
asks (REPLCONF GETACK), which is what the master's WAIT counts. A lost link is
retried from the cron.

The history it asks to continue is this server's own (master.py's replid and
offset), which is its master's after a sync: each command applied goes on, as the
master sent it, to this server's backlog and replicas. REPLICAOF to another master
keeps it; a master made a replica offers its own; a dump loaded at start-up offers
the one it records.

While it follows a master the server refuses writes from its own clients
(``replica-read-only``), and keys whose time has passed read as missing but stay
until the master's DEL arrives, as on a Redis replica.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import TYPE_CHECKING, Any

from rill.persistence import aof
from rill.protocol.numbers import string2ll
from rill.protocol.parser import split_args

from ..disk import PersistenceError, master_side, persistence_of
from ..outbound import dial

if TYPE_CHECKING:
    from ..client import Client
    from ..server import Server

log = logging.getLogger("rill")

# The link's states, as ROLE names them.
CONNECT = "connect"  # to be (re)connected by the cron
CONNECTING = "connecting"
HANDSHAKE = "handshake"
SYNC = "sync"  # receiving the snapshot
CONNECTED = "connected"


class MasterLink(asyncio.Protocol):
    """The socket to the master: handshake replies, then the snapshot, then commands."""

    def __init__(self, repl: ReplicaSide, generation: int) -> None:
        self.repl = repl
        self.generation = generation  # which REPLICAOF this link was dialled for
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.expect: list[tuple[bytes, list[bytes]]] = []  # handshake steps left, the first sent
        self.rdb_len = -1  # bytes of snapshot expected; -2 for the EOF-marked form
        self.eof_mark = b""
        self.eof_scan = 0  # where the search for the EOF mark goes on from
        self.closed = False

    # -- asyncio ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.transport = transport
        self.repl.link_up(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.repl.link_lost(self, exc)

    def data_received(self, data: bytes) -> None:
        repl = self.repl
        repl.last_io = time.time()
        if not self.expect:
            # The snapshot and the command stream are replication traffic (the handshake's
            # replies are not counted, as Redis reads them apart); once the stream runs,
            # each read is a read event of the master client's.
            stats = repl.server.stats
            stats.net_repl_input_bytes += len(data)
            if repl.state == CONNECTED:
                stats.total_reads_processed += 1
        self.buf += data
        try:
            self.repl.advance(self)
        except LinkError as e:
            log.warning("%s", e)
            self.close()

    def send(self, *argv: bytes) -> None:
        if self.transport is not None and not self.closed:
            data = aof.encode_command(list(argv))
            self.transport.write(data)
            if self.repl.state == CONNECTED:
                # The master client's replies (REPLCONF ACK): output as any client's.
                stats = self.repl.server.stats
                stats.net_output_bytes += len(data)
                stats.total_writes_processed += 1

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            # The transport lets go of its socket only on a later turn of the loop; the
            # master must see the link end now (as Redis closes it at once), not after
            # what the rest of this turn does (CLIENT KILL then DEBUG SLEEP in one
            # EXEC). A shutdown through a duplicate of the descriptor ends the
            # connection itself at once. Nothing queued for a master we drop matters.
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                try:
                    with socket.fromfd(sock.fileno(), socket.AF_INET, socket.SOCK_STREAM) as dup:
                        dup.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass  # already gone
            self.transport.abort()


class LinkError(Exception):
    """The master answered something the handshake cannot go on with."""


class ReplicaSide:
    """The replica side of one server: whom it follows and how far it got."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.host: str | None = None
        self.port = 0
        self.state = CONNECT
        self.link: MasterLink | None = None
        self.master: Client | None = None  # the client the master's commands run as
        # The history to PSYNC with ("?": none, a full sync is asked for): this server's
        # own replication ID (master.py's ``replid``), which is its master's once synced.
        self.master_replid = "?"
        self.offset = -1  # the replication offset processed so far
        # Stream bytes run inside a transaction not yet EXECed: they count in the offset,
        # and go on to our own replicas and backlog, only with the EXEC, since a lost
        # link discards the transaction (Redis leaves its master client's reploff alone
        # while it is in MULTI, for the same reason).
        self.multi_buf = bytearray()
        # The database the master client had selected when the link dropped: a master
        # that continues (+CONTINUE) does not repeat the SELECT it sent before, so the
        # stream goes on there (Redis keeps the whole master client cached for this).
        self.master_db = 0
        self.last_io = 0.0
        self.down_since = time.time()
        self.sync_read = 0
        self.sync_total = -1
        self.sync_replid, self.sync_offset = "?", -1  # what a full sync under way will make ours
        self._last_ack = 0.0
        # CLIENT PAUSE held the master's next command: the pause's end resumes the stream.
        self._postponed = False
        self.generation = 0  # bumped by every REPLICAOF: a link dialled before is stale
        self._retry_after = 0.0  # time.monotonic() before which a failed dial is not retried

    # -- REPLICAOF ------------------------------------------------------------------
    def follow_configured(self) -> None:
        """At start-up: follow the master the config's ``replicaof`` names, if any (the
        cron connects)."""
        master = split_args(self.server.config["replicaof"].encode())
        if master and len(master) == 2 and string2ll(master[1]) is not None:
            self.follow(master[0].decode(errors="replace"), string2ll(master[1]))

    def follow(self, host: str, port: int) -> None:
        """REPLICAOF host port: drop any current master and connect to this one.

        What we followed so far is offered to the new master for a partial resync: a
        replica's master's history, or a master's own (as Redis's
        replicationCacheMasterUsingMyself), which a promoted replica of ours still has.
        Our own replicas stay connected: the history they follow goes on."""
        was_master = self.host is None
        if not was_master and self.master is not None:
            self.master_db = self.master.db.id
        self._drop_link()
        server = self.server
        self.generation += 1
        self.host, self.port = host, port
        self.state = CONNECT
        self._retry_after = 0.0
        if was_master:
            p = master_side(server)
            self.master_replid = p.replid
            self.offset = p.repl_offset
            self.master_db = 0
        self.down_since = time.time()
        server.replica_of = (host, port)
        # CONFIG GET replicaof and CONFIG REWRITE show the master followed now, so that
        # a rewritten file restarts a replica following it (and continuing from its dump).
        server.config.values["replicaof"] = f"{host} {port}"
        for hook in server.role_hooks:
            hook()
        log.warning("Connecting to MASTER %s:%d", host, port)
        self.connect()

    def resume_from(self, replid: str, offset: int, db: int) -> None:
        """Start-up loaded a dump made at ``offset`` of ``replid``'s stream, in ``db``:
        ask the master to continue from there (Redis's cached master built from the
        dump's aux fields)."""
        self.master_replid = replid
        self.offset = offset
        self.master_db = db

    def stop(self, cause: str = "user request") -> None:
        """REPLICAOF NO ONE (or a FAILOVER that makes us the master): keep the dataset,
        stop following, accept writes again."""
        if self.host is None:
            return
        self._drop_link()
        self.generation += 1
        self.host = None
        self.port = 0
        self.server.replica_of = None
        self.server.config.values["replicaof"] = ""
        for hook in self.server.role_hooks:
            hook()
        self.state = CONNECT
        self.master_replid = "?"
        self.offset = -1
        # A new history starts here; the replicas of our old master (ours included)
        # may continue with us up to where we left its, and reconnect to learn so.
        p = master_side(self.server)
        p.shift_replid()
        p.disconnect_replicas()
        p.repl_selected_db = -1
        log.warning("MASTER MODE enabled (%s)", cause)

    def _drop_link(self) -> None:
        link, self.link = self.link, None
        if link is not None:
            link.close()
        master, self.master = self.master, None
        if master is not None:
            self.server.client_gone(master)
        self.multi_buf.clear()

    # -- connecting -------------------------------------------------------------------
    def connect(self) -> None:
        loop = self.server.loop
        if loop is None or self.host is None or self.state != CONNECT:
            return
        self.state = CONNECTING
        host, port, generation = self.host, self.port, self.generation

        def failed(reason: str) -> None:
            log.warning("Error condition on socket for SYNC: %s", reason)
            if self.generation == generation and self.state == CONNECTING:
                self._retry_after = time.monotonic() + 1.0
                self.state = CONNECT  # the cron tries again

        if not dial(self.server, lambda: MasterLink(self, generation), host, port, failed):
            self._retry_after = time.monotonic() + 1.0
            self.state = CONNECT  # logged; the cron tries again

    def listening_port(self) -> int:
        """The port REPLCONF listening-port announces: the TLS one when replication is
        over TLS, as Redis (replica-announce-port, when set, is refused: see config)."""
        if self.server.config.bool("tls-replication"):
            return self.server.tls_port
        return self.server.tcp_port

    def link_up(self, link: MasterLink) -> None:
        if link.generation != self.generation or self.state != CONNECTING:
            link.close()  # REPLICAOF changed while connecting
            return
        self.link = link
        self.state = HANDSHAKE
        self.last_io = time.time()
        log.warning("MASTER <-> REPLICA sync started")
        config = self.server.config
        # One at a time, as Redis's replica does: a master refuses PSYNC from a client
        # that still has replies pending.
        steps = [(b"PING", [b"PING"])]
        if config["masterauth"]:
            user = config["masteruser"]
            auth = [b"AUTH", user.encode()] if user else [b"AUTH"]
            steps.append((b"AUTH", [*auth, config["masterauth"].encode()]))
        steps.append((b"REPLCONF", [b"REPLCONF", b"listening-port", b"%d" % self.listening_port()]))
        steps.append((b"REPLCONF", [b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]))
        if self.master_replid != "?" and self.offset >= 0:
            psync = [b"PSYNC", self.master_replid.encode(), b"%d" % (self.offset + 1)]
        else:
            psync = [b"PSYNC", b"?", b"-1"]
        steps.append((b"PSYNC", psync + self.server.failover.psync_flag))
        link.expect = steps
        link.send(*steps[0][1])

    def link_lost(self, link: MasterLink, exc: Exception | None) -> None:
        if link is not self.link:
            return
        self.link = None
        master, self.master = self.master, None
        if master is not None:
            self.master_db = master.db.id
            self.server.client_gone(master)
        self.multi_buf.clear()
        if self.host is not None:
            log.warning("Connection with master lost.")
            self.state = CONNECT
            self.down_since = time.time()

    # -- what the master sends ------------------------------------------------------------
    def advance(self, link: MasterLink) -> None:
        """Consume as much of the link's buffer as the current state allows."""
        while link is self.link and not link.closed:
            if self.state == HANDSHAKE:
                if not self._handshake_reply(link):
                    return
            elif self.state == SYNC:
                if not self._snapshot(link):
                    return
            elif self.state == CONNECTED:
                self._commands(link)
                return
            else:
                return

    def _line(self, link: MasterLink) -> bytes | None:
        i = link.buf.find(b"\r\n")
        if i < 0:
            return None
        line = bytes(link.buf[:i])
        del link.buf[: i + 2]
        return line

    def _handshake_reply(self, link: MasterLink) -> bool:
        while link.buf[:1] == b"\n":  # a master's keepalive newline while it prepares
            del link.buf[:1]
        line = self._line(link)
        if line is None:
            return False
        step = link.expect.pop(0)[0]
        if link.expect:
            link.send(*link.expect[0][1])
        if step == b"PING":
            # An error about authentication is fine here: AUTH comes next.
            if line.startswith(b"-") and not line.startswith((b"-NOAUTH", b"-NOPERM", b"-ERR operation not permitted")):
                raise LinkError(f"Error reply to PING from master: '{line[1:].decode(errors='replace')}'")
        elif step == b"AUTH":
            if line.startswith(b"-"):
                raise LinkError(f"Unable to AUTH to MASTER: {line[1:].decode(errors='replace')}")
        elif step == b"REPLCONF":
            pass  # an old master may not know these; it matters not
        elif step == b"PSYNC":
            if self.server.failover.active:
                # The PSYNC a FAILOVER sent its target: answered, the switch is over.
                self.server.failover.psync_answered(line.startswith((b"+CONTINUE", b"+FULLRESYNC")))
                if link is not self.link:
                    return False  # refused: the failover made us a master again
            if line.startswith(b"+CONTINUE"):
                parts = line.split()
                if len(parts) > 1:
                    self.master_replid = parts[1].decode(errors="replace")
                    master_side(self.server).continued_as(self.master_replid)
                log.warning("MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.")
                self._attach_master(self.master_db)
                return True
            if not line.startswith(b"+FULLRESYNC"):
                raise LinkError(f"Unexpected reply to PSYNC from master: {line.decode(errors='replace')}")
            parts = line.split()
            if len(parts) != 3 or not parts[2].isdigit():
                raise LinkError("Master replied with wrong +FULLRESYNC syntax.")
            # Not ours until the snapshot is loaded: after a link lost during the
            # transfer we offer what we had before (the dataset is still that one),
            # never a history whose data never arrived.
            self.sync_replid, self.sync_offset = parts[1].decode(errors="replace"), int(parts[2])
            log.warning("Full resync from master: %s:%d", self.sync_replid, self.sync_offset)
            self.state = SYNC
            self.sync_read = 0
            self.sync_total = -1
            link.rdb_len = -1
        return True

    def _snapshot(self, link: MasterLink) -> bool:
        if link.rdb_len == -1:
            while link.buf[:1] == b"\n":
                del link.buf[:1]
            line = self._line(link)
            if line is None:
                return False
            if line.startswith(b"-"):
                raise LinkError(f"MASTER aborted replication with an error: {line[1:].decode(errors='replace')}")
            if not line.startswith(b"$"):
                raise LinkError(f"Bad protocol from MASTER, the first byte is not '$': {line[:64]!r}")
            if line.startswith(b"$EOF:"):
                link.eof_mark = line[5:]
                link.eof_scan = 0
                if len(link.eof_mark) != 40:
                    raise LinkError("Bad EOF mark from MASTER")
                link.rdb_len = -2
            else:
                try:
                    link.rdb_len = int(line[1:])
                except ValueError:
                    raise LinkError("Bad snapshot length from MASTER") from None
                self.sync_total = link.rdb_len
        if link.rdb_len == -2:
            # Search only what arrived since the last look (and the mark's length
            # before it): scanning the whole snapshot on every read is quadratic.
            end = link.buf.find(link.eof_mark, link.eof_scan)
            self.sync_read = len(link.buf)
            if end < 0:
                link.eof_scan = max(0, len(link.buf) - len(link.eof_mark))
                return False
            payload = bytes(link.buf[:end])
            del link.buf[: end + 40]
        else:
            self.sync_read = len(link.buf)
            if len(link.buf) < link.rdb_len:
                return False
            payload = bytes(link.buf[: link.rdb_len])
            del link.buf[: link.rdb_len]
        self._load(payload)
        return True

    def _load(self, payload: bytes) -> None:
        """Replace the dataset with the master's snapshot, then follow its stream."""
        log.warning("MASTER <-> REPLICA sync: receiving %d bytes from master", len(payload))
        server = self.server
        try:
            result = persistence_of(server).load_from_master(payload)
        except PersistenceError as e:
            raise LinkError(str(e)) from None
        log.warning("MASTER <-> REPLICA sync: Finished with success")
        self.sync_total = -1
        self.master_replid, self.offset = self.sync_replid, self.sync_offset
        master_side(server).adopt(self.master_replid, self.offset)
        # The stream resumes in the database the snapshot says its master's stream had
        # selected: a master that is itself a replica passes its master's stream on
        # as is, with no SELECT of its own after the snapshot.
        db = string2ll(result.aux.get(b"repl-stream-db", b"0"))
        self._attach_master(db if db is not None and 0 <= db < len(server.keyspace.dbs) else 0)

    def _attach_master(self, db: int = 0) -> None:
        """The link carries the master's stream from now on, run as the master client,
        which starts in database ``db`` (where a continued stream left off)."""
        link = self.link
        assert link is not None
        sock = link.transport.get_extra_info("sockname") if link.transport is not None else None
        laddr = f"{sock[0]}:{sock[1]}" if sock else ""
        master = self.server.new_client(f"{self.host}:{self.port}", laddr, -1)
        master.kind = "master"
        master.reply_mode = 1  # the master's commands get no replies (REPLCONF ACK aside)
        master.authenticated = True
        master.on_output = self._master_output
        master.db = self.server.keyspace[db]
        self.master = master
        self.multi_buf.clear()
        self.state = CONNECTED
        self.send_ack()

    def _master_output(self, master: Client) -> None:
        """CLIENT KILL of the master client drops the link (it is retried, as in Redis);
        the end of a CLIENT PAUSE that held the stream runs what arrived meanwhile."""
        link = self.link
        if link is None:
            return
        if master.kill_requested:
            link.close()
        elif self._postponed and master is self.master:
            self._postponed = False
            self._commands(link)

    def _commands(self, link: MasterLink) -> None:
        master = self.master
        assert master is not None
        server = self.server
        # Parsed in place: copying the buffer on every read would make a large value
        # arriving in many reads cost quadratic time. Arguments are copied out once whole.
        parser = aof.CommandParser(link.buf)  # type: ignore[arg-type]
        consumed = 0
        keyspace = server.keyspace
        history = master_side(server)
        try:
            while True:
                try:
                    argv = parser.next()
                except aof.AofTruncated:
                    break
                except aof.AofFormatError as e:
                    raise LinkError(f"Protocol error from MASTER at offset {self.offset}: {e}") from None
                if argv is None:
                    break
                argv = [bytes(a) for a in argv]
                # The master's commands see keys past their time as still there: the
                # master decides when they go, and its DEL follows.
                keyspace.expire_allowed = False
                try:
                    if server.execute(master, argv):
                        # CLIENT PAUSE postponed it (Redis pauses the master client too):
                        # it and the rest wait, read but not applied, until the pause ends.
                        self._postponed = True
                        break
                except Exception:
                    # A bug must not leave this replica quietly diverged: drop the link
                    # and start again from a full sync.
                    log.exception("Failed to run a command from MASTER: %r", argv[:1])
                    self.master_replid = "?"
                    raise LinkError("Dropping the link to MASTER; a full sync follows.") from None
                finally:
                    keyspace.expire_allowed = True
                master.out.clear()
                # What was applied goes on, byte for byte, to our backlog and replicas.
                applied = bytes(link.buf[consumed:parser.pos])
                if master.multi is not None:
                    self.multi_buf += applied
                else:
                    if self.multi_buf:
                        applied = bytes(self.multi_buf) + applied
                        self.multi_buf.clear()
                    self.offset += len(applied)
                    history.proxy(applied)
                consumed = parser.pos
                if link is not self.link:
                    return  # REPLICAOF inside the stream ended this link
        finally:
            del link.buf[:consumed]

    # -- acknowledgements -------------------------------------------------------------------
    def send_ack(self) -> None:
        """REPLCONF ACK <offset>: how much of the stream this replica has processed."""
        link = self.link
        if link is not None and self.state == CONNECTED:
            link.send(b"REPLCONF", b"ACK", b"%d" % self.offset)
            self._last_ack = time.monotonic()

    def cron(self) -> None:
        if self.host is None:
            return
        if self.state == CONNECT:
            # A master that refused us is tried again once a second, as Redis's
            # replicationCron does; a new REPLICAOF or a lost link is tried at once.
            if time.monotonic() >= self._retry_after:
                self.connect()
            return
        link = self.link
        if link is not None and time.time() - self.last_io > self.server.config.int("repl-timeout"):
            # The master pings every repl-ping-replica-period seconds: silence this long
            # means the link is dead even if the socket does not know it yet.
            log.warning("Timeout connecting to the MASTER..." if self.state != CONNECTED else
                        "MASTER timeout: no data nor PING received...")
            link.close()
        elif self.state == CONNECTED and time.monotonic() - self._last_ack >= 1.0:
            self.send_ack()

    # -- introspection ------------------------------------------------------------------------
    def info(self) -> list[tuple[str, object]]:
        """INFO replication's replica fields, as Redis 7.0 prints them."""
        now = time.time()
        up = self.state == CONNECTED
        rows: list[tuple[str, object]] = [
            ("role", "slave"),
            ("master_host", self.host),
            ("master_port", self.port),
            ("master_link_status", "up" if up else "down"),
            ("master_last_io_seconds_ago", int(now - self.last_io) if up else -1),
            ("master_sync_in_progress", 1 if self.state == SYNC else 0),
            # Read includes what a pause holds unapplied in the link's buffer.
            ("slave_read_repl_offset", self.offset + len(self.multi_buf)
             + (len(self.link.buf) if up and self.link else 0)),
            ("slave_repl_offset", self.offset),
        ]
        if self.state == SYNC:
            rows += [
                ("master_sync_total_bytes", self.sync_total),
                ("master_sync_read_bytes", self.sync_read),
                ("master_sync_left_bytes", self.sync_total - self.sync_read if self.sync_total >= 0 else -1),
                ("master_sync_perc", f"{self.sync_read * 100 / self.sync_total:.2f}"
                 if self.sync_total > 0 else "-0.00"),
                ("master_sync_last_io_seconds_ago", int(now - self.last_io)),
            ]
        if not up:
            rows.append(("master_link_down_since_seconds", int(now - self.down_since)))
        config = self.server.config
        rows += [
            ("slave_priority", config["replica-priority"]),
            ("slave_read_only", 1 if config.bool("replica-read-only") else 0),
            ("replica_announced", 1 if config.bool("replica-announced") else 0),
        ]
        return rows

    def role(self) -> list[Any]:
        """ROLE on a replica: slave, master host and port, the link state, the offset."""
        return [b"slave", self.host.encode() if self.host else b"", self.port, self.state.encode(),
                self.offset]
