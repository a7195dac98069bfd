"""The master side of replication: the replicas attached to this server, the
stream they follow, the backlog, full syncs, and WAIT's acknowledgements.

A replica arrives with SYNC or PSYNC (server/commands/replication.py). PSYNC that
names this server's replication ID and an offset the backlog still holds continues
(+CONTINUE and the backlog from there); anything else is a full resync: a snapshot
made in a fork (server/disk.py owns the child; it may be shared with a BGSAVE
being written), sent from the dump file or streamed through a pipe (diskless),
while the stream since the fork is held for the replica until the snapshot is
through. The stream itself is the replication feed of the propagation path
(server/propagation.py): every unit of effects, encoded as RESP with SELECTs, goes
to each replica and into the backlog, and counts in the replication offset. The
other side, this server following a master, is server/replication/replica.py.

PSYNC2 (Redis 4.0+): a whole chain shares one history. A replica propagates nothing
of its own to its replicas; it passes its master's stream on byte for byte
(``proxy``), into its own backlog too, and takes its master's replication ID and
offset as its own (``adopt``), so its replicas can continue with it, or with any
other server of the chain, after a failover. The previous history is kept as
``replid2``, valid up to ``second_repl_offset``: on promotion (``shift_replid``), on
a continuation under a master's new ID (``continued_as``), and from the dump's aux
fields at start-up (``restore``; ``save_info`` writes them).
"""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Any

from rill.persistence import aof as aofmod
from rill.persistence import rdb
from rill.protocol.reply import ReplyError

from ..client import log_output_limit_close, output_limit_reached
from ..outcomes import AofOnly

if TYPE_CHECKING:
    from ..client import Client
    from ..disk import Persistence
    from ..server import Server

log = logging.getLogger("rill")
NOTICE = 25


def _notice(msg: str, *args: object) -> None:
    log.log(NOTICE, msg, *args)


# A replica's states on the master, as Redis names them (INFO shows wait_bgsave for
# both waits): waiting for a snapshot to start, recording the stream while its
# snapshot is made, receiving a disk snapshot, following the stream.
WAIT_BGSAVE_START = "wait_bgsave_start"
WAIT_BGSAVE_END = "wait_bgsave_end"
SEND_BULK = "send_bulk"
ONLINE = "online"
RDB_TRANSMITTED = "rdb_transmitted"  # a snapshot-only client (REPLCONF rdb-only) that has it
_STATE_NAMES = {WAIT_BGSAVE_START: "wait_bgsave", WAIT_BGSAVE_END: "wait_bgsave", SEND_BULK: "send_bulk",
                ONLINE: "online"}

# How much of a snapshot may wait in a replica's socket buffers before we stop feeding
# it (reading the fork's pipe, or the dump file) until it catches up, and how often
# we look again; and the most read from the pipe or the file in one go, so that a
# fast replica cannot keep the loop from the other clients.
SNAPSHOT_HIGH_WATER = 1 << 20
SNAPSHOT_POLL = 0.002
SNAPSHOT_CHUNK = 1 << 18
SNAPSHOT_BATCH = 1 << 20
# A replica's output limits are checked each time this much stream has gone its way
# since the last check (Redis checks as each 16 KB block of the stream is added).
OBUF_CHECK_BYTES = 16 * 1024


# replid2 when there is no previous history (INFO shows it as forty zeros)
NO_REPLID = "0" * 40


class ReplicaLink:
    """A replica's side of the link: what it told us with REPLCONF before syncing, where
    its full sync stands, and how much of the replication stream it has acknowledged
    since (REPLCONF ACK)."""

    __slots__ = ("listening_port", "ip", "rdb_only", "exclude_data", "exclude_functions", "capa_eof",
                 "pre_psync", "ack_offset", "ack_time", "state", "initial_offset", "buffered", "stream_on_ack",
                 "acked_in_sync", "bulk", "bulk_left", "slow_since", "held_bytes", "unchecked")

    def __init__(self) -> None:
        self.listening_port = 0
        self.ip: bytes | None = None  # REPLCONF ip-address; else the peer's address is shown
        self.rdb_only = False
        self.exclude_data = False  # REPLCONF rdb-filter-only: keys are left out ...
        self.exclude_functions = False  # ... and so are functions unless "functions" is named
        self.capa_eof = False  # REPLCONF capa eof: takes a diskless ($EOF:<mark>) snapshot
        self.pre_psync = False  # came with SYNC: no +FULLRESYNC, and it never ACKs
        self.ack_offset = 0
        self.ack_time = 0
        self.state = ""
        self.initial_offset = 0  # the offset its snapshot stands for (+FULLRESYNC's)
        # The stream since its snapshot's fork, held back until the snapshot is through
        # (and, after a diskless one, until its first ACK); None once it flows.
        self.buffered: list[bytes] | None = None
        self.held_bytes = 0  # the bytes ``buffered`` holds
        self.unchecked = 0  # stream bytes fed since its output limits were last checked
        self.stream_on_ack = False
        # It ACKed before the diskless child was reaped: it has the whole snapshot, so
        # its stream starts as soon as the child is, not at its next ACK a second later.
        self.acked_in_sync = False
        self.bulk: Any = None  # the dump file being sent (disk-based sync)
        self.bulk_left = 0
        self.slow_since = 0  # since when it has held a diskless transfer back (0: it hasn't)

    @property
    def req(self) -> tuple[bool, bool]:
        """What its snapshot must leave out: replicas share a snapshot only when equal."""
        return self.exclude_data, self.exclude_functions

    @property
    def online(self) -> bool:
        return self.state == ONLINE

    @property
    def state_name(self) -> str:
        return _STATE_NAMES.get(self.state, "")


class _Relay:
    """A diskless sync in progress: the fork writes the snapshot into a pipe, the
    parent copies it to every replica it is for (as Redis 7 does)."""

    __slots__ = ("fd", "targets", "reading", "eof")

    def __init__(self, fd: int, targets: list[Client]) -> None:
        self.fd = fd
        self.targets = targets
        self.reading = False  # the loop watches the pipe (not while a replica is behind)
        self.eof = False

def replica_address(replica: Client) -> str:
    """The address a replica is known by: the one it announced, else its peer address."""
    link = replica.repl
    if link is not None and link.ip is not None:
        return link.ip.decode(errors="replace")
    return replica.addr.rpartition(":")[0]


class MasterSide:
    """This server as a master: its replicas, its replication stream and backlog."""

    def __init__(self, server: Server, persistence: Persistence) -> None:
        self.server = server
        self.persistence = persistence  # owns the fork child that makes snapshots
        # replicas attached through SYNC/PSYNC
        self.replicas: list[Client] = []
        self.repl_selected_db = -1
        self.repl_offset = 0
        # The history this server's stream belongs to, as PSYNC names it: a new one
        # whenever the backlog is freed, since the offset stops counting without it and
        # a replica coming back must not be told it missed nothing.
        self.replid = os.urandom(20).hex()
        # PSYNC2: the history this server followed before its current one (its old
        # master's, or its own before a restart) and the first offset not in it, so that
        # replicas of that history can still continue here after a promotion.
        self.replid2 = NO_REPLID
        self.second_repl_offset = -1
        # since when this master has had no replica (repl-backlog-ttl counts from it)
        self.no_replicas_since = time.time()
        # The replication backlog: the last repl-backlog-size bytes of the stream, so a
        # replica that lost its link can continue (PSYNC +CONTINUE) instead of resyncing.
        # Made when the first replica syncs, as in Redis; None until then.
        self.backlog: bytearray | None = None
        self.rdb_for_replicas = False  # dump.rdb was written to feed replicas (rdb-del-sync-files)
        self.sync_abandoned = False  # a replica waiting for a snapshot went away
        self.relay: _Relay | None = None
        # replicationCron's runs, once a second: the replicas get a PING every period of
        # them. Redis's first run (its PING turn) comes before any replica can connect;
        # counting from 1 keeps a replica arriving at once from a PING in its first second.
        self.repl_cron_loops = 1
        self.repl_cron_last = 0.0
        self.sync_full = 0
        self.sync_partial_ok = 0
        self.sync_partial_err = 0
        # WAIT: (client, offset, replicas wanted, marker of its wait), oldest first
        self.ack_waiters: list[tuple[Client, int, int, Any]] = []
        self.getack_scheduled = False

    def reset_stats(self) -> None:
        """CONFIG RESETSTAT: the sync counters start again from zero, as in Redis."""
        self.sync_full = self.sync_partial_ok = self.sync_partial_err = 0

    @property
    def config(self) -> Any:
        return self.server.config

    def _update_feed(self) -> None:
        """The replication feed is on the propagation path while there is a replica or
        a backlog to write to."""
        feeds = self.server.propagation
        if self.replicas or self.backlog is not None:
            if feeds.replication is None:
                feeds.attach("replication", self._feed_replicas)
        elif feeds.replication is not None:
            feeds.detach("replication")

    def cron(self) -> None:
        """The master's part of the persistence cron (after the child is reaped, before
        scheduled saves): replicationCron once a second, then a snapshot for replicas
        that wait for one."""
        now = time.monotonic()
        if now - self.repl_cron_last >= 1.0:
            self.repl_cron_last = now
            self.replication_cron()
        if self.replicas or self.sync_abandoned:
            self.live_replicas()
            self._stop_unwanted_dump()
            self.start_pending_fork()

    def drop_replicas(self) -> None:
        """Our own replicas' copy no longer leads to this dataset (a full sync from a
        master replaced it): disconnect them and forget the backlog, so that they come
        back for a full resync rather than continue, as Redis does."""
        for r in self.live_replicas():
            r.kill_requested = True
            r.on_output(r)
        self.replicas = []
        self.backlog = None
        self.no_replicas_since = time.time()
        self._update_feed()

    def disconnect_replicas(self) -> None:
        """Close every replica's link but keep the backlog: they come back with PSYNC and
        learn the new replication ID from +CONTINUE (Redis's disconnectSlaves).

        They leave the replica list at once, though their sockets close a loop turn
        later: a byte of the new history queued to them in between (the new master's
        stream right behind its +CONTINUE) would move their offset past what our second
        ID serves, and turn their PSYNC into a full sync."""
        live = self.live_replicas()
        if not live:
            return
        for r in live:
            r.kill_requested = True
            r.on_output(r)
        self.replicas = []
        self.no_replicas_since = time.time()
        self._update_feed()

    def shift_replid(self) -> None:
        """shiftReplicationId: start a new history here, keeping the one followed so far
        as the second, valid up to the current offset, so that the replicas of our old
        master can continue with us once we are promoted."""
        self.replid2 = self.replid
        self.second_repl_offset = self.repl_offset + 1
        self.replid = os.urandom(20).hex()
        _notice("Setting secondary replication ID to %s, valid up to offset: %d. New replication ID is %s",
                self.replid2, self.second_repl_offset, self.replid)

    def adopt(self, replid: str, offset: int) -> None:
        """After a full sync from a master: its history is ours, from ``offset`` on, with
        a fresh backlog (what was there led to the dataset the snapshot replaced)."""
        self.replid = replid
        self.replid2 = NO_REPLID
        self.second_repl_offset = -1
        self.repl_offset = offset
        self.backlog = bytearray()
        self._update_feed()

    def continued_as(self, replid: str) -> None:
        """The master continued us under another replication ID (it was promoted, or
        restarted from its dump): that is now our history, the old one our second, and
        our own replicas reconnect to learn it. A server that restarted from its dump
        has no backlog yet: it gets one, to serve its own replicas from here."""
        if self.backlog is None:
            self.backlog = bytearray()
            self._update_feed()
        if replid == self.replid:
            return
        self.replid2 = self.replid
        self.second_repl_offset = self.repl_offset + 1
        self.replid = replid
        _notice("Master replication ID changed to %s", replid)
        self.disconnect_replicas()

    def restore(self, replid: str, offset: int, as_replica: bool) -> None:
        """The dump loaded at start-up named the history it was part of (aux repl-id,
        repl-offset): a replica goes on with it as its own, to PSYNC its master from
        there; a master keeps it as its second history, with its offsets moved on to
        follow it, so that its old replicas can continue with it."""
        if as_replica:
            self.replid = replid
            self.repl_offset = offset
            return
        self.replid2 = replid
        self.second_repl_offset = offset + 1
        self.repl_offset += offset
        self.backlog = bytearray()
        self.no_replicas_since = time.time()
        self._update_feed()

    def save_info(self) -> list[tuple[bytes, bytes]]:
        """rdbPopulateSaveInfo's aux fields for a dump: the history it belongs to and the
        database the stream had selected (a replica's is its master client's), so that
        a replica loading it, at start-up or in a full sync, knows where the stream
        resumes. A master without a backlog saves none: it has nothing to resume."""
        repl = self.server.replica_side
        if self.server.replica_of is None:
            if self.backlog is None:
                return []
            db = max(self.repl_selected_db, 0)
        elif repl.master is not None:
            db = repl.master.db.id
        elif repl.master_replid != "?":
            db = repl.master_db
        else:
            return []
        return [(b"repl-stream-db", b"%d" % db), (b"repl-id", self.replid.encode()),
                (b"repl-offset", b"%d" % self.repl_offset)]

    def snapshot_killed(self, socket_target: bool) -> None:
        """The snapshot child was killed: replicas waiting for it will not get it. They
        are dropped, and come back for another (Redis's updateSlavesWaitingBgsave with
        an error)."""
        self._relay_close(drain=False)
        # No new snapshot from here (the caller may be shutting down, or about to load
        # another dataset): the cron starts one for replicas still waiting.
        self.snapshot_done(False, socket_target, start_next=False)

    def attach_replica(self, c: Client, psync: bool, replid: bytes = b"?", offset: int = -1) -> None:
        """SYNC / PSYNC (Redis's syncCommand): +CONTINUE and the stream from the backlog
        when PSYNC names this server's replication ID and an offset the backlog still
        holds; otherwise a full resync, which waits for a snapshot made in a fork.

        A replica joins the snapshot being written to disk if another replica has been
        recording the stream since its fork; else it waits for the next one, which
        starts now, or, for diskless sync, after repl-diskless-sync-delay seconds (or
        once repl-diskless-sync-max-replicas are waiting) so that replicas arriving
        together share one fork. A client that asked for the snapshot only (REPLCONF
        rdb-only 1, as ``redis-cli --rdb`` does) is closed once it has it.
        """
        if c.kind == "replica":
            return  # already one: a second SYNC is ignored, as in Redis
        link = c.repl
        if link is None:
            link = c.repl = ReplicaLink()
        if self.server.failover.active:
            raise ReplyError("NOMASTERLINK Can't SYNC while failing over")
        if self.server.replica_of is not None and self.server.replica_side.state != "connected":
            # a replica serves only the history it is following, once it follows it
            raise ReplyError("NOMASTERLINK Can't SYNC while not connected with my master")
        if link.exclude_data and not link.capa_eof:
            raise ReplyError("ERR Filtered replica requires EOF capability")
        if not link.capa_eof and self.plain_view_only():
            raise ReplyError("ERR Active-Active instances require a replica with the EOF capability")
        _notice("Replica %s asks for synchronization", self._replica_name(c))
        link.ack_time = int(time.time())
        if psync:
            if replid != b"?" and not link.rdb_only and not link.exclude_data:
                if self._continue(c, link, replid, offset):
                    return
                self.sync_partial_err += 1
        else:
            link.pre_psync = True  # an old-style replica (redis-cli --replica): no ACKs expected
        self.sync_full += 1
        c.kind = "replica"
        c.as_replica(True)
        c.reply_mode = 1  # a replica's own commands (REPLCONF ACK) get no replies
        link.state = WAIT_BGSAVE_START
        link.buffered = None
        self.replicas.append(c)
        if self.backlog is None:
            self.backlog = bytearray()
        self._update_feed()
        if self.persistence.child_type == "rdb" and not self.persistence.rdb_child_socket:
            donor = None if self.plain_view_only() else next(
                (r for r in self.live_replicas() if r is not c and r.repl.state == WAIT_BGSAVE_END
                 and r.repl.req == link.req and (link.capa_eof or not r.repl.capa_eof)), None)
            if donor is not None:
                # The dump being written is as good as a new one: it gets the stream the
                # other replica has recorded since the fork, and the same offset.
                link.buffered = list(donor.repl.buffered or ())
                link.held_bytes = donor.repl.held_bytes
                self._setup_full_resync(c, donor.repl.initial_offset)
                _notice("Waiting for end of BGSAVE for SYNC")
            else:
                _notice("Can't attach the replica to the current BGSAVE. Waiting for next BGSAVE for SYNC")
        elif self.persistence.child_type == "rdb":
            _notice("Current BGSAVE has socket target. Waiting for next BGSAVE for SYNC")
        elif (self.config.bool("repl-diskless-sync") and link.capa_eof
              and self.config.int("repl-diskless-sync-delay")):
            _notice("Delay next BGSAVE for diskless SYNC")  # the cron starts it
        elif self.persistence.child_pid is None and self.relay is None:
            self._start_bgsave_for_replication(link.capa_eof, link.req)
        else:
            _notice("No BGSAVE in progress, but another BG operation is active. BGSAVE for replication delayed")

    def plain_view_only(self) -> bool:
        """Whether replicas need a snapshot of their own: an Active-Active dataset goes
        to a replica as its plain view (ordinary streams), which the dump file, holding
        the Active-Active form, is not; so the snapshot is streamed to them (EOF-marked)."""
        return self.server.active_active is not None

    def _replica_name(self, r: Client) -> str:
        """How the log names a replica: its address and the port it listens on."""
        link = r.repl
        if link is None or not link.listening_port:
            return r.addr
        return f"{replica_address(r)}:{link.listening_port}"

    def _setup_full_resync(self, r: Client, offset: int) -> None:
        """The replica's snapshot is under way: from now on it records the stream (from
        a SELECT), and it learns the offset the snapshot stands for."""
        link = r.repl
        link.initial_offset = offset
        link.state = WAIT_BGSAVE_END
        link.acked_in_sync = False
        if link.buffered is None:
            link.buffered = []
            link.held_bytes = 0
        self.repl_selected_db = -1
        if not link.pre_psync:
            r.out.append(b"+FULLRESYNC %s %d\r\n" % (self.replid.encode(), offset))
            r.on_output(r)

    def _start_bgsave_for_replication(self, capa_eof: bool, req: tuple[bool, bool]) -> bool:
        """Fork the snapshot for the replicas waiting for one with these requirements:
        streamed through the parent when every one of them takes the EOF-marked form
        and diskless sync is on (or the snapshot is filtered), else written to the dump
        file and sent from it. Replicas it cannot be made for are told and closed."""
        socket_target = (self.config.bool("repl-diskless-sync") or any(req) or self.plain_view_only()) and capa_eof
        _notice("Starting BGSAVE for SYNC with target: %s", "replicas sockets" if socket_target else "disk")
        waiting = [r for r in self.live_replicas() if r.repl.state == WAIT_BGSAVE_START and r.repl.req == req]
        if socket_target:
            ok = self._bgsave_to_replicas(waiting, req)
        else:
            ok = self.persistence.bgsave()
            if ok:
                for r in waiting:
                    self._setup_full_resync(r, self.repl_offset)
                if self.config.bool("rdb-del-sync-files"):
                    self.rdb_for_replicas = True
        if not ok:
            log.warning("BGSAVE for replication failed")
            for r in self.live_replicas():
                if r.repl.state == WAIT_BGSAVE_START:
                    self.replicas.remove(r)
                    r.kind = "normal"
                    r.as_replica(False)
                    r.out.append(b"-ERR BGSAVE failed, replication can't continue\r\n")
                    r.close_after_reply = True
                    r.on_output(r)
            self._update_feed()
        return ok

    def _bgsave_to_replicas(self, targets: list[Client], req: tuple[bool, bool]) -> bool:
        """rdbSaveToSlavesSockets: a fork writes ``$EOF:<mark>``, the RDB and the mark
        into a pipe; the parent copies what it reads to each replica."""
        if self.persistence.child_pid is not None or self.relay is not None:
            return False
        read_fd, write_fd = os.pipe()
        mark = os.urandom(20).hex().encode()
        options = self.persistence.save_options(plain=True)
        if req[1]:
            options.functions = []
        keyspace = self.server.keyspace
        for r in targets:
            self._setup_full_resync(r, self.repl_offset)

        def work() -> None:
            os.close(read_fd)  # so a parent that dies leaves the child a write error
            with open(write_fd, "wb", buffering=SNAPSHOT_CHUNK) as f:
                f.write(b"$EOF:%s\r\n" % mark)
                rdb.save_file(f, iter(()) if req[0] else rdb.iter_dbs(keyspace.dbs), options)
                f.write(mark)

        try:
            pid = self.persistence.fork(work, "redis-rdb-to-slaves")
        except OSError as e:
            log.warning("Can't save in background: fork: %s", e)
            for r in targets:
                r.repl.state = WAIT_BGSAVE_START
                r.repl.buffered = None
            os.close(read_fd)
            os.close(write_fd)
            return False
        os.close(write_fd)  # the pipe ends (EOF) when the child closes its end
        os.set_blocking(read_fd, False)
        _notice("Background RDB transfer started by pid %d", pid)
        p = self.persistence
        p.child_pid = pid
        p.child_type = "rdb"
        p.rdb_child_socket = True
        p.child_start = time.time()
        self.relay = _Relay(read_fd, list(targets))
        self._relay_pump()
        return True

    def _relay_pump(self) -> None:
        """Copy what the fork has written so far to its replicas, pausing while any of
        them has more than SNAPSHOT_HIGH_WATER unsent (Redis's rdbPipeReadHandler)."""
        relay = self.relay
        if relay is None or relay.eof:
            return
        clients = self.server.clients
        targets = relay.targets = [r for r in relay.targets if clients.get(r.id) is r and not r.kill_requested]
        if not targets:
            log.warning("Diskless rdb transfer, last replica dropped, killing fork child.")
            self.persistence.kill_child()
            return
        behind = False
        now = int(time.time())
        for r in targets:
            if r.output_backlog() > SNAPSHOT_HIGH_WATER:
                behind = True
                if not r.repl.slow_since:
                    r.repl.slow_since = now
            else:
                r.repl.slow_since = 0
        loop = self.server.loop
        if behind and loop is not None:
            self._relay_watch(False)
            loop.call_later(SNAPSHOT_POLL, self._relay_pump)
            return
        chunks = []
        size = 0
        while size < SNAPSHOT_BATCH:
            try:
                data = os.read(relay.fd, SNAPSHOT_CHUNK)
            except BlockingIOError:
                break
            except OSError as e:
                log.warning("Diskless rdb transfer, read error sending DB to replicas: %s", e)
                for r in targets:
                    r.kill_requested = True
                    r.on_output(r)
                relay.targets = []
                self.persistence.kill_child()
                return
            if not data:
                relay.eof = True
                break
            chunks.append(data)
            size += len(data)
        if chunks:
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            for r in targets:
                r.out.append(data)
                r.on_output(r)
        if relay.eof:
            self._relay_watch(False)
            _notice("Diskless rdb transfer, done reading from pipe, %d replicas still up.", len(targets))
            self._reap_soon()
        elif loop is None:
            self._relay_pump()  # no loop to come back (in-process use): block until the end
        else:
            self._relay_watch(True)

    def _reap_soon(self, tries: int = 40) -> None:
        """The diskless child has written everything and is exiting: look for its end
        every few milliseconds for a while, so its replicas need not wait for the cron."""
        pid = self.persistence.child_pid
        if pid is None or not self.persistence.rdb_child_socket:
            return
        self.persistence.reap()
        loop = self.server.loop
        if self.persistence.child_pid == pid and tries > 0 and loop is not None:
            loop.call_later(SNAPSHOT_POLL, self._reap_soon, tries - 1)

    def _relay_watch(self, on: bool) -> None:
        relay = self.relay
        loop = self.server.loop
        if relay is None or loop is None or relay.reading == on:
            return
        relay.reading = on
        if on:
            loop.add_reader(relay.fd, self._relay_pump)
        else:
            loop.remove_reader(relay.fd)

    def _relay_close(self, drain: bool) -> None:
        """The child is gone: copy what is left in the pipe (at most its capacity, since
        the child only exits once its writes are taken) and close it."""
        relay, self.relay = self.relay, None
        if relay is None:
            return
        loop = self.server.loop
        if relay.reading and loop is not None:
            loop.remove_reader(relay.fd)
        if drain and not relay.eof:
            chunks = []
            while True:
                try:
                    data = os.read(relay.fd, SNAPSHOT_CHUNK)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            if chunks:
                data = b"".join(chunks)
                clients = self.server.clients
                for r in relay.targets:
                    if clients.get(r.id) is r and not r.kill_requested:
                        r.out.append(data)
                        r.on_output(r)
        os.close(relay.fd)

    def socket_save_done(self, exitcode: int, bysignal: int) -> bool:
        """backgroundSaveDoneHandlerSocket: the diskless child ended; True if it succeeded.
        (A diskless sync is no save: the last save's status stays as it was.)"""
        ok = not bysignal and exitcode == 0
        if ok:
            _notice("Background RDB transfer terminated with success")
        elif not bysignal:
            log.warning("Background transfer error")
        else:
            log.warning("Background transfer terminated by signal %d", bysignal)
        self._relay_close(drain=ok)
        return ok

    def snapshot_done(self, ok: bool, socket_target: bool, start_next: bool = True) -> None:
        """updateSlavesWaitingBgsave: the snapshot the waiting replicas recorded for is
        done. After a diskless one they are online, and their stream flows at their
        first ACK (so it cannot run into the EOF mark); after a disk one the dump is
        sent to them first. Then a replica still waiting gets its snapshot started."""
        for r in self.live_replicas():
            link = r.repl
            if link.state != WAIT_BGSAVE_END:
                continue
            if not ok:
                log.warning("SYNC failed. BGSAVE child returned an error")
                r.kill_requested = True
                r.on_output(r)
            elif socket_target:
                _notice("Streamed RDB transfer with replica %s succeeded (socket). Waiting for REPLCONF ACK "
                        "from slave to enable streaming", self._replica_name(r))
                if self._put_online(r):
                    if link.acked_in_sync:
                        self._start_stream(r)
                    else:
                        link.stream_on_ack = True
            else:
                try:
                    f = open(self.persistence.rdb_path(), "rb")
                    size = os.fstat(f.fileno()).st_size
                except OSError as e:
                    log.warning("SYNC failed. Can't open/stat DB after BGSAVE: %s", e)
                    r.kill_requested = True
                    r.on_output(r)
                    continue
                link.state = SEND_BULK
                link.bulk = f
                link.bulk_left = size
                r.out.append(b"$%d\r\n" % size)
                self._send_bulk(r)
        if start_next:
            self.start_pending_fork()

    def _send_bulk(self, r: Client) -> None:
        """sendBulkToSlave: the dump file, as fast as the replica takes it, then the
        stream recorded meanwhile."""
        link = r.repl
        f = link.bulk
        if f is None:
            return
        if self.server.clients.get(r.id) is not r or r.kill_requested:
            f.close()
            link.bulk = None
            return
        loop = self.server.loop
        room = SNAPSHOT_HIGH_WATER - r.output_backlog() if loop is not None else link.bulk_left
        sent = 0
        while link.bulk_left and sent < room:
            chunk = f.read(min(SNAPSHOT_CHUNK, link.bulk_left))
            if not chunk:
                log.warning("Read error sending DB to replica: premature EOF")
                f.close()
                link.bulk = None
                r.kill_requested = True
                r.on_output(r)
                return
            r.out.append(chunk)
            link.bulk_left -= len(chunk)
            sent += len(chunk)
        if sent:
            r.on_output(r)
        if link.bulk_left:
            assert loop is not None
            loop.call_later(SNAPSHOT_POLL, self._send_bulk, r)
            return
        f.close()
        link.bulk = None
        if self._put_online(r):
            self._start_stream(r)

    def _put_online(self, r: Client) -> bool:
        """replicaPutOnline: the replica has its snapshot. A snapshot-only client is
        closed once it is written (False)."""
        link = r.repl
        if link.rdb_only:
            link.state = RDB_TRANSMITTED
            _notice("RDB transfer completed, rdb only replica (%s) should be disconnected asap",
                    self._replica_name(r))
            r.close_after_reply = True
            r.on_output(r)
            return False
        link.state = ONLINE
        link.ack_time = int(time.time())  # no false timeout for the time the sync took
        _notice("Synchronization with replica %s succeeded", self._replica_name(r))
        return True

    def _start_stream(self, r: Client) -> None:
        """What was recorded since the snapshot's fork goes out, and the stream follows."""
        link = r.repl
        link.stream_on_ack = False
        held, link.buffered = link.buffered, None
        link.held_bytes = 0
        if held:
            r.out.extend(held)
            r.on_output(r)

    def start_pending_fork(self) -> None:
        """replicationStartPendingFork: start a snapshot for the replicas waiting for one,
        if no child runs; for diskless sync only once the first has waited
        repl-diskless-sync-delay seconds or repl-diskless-sync-max-replicas wait."""
        if self.persistence.child_pid is not None or self.relay is not None or not self.replicas:
            return
        waiting = [r for r in self.live_replicas() if r.repl.state == WAIT_BGSAVE_START]
        if not waiting:
            return
        req = waiting[0].repl.req
        group = [r for r in waiting if r.repl.req == req]
        c = self.config
        most = c.int("repl-diskless-sync-max-replicas")
        idle = time.time() - min(r.last_interaction for r in group)
        if (not c.bool("repl-diskless-sync") or (most > 0 and len(group) >= most)
                or idle >= c.int("repl-diskless-sync-delay")):
            self._start_bgsave_for_replication(all(r.repl.capa_eof for r in group), req)

    def replication_cron(self) -> None:
        """Redis's replicationCron, master side, once a second: PING the replicas every
        repl-ping-replica-period seconds (in the stream, so it counts in the offset and
        the replica's repl-timeout sees a live link), keep replicas waiting for their
        snapshot alive with a newline, and drop replicas silent past repl-timeout."""
        replicas = self.live_replicas()
        period = max(1, self.config.int("repl-ping-replica-period"))
        # Only a master pings: a replica passes its master's PINGs on with the rest of
        # its master's stream, which its own replicas follow byte for byte.
        if replicas and self.repl_cron_loops % period == 0 and self.server.replica_of is None:
            self._feed_replicas([(self.repl_selected_db, [b"PING"])])
        for r in replicas:
            state = r.repl.state
            if state == WAIT_BGSAVE_START or (state == WAIT_BGSAVE_END and not self.persistence.rdb_child_socket):
                r.out.append(b"\n")
                r.on_output(r)
        now = int(time.time())
        timeout = self.config.int("repl-timeout")
        for r in replicas:
            link = r.repl
            if link.state == ONLINE and not link.pre_psync and now - link.ack_time > timeout:
                log.warning("Disconnecting timedout replica (streaming sync): %s", self._replica_name(r))
            elif (link.state == WAIT_BGSAVE_END and self.persistence.rdb_child_socket and link.slow_since
                  and now - link.slow_since > timeout):
                log.warning("Disconnecting timedout replica (full sync): %s", self._replica_name(r))
            else:
                continue
            r.kill_requested = True
            r.on_output(r)
        for r in replicas:
            if r.obuf_soft_since:
                # clientsCron: a replica past its soft limit that has been sent nothing
                # since is closed here once its seconds lapse, not on its next write.
                self._check_output_limits(r, from_cron=True)
        self._expire_backlog(bool(replicas))
        self._remove_sync_rdb()
        self.repl_cron_loops += 1

    def _expire_backlog(self, replicas: bool) -> None:
        """repl-backlog-ttl: a master that has had no replica for that many seconds
        frees its backlog (a replica keeps its own, to serve PSYNC should it be
        promoted), and starts a new replication ID, since without a backlog its offset
        no longer moves with its writes."""
        if replicas or self.server.replica_of is not None:
            self.no_replicas_since = time.time()
            return
        ttl = self.config.int("repl-backlog-ttl")
        if not ttl or self.backlog is None or int(time.time() - self.no_replicas_since) <= ttl:
            return
        self.replid = os.urandom(20).hex()
        self.backlog = None
        self._update_feed()
        _notice("Replication backlog freed after %d seconds without connected replicas.", ttl)

    def _stop_unwanted_dump(self) -> None:
        """The last replica waiting for the dump being written went away: on a server
        without save points nobody else wants it, so the child is stopped, as Redis
        does when it frees such a replica."""
        if not self.sync_abandoned:
            return
        self.sync_abandoned = False
        p = self.persistence
        if (p.child_type == "rdb" and not p.rdb_child_socket and not p.save_params()
                and not any(r.repl.state == WAIT_BGSAVE_END for r in self.replicas)):
            self.persistence.kill_child()

    def _remove_sync_rdb(self) -> None:
        """rdb-del-sync-files: a server without persistence (no save points, no AOF) does
        not keep the dump it wrote only to feed replicas, once none of them needs it."""
        if not self.config.bool("rdb-del-sync-files"):
            self.rdb_for_replicas = False
            return
        if not self.rdb_for_replicas or self.persistence.keeps_data():
            return
        if any(r.repl.state in (WAIT_BGSAVE_START, WAIT_BGSAVE_END, SEND_BULK) for r in self.live_replicas()):
            return
        path = self.persistence.rdb_path()
        if os.path.lexists(path):
            self.rdb_for_replicas = False
            _notice("Removing the RDB file used to feed replicas in a persistence-less instance")
            try:
                os.unlink(path)
            except OSError as e:
                log.warning("Can't remove %s: %s", path, e)

    def _continue(self, c: Client, link: ReplicaLink, replid: bytes, offset: int) -> bool:
        """PSYNC <our replid> <offset>: +CONTINUE and what the backlog holds from the
        offset on, if it still holds it (Redis's masterTryPartialResynchronization)."""
        backlog = self.backlog
        asked = replid.decode(errors="replace")
        if asked != self.replid and (asked != self.replid2 or offset > self.second_repl_offset):
            # Our previous history is good only up to where we left it (a replica
            # that went further on it followed writes we never saw).
            if asked == self.replid2:
                _notice("Partial resynchronization not accepted: Requested offset for second ID was %d, "
                        "but I can reply up to %d", offset, self.second_repl_offset)
            else:
                _notice("Partial resynchronization not accepted: Replication ID mismatch (Replica asked for "
                        "'%s', my replication IDs are '%s' and '%s')", asked, self.replid, self.replid2)
            return False
        if backlog is None:
            return False
        first = self.repl_offset - len(backlog) + 1
        if offset < first or offset > self.repl_offset + 1:
            _notice("Unable to partial resync with replica %s for lack of backlog (Replica request was: %d).",
                    self._replica_name(c), offset)
            return False
        c.out.append(b"+CONTINUE %s\r\n" % self.replid.encode())
        if offset <= self.repl_offset:
            c.out.append(bytes(backlog[offset - first:]))
        c.kind = "replica"
        c.as_replica(True)
        c.reply_mode = 1
        link.state = ONLINE
        link.buffered = None
        self.replicas.append(c)
        self.sync_partial_ok += 1
        _notice("Partial resynchronization request from %s accepted. Sending %d bytes of backlog "
                "starting from offset %d.", self._replica_name(c), self.repl_offset + 1 - offset, offset)
        self._update_feed()
        return True

    def live_replicas(self) -> list[Client]:
        """The replicas still connected, in the order they attached."""
        clients = self.server.clients
        live = [r for r in self.replicas if clients.get(r.id) is r]
        if len(live) != len(self.replicas):
            if any(r.repl.state == WAIT_BGSAVE_END for r in self.replicas if clients.get(r.id) is not r):
                self.sync_abandoned = True  # the cron sees whether its dump is still wanted
            self.replicas = live
            if not live:
                self.no_replicas_since = time.time()
                self._update_feed()
        return live

    def good_replicas(self, max_lag: int) -> int:
        """Replicas online whose last ACK is at most ``max_lag`` seconds old
        (refreshGoodSlavesCount): what min-replicas-to-write counts."""
        now = int(time.time())
        return sum(1 for r in self.live_replicas() if r.repl.state == ONLINE and now - r.repl.ack_time <= max_lag)

    def count_acks(self, offset: int) -> int:
        """How many replicas online have acknowledged the stream up to ``offset``."""
        return sum(1 for r in self.live_replicas() if r.repl.state == ONLINE and r.repl.ack_offset >= offset)

    def request_acks(self) -> None:
        """Ask every replica for an ACK at the end of this loop iteration (once however
        many WAITs blocked in it); the request travels in the replication stream."""
        if self.getack_scheduled:
            return
        loop = self.server.loop
        if loop is None:
            self._send_getack()
            return
        self.getack_scheduled = True
        loop.call_soon(self._send_getack)

    def _send_getack(self) -> None:
        self.getack_scheduled = False
        if self.replicas:
            db = self.repl_selected_db if self.repl_selected_db >= 0 else 0
            self._feed_replicas([(db, [b"REPLCONF", b"GETACK", b"*"])])

    def acked(self, replica: Client, offset: int) -> None:
        """REPLCONF ACK: record it, then answer every WAIT it satisfies."""
        link = replica.repl
        if offset > link.ack_offset:
            link.ack_offset = offset
        link.ack_time = int(time.time())
        if link.state == WAIT_BGSAVE_END and self.persistence.child_type == "rdb":
            self.persistence.reap()  # the ACK may come before the cron has seen the child end
            if link.state == WAIT_BGSAVE_END and self.persistence.rdb_child_socket:
                link.acked_in_sync = True
        if link.stream_on_ack and link.state == ONLINE:
            self._start_stream(replica)
        if not self.ack_waiters:
            return
        waiting = []
        for entry in self.ack_waiters:
            client, want_offset, want, marker = entry
            wait = client.blocked
            if wait is None or wait.timeout_reply is not marker:
                continue  # timed out, unblocked or gone since
            n = self.count_acks(want_offset)
            if n >= want:
                self.server.blocking.unblock(client, n)
            else:
                waiting.append(entry)
        self.ack_waiters = waiting

    def feed_verbatim(self, argv: list[bytes]) -> None:
        """DEBUG REPLICATE: ``argv`` straight into the replicas' stream and the backlog,
        past the AOF and the propagation path, in the database the stream has selected
        (so with no SELECT before it), as Redis's debug command feeds its replicas."""
        self._feed_replicas([(self.repl_selected_db, argv)])

    def feed_verbatim_in(self, db: int, argv: list[bytes]) -> None:
        """One command into the stream, in database ``db`` (a SELECT before it if the
        stream is elsewhere): the DELs of a master's start-up load."""
        self._feed_replicas([(db, argv)])

    def _feed_replicas(self, ops: list[tuple[int, list[bytes]]]) -> None:
        """The stream to every live replica, and into the backlog (which goes on
        recording while no replica is connected, for one that comes back). A replica
        whose snapshot is being made or sent records it until the snapshot is through;
        one still waiting for its snapshot to start gets none of it (the snapshot will
        hold it)."""
        if self.server.replica_of is not None:
            return  # a replica's replicas get its master's stream, proxied (see ``proxy``)
        live = self.live_replicas()
        if not live and self.backlog is None:
            return
        if type(ops[-1][1]) is AofOnly or (len(ops) > 1 and any(type(argv) is AofOnly for _, argv in ops)):
            # a script's writes after redis.set_repl(redis.REPL_AOF); as in Redis, a
            # MULTI/EXEC around the unit still reaches the replicas
            ops = [op for op in ops if type(op[1]) is not AofOnly]
            if not ops:
                return
        parts = []
        for db, argv in ops:
            if db != self.repl_selected_db:
                parts.append(aofmod.select_command(db))
                self.repl_selected_db = db
            parts.append(aofmod.encode_command(argv))
        self.proxy(b"".join(parts), live)

    def proxy(self, data: bytes, live: list[Client] | None = None) -> None:
        """Stream bytes into the backlog and to every replica, counting in the offset:
        this master's own encoded effects, or, on a replica, its master's stream
        exactly as applied, so that the whole chain shares one history (PSYNC2)."""
        if live is None:
            live = self.live_replicas()
            if not live and self.backlog is None:
                return
        self.repl_offset += len(data)
        backlog = self.backlog
        if backlog is not None:
            backlog += data
            excess = len(backlog) - self.config.int("repl-backlog-size")
            if excess > 0:
                del backlog[:excess]
        for r in live:
            link = r.repl
            held = link.buffered
            if held is not None:
                held.append(data)
                link.held_bytes += len(data)
            elif link.state != WAIT_BGSAVE_START:
                r.out.append(data)
                r.on_output(r)
            else:
                continue
            # Redis checks a replica's limits as each block of its stream is added
            link.unchecked += len(data)
            if link.unchecked >= OBUF_CHECK_BYTES:
                link.unchecked = 0
                self._check_output_limits(r)

    def _check_output_limits(self, r: Client, from_cron: bool = False) -> None:
        """client-output-buffer-limit for the replica class (checkClientOutputBufferLimits):
        the stream a replica has not taken (held back during its sync, queued, in the
        transport) past the hard limit (never below repl-backlog-size: a partial resync
        would fill it at once), or past the soft one for more than its seconds, gets it
        disconnected, logged as Redis does: "scheduled to be closed ASAP" when a write
        found it, "closed" when the cron did."""
        hard, soft, soft_secs = self.server.obuf_limits.get("slave", (0, 0, 0))
        if not hard and not soft or r.kill_requested:
            return
        size = r.output_bytes()  # with the stream held back during its sync
        if hard:
            hard = max(hard, self.config.int("repl-backlog-size"))
        if output_limit_reached(r, size, hard, soft, soft_secs):
            log_output_limit_close(r, from_cron)
            r.kill_requested = True
            r.on_output(r)
