"""One client connection: bytes in, commands dispatched, replies out once per loop turn.

The hot path: ``data_received`` -> parser yields every complete command (of at
most READ_BATCH bytes at a time) -> each is dispatched synchronously -> replies
accumulate in ``client.out``. The
connection then joins the server's :class:`ReplyBatch`, which writes every
waiting client's replies after all the clients that were ready in this loop
iteration have run, as Redis's beforeSleep does. A client that blocks keeps its
later pipelined commands in ``client.pending`` until it is served, as in Redis.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
from time import time as _time
from typing import TYPE_CHECKING

from rill.protocol.parser import ProtocolError, RequestParser
from rill.protocol.reply import ReplyError

from .client import log_output_limit_close, output_limit_reached
from .fastpath import execute_all
from .process import set_keepalive

if TYPE_CHECKING:
    from .client import Client
    from .server import Server
    from .tls import TLSLayer

log = logging.getLogger("rill")


def _probe() -> None:
    """Only its type matters: compiled, a function is not a plain ``function`` (as parser.py)."""


_COMPILED = type(_probe).__name__ != "function"


class ReplyBatch:
    """Connections with replies to send, written together once per loop iteration.

    Writing each reply as soon as its command ran interleaves one read and one
    write per client; the peer is woken for every write, and on a busy server
    those wake-ups cost more than the commands. Batched, every ready client's
    commands run first (one poll's worth), then the before-write hooks (the
    appendfsync always flush: one fsync covers the whole batch), then the
    writes, which is the order of Redis's beforeSleep.

    TLS connections decrypt what they read as it comes and hand the plaintext to
    the batch (:meth:`deliver`); their commands run when the batch does, before
    the writes. All of a poll's decryption then runs together, and all of its
    commands: with one connection's OpenSSL work between every two commands, the
    commands (XADD's most) ran at a fraction of their speed once 50 connections
    took turns (the caches held neither), so TLS cost XADD twice what it cost GET.
    """

    __slots__ = ("server", "queue", "inbox")

    def __init__(self, server: Server) -> None:
        self.server = server
        self.queue: list[Connection] = []
        self.inbox: list[TLSLayer] = []  # TLS connections with decrypted input to run

    def add(self, conn: Connection) -> None:
        queue = self.queue
        if not queue and not self.inbox:
            loop = self.server.loop
            if loop is None:  # no event loop (in-process use): write at once
                queue.append(conn)
                self.run()
                return
            loop.call_soon(self.run)
        queue.append(conn)

    def deliver(self, layer: TLSLayer) -> None:
        """``layer`` holds decrypted input: its commands run with the batch."""
        inbox = self.inbox
        if not inbox and not self.queue:
            loop = self.server.loop
            if loop is None:
                layer.deliver()
                return
            loop.call_soon(self.run)
        inbox.append(layer)

    def run(self, keep: Client | None = None) -> None:
        """Run the TLS input, then write the batch; ``keep``'s replies stay queued (a busy
        script's own caller; the TLS input is then its serve_while_busy's to answer)."""
        inbox = self.inbox
        if inbox and keep is None:
            # The inbox stays non-empty meanwhile, so the commands' replies join this
            # run's queue without scheduling another.
            try:
                for layer in inbox:
                    layer.deliver()
            finally:
                inbox.clear()
        queue = self.queue
        self.queue = [conn for conn in queue if conn.client is keep] if keep is not None else []
        for hook in self.server.before_write_hooks:
            hook()
        for conn in queue:
            if keep is None or conn.client is not keep:
                conn.write_out()


def reply_batch(server: Server) -> ReplyBatch:
    """The server's one :class:`ReplyBatch`, made on first use (with the cron's check of
    the output buffer soft limits)."""
    batch = server.reply_batch
    if batch is None:
        batch = server.reply_batch = ReplyBatch(server)
        server.cron_hooks.append(lambda: check_soft_limits(server))
        server.serve_while_busy = lambda caller: serve_while_busy(server, caller)
    return batch


# Every open connection, for serve_while_busy (the event loop cannot be re-entered).
_LIVE: set[Connection] = set()


def check_soft_limits(server: Server) -> None:
    """clientsCron's output buffer check: a normal or pub/sub client past its soft limit
    to which nothing more is written would otherwise never be checked again; it is
    closed once its seconds lapse (while the transport still holds that much)."""
    for conn in [c for c in _LIVE if c.server is server and c.client is not None
                 and c.client.obuf_soft_since and not c.closed]:
        conn._check_output_limits(from_cron=True)
BIG_ARG = 32 * 1024  # Redis's PROTO_MBULK_BIG_ARG
READ_BATCH = 16 * 1024  # the most of one read parsed before its commands run (Redis's PROTO_IOBUF_LEN)


def serve_while_busy(server: Server, caller: Client) -> None:
    """Redis's processEventsWhileBlocked, for a script past busy-reply-threshold.

    The event loop is stuck inside the script's command, so the connections that
    have bytes waiting are read here directly: their complete commands get the
    server's busy-mode answer (BUSY, or SCRIPT KILL / SHUTDOWN NOSAVE / MULTI...
    doing their work) written at once; an incomplete tail stays in the
    connection's parser for when the loop resumes. The script's own client, and
    clients that wait (blocked or with queued commands), are left unread. A TLS
    connection's bytes go through its TLS layer first (which also advances a
    handshake under way), so TLS clients are answered as plain ones are, input they
    sent before the script went busy (decrypted, waiting for the reply batch) first.

    Replies already batched for this loop iteration go out first, as Redis's
    beforeSleep writes them: a client whose reply came in the same iteration as
    the script's command would otherwise wait for it forever, and never send the
    KILL that ends the script.
    """
    if server.reply_batch is not None:
        server.reply_batch.run(keep=caller)
    conns = {}
    held = {}  # TLS input decrypted before the script went busy, not run yet
    for conn in _LIVE:
        client = conn.client
        if (client is None or client is caller or conn.closed or conn.transport is None
                or client.fd < 0 or client.blocked is not None or client.pending):
            continue
        conns[client.fd] = conn
        if conn.tls is not None:
            data = conn.tls.take_input()
            if data:
                held[client.fd] = data
    if not conns:
        return
    try:
        readable, _, _ = select.select(list(conns), [], [], 0)
    except (OSError, ValueError):
        readable = []
    for fd in [*held, *(fd for fd in readable if fd not in held)]:
        conn = conns[fd]
        data = b""
        if fd in readable:
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            # (end of stream: the loop sees it again when it resumes)
            if data and conn.tls is not None:
                data = conn.tls.feed(data)
        data = held.get(fd, b"") + data
        if not data:
            continue
        client = conn.client
        if client is None or conn.closed:
            continue
        stats = server.stats
        stats.net_input_bytes += len(data)
        stats.total_reads_processed += 1
        client.last_interaction = _time()
        for argv in conn.parser.feed(data):
            if type(argv) is ProtocolError:
                client.out.append(b"-" + argv.message + b"\r\n")
                client.close_after_reply = True
                break
            server.execute_busy(client, argv)
        conn.write_out()


class Connection:
    """An asyncio protocol (``connection_made``, ``data_received``, ``eof_received``,
    ``connection_lost``, ``pause_writing``, ``resume_writing``: every method of
    ``asyncio.Protocol``, which it does not subclass so that the build can make it an
    extension type, connection.pxd; the event loops ask for the methods, not the base)."""

    def __init__(self, server: Server, unix: bool = False) -> None:
        self.server = server
        self.client: Client | None = None
        self.parser = RequestParser(server.proto_max_bulk_len)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._backlogged = False  # the transport's buffer is past its high-water mark
        self._flush_scheduled = False
        self._write_queued = False
        self._batch = reply_batch(server)
        self._unix = unix
        # A master's link to one of its replicas: what it writes is replication traffic
        # (INFO's total_net_repl_output_bytes, not total_net_output_bytes).
        self._repl = False
        self.tls: TLSLayer | None = None  # the TLS layer it runs over (its transport), if any

    # -- asyncio callbacks ---------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        _LIVE.add(self)
        server = self.server
        sock = transport.get_extra_info("socket")
        if self._unix:
            addr = (transport.get_extra_info("sockname") or "") + ":0"
            laddr = addr
        else:
            peer = transport.get_extra_info("peername") or ("?", 0)
            local = transport.get_extra_info("sockname") or ("?", 0)
            addr = _fmt_addr(peer)
            laddr = _fmt_addr(local)
        fd = sock.fileno() if sock is not None else -1
        keepalive = server.config.int("tcp-keepalive")
        if keepalive and sock is not None and not self._unix:
            set_keepalive(sock, keepalive)
        client = server.new_client(addr, laddr, fd)
        if self._unix:
            client.kind = "unix"
        client.on_output = self._output_ready
        client.output_backlog = lambda: transport.get_write_buffer_size()
        client.close_now = self._drop
        client.input_args = self.parser.pending_args_bytes
        client.as_replica = self._as_replica
        self.client = client
        if len(server.clients) > server.maxclients:
            server.stats.rejected_connections += 1
            # Over TLS nothing is written (no handshake yet): the connection just drops, as in Redis.
            transport.write(b"-ERR max number of clients reached\r\n")
            self._close()
            return
        if self.tls is None:
            self.admit()

    def admit(self) -> None:
        """The client's transport is ready (a TLS one once its handshake is done): protected
        mode, then the client counts as a connection, as Redis's clientAcceptHandler."""
        client = self.client
        transport = self.transport
        if client is None or transport is None or self.closed:
            return
        server = self.server
        if server.protected_mode_refuses(self._unix, transport):
            server.stats.rejected_connections += 1
            transport.write(_PROTECTED_MODE_ERR)
            self._close()
            return
        server.stats.total_connections_received += 1
        self.parser.auth_required = not client.authenticated and server.acl.auth_required(client)

    def eof_received(self) -> bool:
        """The peer sends nothing more: end the client now, as Redis frees it on EOF.

        Its waits end at once, so a push later in this loop iteration cannot hand
        an element to a client that will never ask again; replies already due
        still leave with the iteration's batch (after the before-write hooks, so
        appendfsync always holds for them), and then the connection closes.
        """
        client = self.client
        if client is None or self.closed:
            return False
        self.server.stats.total_reads_processed += 1  # Redis's read that met the end counts too
        self.server.client_gone(client)
        client.pending = []
        client.close_after_reply = True
        self.flush()
        return True  # keep the transport until write_out has sent what is due

    def _as_replica(self, on: bool) -> None:
        """The client became one of this master's replicas (or stopped being one)."""
        self._repl = on

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        _LIVE.discard(self)
        if self.client is not None:
            self.server.client_gone(self.client)

    def pause_writing(self) -> None:
        """The peer reads its replies slower than they come: from now on every write
        checks client-output-buffer-limit.

        Its requests are still read, as Redis reads them: a client may write a whole
        pipeline before reading any reply, and once the replies filled both socket
        buffers it would wait on its write while we waited for it to read. Replies
        that pile up are bounded as in Redis, by the output buffer limits and
        maxmemory-clients, and count in used_memory.
        """
        self._backlogged = True
        self._check_output_limits()

    def resume_writing(self) -> None:
        self._backlogged = False

    def data_received(self, data: bytes) -> None:
        client = self.client
        if client is None or self.closed:
            return
        n = len(data)
        if n > READ_BATCH:
            self._received_in_batches(data)
            return
        server = self.server
        stats = server.stats
        stats.net_input_bytes += n
        stats.total_reads_processed += 1
        # One clock reading per read, as Redis samples it once per event. Compiled, the
        # wall clock is read in C (connection.pxd's _c_wall), where time.time was a
        # module-global lookup and a Python call on every read.
        client.last_interaction = _c_wall() if _COMPILED else _time()  # noqa: F821 (connection.pxd)
        parser = self.parser
        held = client.querybuf_len  # a partial command kept from earlier reads
        commands = parser.feed(data)
        qlen = len(parser._buf)  # parser.pending_bytes(), without a method call per read
        if qlen:
            # A big argument under way (PROTO_MBULK_BIG_ARG): Redis makes room for all of
            # it as soon as its length is read, and weighs the client by that room.
            bulk = parser._bulklen
            client.querybuf_room = bulk + 2 - qlen if bulk >= BIG_ARG and bulk + 2 > qlen else 0
            if qlen > client.querybuf_peak:
                client.querybuf_peak = qlen
            if qlen > server.query_buffer_limit:
                log.warning("Closing client that reached max query buffer length: id=%d addr=%s (qbuf initial bytes: %r)",
                            client.id, client.addr, b"")
                self._close()
                return
        elif client.querybuf_room:
            client.querybuf_room = 0
        figure = server.client_mem
        if figure is not None and (held or qlen or parser.pending_args_bytes()):
            # A command bigger than one read, coming in or complete now: under
            # maxmemory it counts at once (it may evict keys before the next command
            # runs), and under maxmemory-clients it may evict clients, this one too,
            # as Redis weighs a client's query buffer and arguments then.
            client.querybuf_len = held + n
            figure.track(client)
            if self.closed:
                return
        if client.blocked is not None or client.pending:
            client.querybuf_len = qlen
            client.pending.extend(commands)
            return
        # While these commands run, Redis's query buffer still holds everything this
        # read brought (CLIENT LIST's qbuf=); afterwards only an incomplete command.
        client.querybuf_len = held + n
        self._run(commands)
        client.querybuf_len = qlen
        figure = server.client_mem
        if figure is not None and figure.clients_limit and not self.closed:
            # Its replies are queued now: weighed before any other client's command
            # runs, as Redis weighs a client after each of its commands. A reply past
            # the output buffer limit closes it first (Redis checks the limit as the
            # reply is queued): it must not get another client evicted.
            out = client.out
            if out:
                pending = sum(map(len, out))
                if pending >= server.obuf_floor and self._check_output_limits(pending):
                    return
            figure.track(client)

    def _received_in_batches(self, data: bytes) -> None:
        """A big read, taken as consecutive reads of at most READ_BATCH bytes.

        The event loop reads up to 256 KB at a time, and the parser turns all it is
        given into argument objects before the first command runs: a read of 100-ID
        XDELs was ~23k objects at once, a megabyte that the stream's nodes,
        allocated meanwhile, then kept pymalloc from returning. Redis reads 16 KB
        at a time. Any split of the byte stream is one a peer's writes could have
        made, so each slice goes through data_received as a read of its own:
        replies, MULTI, blocking, CLIENT PAUSE and protocol errors behave exactly
        as for reads that size. Nothing else runs between the slices, as nothing
        did within the one read.
        """
        for start in range(0, len(data), READ_BATCH):
            if self.closed:
                return
            self.data_received(data[start:start + READ_BATCH])

    # -- processing ------------------------------------------------------------
    def _run(self, commands: list) -> None:
        client = self.client
        assert client is not None
        server = self.server
        # The parser stops at a protocol error, so one can only come last.
        failed = commands[-1] if commands and type(commands[-1]) is ProtocolError else None
        n = len(commands) - (failed is not None)
        # Server.execute_all, called as the function it is (compiled: a C call).
        i, postponed = execute_all(server, client, commands[:n] if failed is not None else commands)
        if postponed or client.blocked is not None or client.close_after_reply or client.kill_requested:
            # Postponed by CLIENT PAUSE (it runs again when the pause ends), or the
            # client blocked or is to be closed: the rest waits (or is dropped).
            if i < len(commands):
                client.pending = commands[i:]
        elif failed is not None:
            server.count_error(ReplyError(failed.message))
            client.out.append(b"-" + failed.message + b"\r\n")
            client.close_after_reply = True
        self.parser.auth_required = not client.authenticated and server.acl.auth_required(client)
        self.flush()

    def resume(self) -> None:
        """Run commands that queued up behind a wait (block, CLIENT PAUSE)."""
        client = self.client
        if client is None or self.closed or client.blocked is not None:
            return
        if client.pending:
            pending, client.pending = client.pending, []
            self._run(pending)
        else:
            self.flush()

    def _output_ready(self, client: Client) -> None:
        """Output produced outside our own commands: join the reply batch, or resume
        the commands that queued up behind a wait first."""
        if not client.pending or client.blocked is not None:
            self.flush()
        elif not self._flush_scheduled and not self.closed:
            self._flush_scheduled = True
            loop = self.server.loop
            if loop is not None:
                loop.call_soon(self._deferred)
            else:
                self._deferred()

    def _deferred(self) -> None:
        self._flush_scheduled = False
        if self.client is not None and self.client.pending and self.client.blocked is None:
            self.resume()
        else:
            self.flush()

    def flush(self) -> None:
        """Queue this connection's replies (or its closing) for the loop iteration's batch."""
        if self._write_queued or self.closed:
            return
        client = self.client
        if client is not None and (client.out or client.kill_requested or client.close_after_reply):
            self._write_queued = True
            self._batch.add(self)

    def write_out(self) -> None:
        """Write what the client has to send, then close it if it asked to be closed."""
        self._write_queued = False
        client = self.client
        transport = self.transport
        if client is None or transport is None or self.closed:
            return
        out = client.out
        if out:
            server = self.server
            data = b"".join(out) if len(out) > 1 else out[0]
            out.clear()
            n = len(data)
            if n > client.rbp:  # the reply buffer's peak (CLIENT LIST rbp)
                client.rbp = n if n < client.rbs else client.rbs
            if n >= server.obuf_floor and self._check_output_limits(n):
                return  # closed for its output buffer limit: this output is dropped
            transport.write(data)
            stats = server.stats
            if self._repl:
                stats.net_repl_output_bytes += n
            else:
                stats.net_output_bytes += n
            stats.total_writes_processed += 1
            if self._backlogged:
                self._check_output_limits()
            figure = server.client_mem
            if figure is not None and figure.clients_limit and not self.closed:
                figure.track(client)
        if client.kill_requested:
            self._drop()
        elif client.close_after_reply:
            self._close()

    def _check_output_limits(self, pending: int = 0, from_cron: bool = False) -> bool:
        """client-output-buffer-limit (checkClientOutputBufferLimits): close the client
        when the output the transport holds, plus ``pending`` bytes about to be written,
        is past its class's hard limit, or past the soft one for more than its seconds
        (whole seconds, as Redis counts them on its unixtime clock). True when it closed.
        A write that finds it over is logged as Redis's "scheduled to be closed ASAP"; the
        cron's check ("closed", see check_soft_limits) drops it with its output at once,
        as Redis's clientsCron frees it."""
        client = self.client
        transport = self.transport
        if client is None or transport is None or client.repl is not None:
            return False  # a replica's limits are the master side's (master._check_output_limits)
        kind = "pubsub" if client.subscriptions else "normal"
        hard, soft, soft_secs = self.server.obuf_limits.get(kind, (0, 0, 0))
        over = output_limit_reached(client, transport.get_write_buffer_size() + pending,
                                    hard, soft, soft_secs)
        if over:
            log_output_limit_close(client, from_cron)
            if from_cron:
                self._drop()
            else:
                self._close()
        return bool(over)

    def _drop(self) -> None:
        """A killed or evicted client: the connection is dropped at once with whatever
        output it still holds, as Redis frees the client (closing would keep that output,
        a stopped replica's megabytes, until the peer read it)."""
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.abort()
            if self.client is not None:
                self.server.client_gone(self.client)

    def drop(self) -> None:
        """Close now, whatever is queued (a failed TLS handshake or record)."""
        self._close()

    def _close(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()
            # Gone now, as Redis frees a client once it closes it: connection_lost
            # comes a loop iteration later, after other clients' commands may have
            # looked for this one (a tracking redirect, CLIENT LIST, CLIENT KILL).
            if self.client is not None:
                self.server.client_gone(self.client)


_PROTECTED_MODE_ERR = (
    b"-DENIED Redis is running in protected mode because protected mode is enabled and no password "
    b"is set for the default user. In this mode connections are only accepted from the loopback "
    b"interface. If you want to connect from external computers to Redis you may adopt one of the "
    b"following solutions: 1) Just disable protected mode sending the command 'CONFIG SET "
    b"protected-mode no' from the loopback interface by connecting to Redis from the same host the "
    b"server is running, however MAKE SURE Redis is not publicly accessible from internet if you do "
    b"so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable "
    b"the protected mode by editing the Redis configuration file, and setting the protected mode "
    b"option to 'no', and then restarting the server. 3) If you started the server manually just "
    b"for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication "
    b"password for the default user. NOTE: You only need to do one of the above things in order for "
    b"the server to start accepting connections from the outside.\r\n"
)


def _fmt_addr(addr: tuple) -> str:
    host, port = addr[0], addr[1]
    return f"{host}:{port}"
